"""Multi-source translation: French + Korean -> English with one attention per source (lesson 07).

Zoph & Knight (2016), "Multi-Source Neural Translation", translate from two source languages at once:
each source has its own encoder and its own attention, and the decoder reads both contexts. Every
sentence of the course's grammar exists in English, French and Korean
(:mod:`attnlab.data.corpus.triples`), so the corpus gives the gold links of each English word into
*both* sources, and the attention of each source can be scored against its own gold links.

The model (:class:`MultiSourceRNN`)
-----------------------------------
* one source embedding shared by the two sources (one joint vocabulary of French and Korean
  tokens: :func:`build_vocabs`), and one bidirectional GRU encoder per source language;
* the initial state: Zoph & Knight combine the two encoders' final states with a linear layer and
  a tanh, ``h = tanh(W_c [h_fr; h_ko])``; that vector is the decoder's ``summary``, which its bridge
  turns into ``s_0`` as for every other course model;
* the decoder is lesson 1's Bahdanau decoder, :class:`attnlab.models.rnn.Seq2SeqRNN` with
  ``source="states"``, over the two encoders' states put side by side. ``combine`` chooses how the
  two sources are attended:

  - ``"separate"`` (Zoph & Knight): ``sources=2``, one softmax per source and the contexts combined
    as ``c_t = tanh(W [c_fr; c_ko])``; each source's block of the attention sums to 1;
  - ``"flat"`` (Libovický & Helcl 2017, "Attention Strategies for Multi-Source Sequence-to-Sequence
    Learning", their flat combination): one softmax over the positions of both sources, so the
    share of the attention mass on each source says directly which source a word was read from.

Input format
------------
``src`` is one ``(B, 2, S)`` tensor of token ids of the joint vocabulary: row 0 of every sentence
is the French sentence + ``<eos>``, row 1 the Korean sentence + ``<eos>``, each right-padded with
``PAD`` to the common width ``S``. With ``src`` batch-first, the decoding protocol (``check_source``,
``encode``, ``init_state``, ``step``) and :mod:`attnlab.models.decoding`'s greedy and beam decoders work
unchanged (they read ``B = src.shape[0]`` and the device, and expand only the memory). The
attention has ``2 S`` positions, French block first: :func:`by_source` reshapes ``(..., 2 S)`` to
``(..., 2, S)``, which lines up with ``src``.

Data, training, evaluation
--------------------------
:func:`encode_triples` and :func:`make_triple_dataloaders` turn triples into batches
``(src (B, 2, S), tgt_in (B, T), tgt_out (B, T))`` (with :func:`attnlab.data.loaders.collate`, in
length-bucketed, seeded order like :func:`attnlab.data.loaders.make_dataloaders`); training goes through
:func:`attnlab.training.train.fit_budget`. :func:`evaluate` translates (BLEU, chrF, exact match, overall and
per English length bucket) and scores the teacher-forced attention of each source
(:func:`source_attention`) against that source's gold links (AER and argmax agreement,
:mod:`attnlab.data.metrics`), and for ``"flat"`` the share of attention mass on French vs Korean
(:func:`source_mass` per English word). For a figure, :func:`attnlab.data.gold.gold_attention` of
``triple.to_english(lang)`` is the gold block of one source, ``(T + 1, n + 1)``: its first ``T`` rows
line up with the block of :func:`source_attention`. The presets (``multisource``, ``multisource_flat``) are
trained and recorded by :mod:`attnlab.training.multisource_experiments`.

Shape legend
------------
B  batch size
S  width of a source row: the longer of the two sentences + ``<eos>``
K  number of sources (2: French, Korean)
T  target length (English + ``<bos>`` for inputs / ``<eos>`` for outputs)
E  embedding size
H  encoder / decoder state size (both directions of an encoder together)
V  target vocabulary size
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from attnlab.core.checks import (
    check_choice,
    check_positive_int,
    check_probability,
    check_right_padded,
    check_tensor,
    check_token_ids,
    eval_mode,
)
from attnlab.core.profiles import get_device
from attnlab.data import loaders
from attnlab.data.corpus import BUCKET_NAMES
from attnlab.data.corpus.splits import Pair
from attnlab.data.corpus.triples import CORPUS_VERSION, LANG_NAMES, LANGS, Triple, TripleSplits
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.metrics import (
    alignment_agreement,
    alignment_error_rate,
    corpus_bleu,
    corpus_chrf,
    exact_match,
)
from attnlab.data.vocab import EOS, PAD, Vocab
from attnlab.models.decoding import beam_search, length_batches
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN, StatesEncoderDecoder, encode_tokens, states_decoder_config

__all__ = [
    "COMBINES",
    "TASK",
    "MultiSourceConfig",
    "MultiSourceRNN",
    "by_source",
    "build_vocabs",
    "encode_triples",
    "make_triple_dataloaders",
    "translate",
    "source_attention",
    "source_mass",
    "evaluate",
]

COMBINES = ("separate", "flat")
TASK = "fr+ko->en"  # recorded in results; lesson tables that list translation pairs leave such results out
DATA_SEED = 0  # the triples are the same for every training seed (as for the pair corpora)
_EVAL_BS = 250


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiSourceConfig:
    """Configuration of :class:`MultiSourceRNN` (frozen: a config is a value, saved beside checkpoints).

    Attributes:
        src_vocab_size: size of the joint French + Korean vocabulary (one embedding for both).
        tgt_vocab_size: V (English).
        emb_dim: E (source and target embeddings).
        hid_dim: H, even (each encoder has ``H / 2`` units per direction).
        attn_dim: hidden size of the Bahdanau (concat) score (default H).
        dropout: dropout on the embeddings and the decoder's outputs, in ``[0, 1)``.
        combine: ``"separate"`` (one softmax per source, contexts combined; Zoph & Knight 2016) or
            ``"flat"`` (one softmax over both sources' positions; Libovický & Helcl 2017).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 64
    hid_dim: int = 256
    attn_dim: int | None = None
    dropout: float = 0.0
    combine: str = "separate"

    def __post_init__(self):
        check_positive_int("src_vocab_size", self.src_vocab_size)
        check_positive_int("hid_dim", self.hid_dim)
        if self.hid_dim % 2:
            raise ValueError(f"hid_dim must be even (two GRU directions of hid_dim // 2 units), got {self.hid_dim}")
        check_probability("dropout", self.dropout)
        check_choice("combine", self.combine, COMBINES)
        self.rnn_config()  # the decoder's own sizes are checked by RNNConfig

    def rnn_config(self) -> RNNConfig:
        """The :class:`attnlab.models.rnn.RNNConfig` of the decoder: Bahdanau attention over the two encoders'
        states."""
        return states_decoder_config(self, sources=len(LANGS) if self.combine == "separate" else 1)


def by_source(attn: torch.Tensor) -> torch.Tensor:
    """Split attention over the ``2 S`` positions of both sources into one block per source.

    Args:
        attn: ``(..., K * S)`` weights, French block first (what :class:`MultiSourceRNN` returns).

    Returns:
        ``(..., K, S)``: ``[..., k, j]`` is the weight of ``src[:, k, j]``.

    Raises:
        ValueError: the last dimension is not a multiple of the number of sources.
    """
    check_tensor("attn", attn)
    K = len(LANGS)
    if attn.dim() < 1 or attn.shape[-1] % K:
        raise ValueError(f"attn must be (..., K*S) with K={K} sources, got shape {tuple(attn.shape)}")
    return attn.unflatten(-1, (K, attn.shape[-1] // K))  # (..., K, S)


class MultiSourceRNN(StatesEncoderDecoder):
    """French + Korean -> English: a shared embedding, one BiGRU per source, lesson 1's Bahdanau decoder.

    ``src`` is ``(B, 2, S)`` (see the module docstring). :meth:`forward` returns the logits (and the
    ``(B, T, 2 S)`` attention, French block first); the decoding protocol comes from
    :class:`attnlab.models.rnn.StatesEncoderDecoder`, with :meth:`encode` building the two-source memory.
    """

    def __init__(self, config: MultiSourceConfig):
        super().__init__()
        if not isinstance(config, MultiSourceConfig):
            raise TypeError(f"config must be a MultiSourceConfig, got {type(config).__name__}")
        self.config = c = config
        E, H = c.emb_dim, c.hid_dim
        self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)  # one table for both sources
        self.encoders = nn.ModuleDict({lang: nn.GRU(E, H // 2, batch_first=True, bidirectional=True) for lang in LANGS})
        self.init_combine = nn.Linear(len(LANGS) * H, H)  # h = tanh(W_c [h_fr; h_ko]) (Zoph & Knight)
        self.drop = nn.Dropout(c.dropout)
        self.decoder = Seq2SeqRNN(c.rnn_config())

    def _device(self) -> torch.device:
        return self.src_emb.weight.device

    def check_source(self, src) -> None:
        """Raise unless ``src`` is ``(B, 2, S)`` token ids of the source vocabulary on the model's device,
        each of its rows (French, Korean) right-padded and holding at least one token.

        Raises:
            TypeError: ``src`` is not a tensor of integer ids.
            ValueError: another shape, an id outside the vocabulary, another device, a source row that
                is all padding or has padding before a token.
        """
        K = len(LANGS)
        shape_text = f"(B, {K}, S) token ids (row 0 French + <eos>, row 1 Korean + <eos>)"
        check_tensor("src", src, dims=3, shape_text=shape_text)
        if src.shape[1] != K:
            raise ValueError(f"src must be {shape_text}, got shape {tuple(src.shape)}")
        for k, lang in enumerate(LANGS):
            name = f"src[:, {k}] ({LANG_NAMES[lang]})"
            ids = src[:, k]  # (B, S)
            check_token_ids(name, ids, vocab_size=self.config.src_vocab_size, device=self._device())
            check_right_padded(name, ids, PAD)

    def _encode_one(self, lang: str, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One source's right-padded ids ``(B, S)`` -> its BiGRU states ``(B, S, H)`` and final state ``(B, H)``."""
        return encode_tokens(self.src_emb, self.encoders[lang], ids, (ids != PAD).sum(1), self.drop)

    def _encode_all(self, src: torch.Tensor):
        """``src (B, K, S)`` -> states ``(B, K*S, H)``, keep ``(B, K*S)``, segments ``(B, K*S)``, summary ``(B, H)``."""
        B, K, S = src.shape
        parts = [self._encode_one(lang, src[:, k]) for k, lang in enumerate(LANGS)]
        states = torch.cat([p[0] for p in parts], dim=1)  # (B, K*S, H): French block, then Korean
        keep = (src != PAD).flatten(1)  # (B, K*S), in the order of the blocks
        segments = torch.arange(K, device=src.device).repeat_interleave(S).expand(B, -1)  # (B, K*S)
        summary = torch.tanh(self.init_combine(torch.cat([p[1] for p in parts], dim=-1)))  # (B, H)
        return states, keep, segments, summary

    def encode_states(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``src (B, 2, S)`` -> both encoders' states side by side ``(B, 2 S, H)`` and which are real ``(B, 2 S)``."""
        self.check_source(src)
        states, keep, _, _ = self._encode_all(src)
        return states, keep  # (B, 2S, H), (B, 2S)

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Check ``src``, run both encoders and build the decoder's memory over their states.

        Args:
            src: ``(B, 2, S)`` token ids (see the module docstring).

        Returns:
            The memory of :meth:`attnlab.models.rnn.Seq2SeqRNN.memory_from_states`: ``states (B, 2 S, H)``,
            ``mask (B, 2 S)``, the combined final states as ``summary (B, H)`` and, for
            ``combine="separate"``, ``segments (B, 2 S)`` (0 French, 1 Korean).

        Raises:
            TypeError, ValueError: as :meth:`check_source`.
        """
        self.check_source(src)
        states, keep, segments, summary = self._encode_all(src)
        separate = self.config.combine == "separate"
        return self.decoder.memory_from_states(
            states, keep, segments=segments if separate else None, summary=summary, name="src"
        )

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score English sentences of a batch of French + Korean sources.

        Args:
            src: ``(B, 2, S)`` token ids.
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + English, right-padded with ``PAD``).
            teacher_forcing: as :meth:`attnlab.models.rnn.Seq2SeqRNN.decode`.
            return_attention: also return the attention ``(B, T, 2 S)`` (:func:`by_source` splits it).

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn)`` with ``return_attention``.

        Raises:
            TypeError, ValueError: bad ``src`` (:meth:`check_source`), or ``tgt_in`` / ``teacher_forcing``
                (:meth:`attnlab.models.rnn.Seq2SeqRNN.decode`; e.g. a batch size other than ``src``'s).
        """
        memory = self.encode(src)
        return self.decoder.decode(memory, tgt_in, teacher_forcing=teacher_forcing, return_attention=return_attention)


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------


def _triples(triples, name: str = "triples") -> list[Triple]:
    triples = list(triples)
    for i, t in enumerate(triples):
        if not isinstance(t, Triple):
            raise TypeError(f"{name}[{i}] must be an attnlab.data.corpus.triples.Triple, got {type(t).__name__}")
    return triples


def build_vocabs(splits_or_triples: TripleSplits | Iterable[Triple]) -> tuple[Vocab, Vocab]:
    """The joint French + Korean source vocabulary and the English target vocabulary of the training triples.

    Args:
        splits_or_triples: :class:`~attnlab.data.corpus.triples.TripleSplits` (its ``train`` is used) or triples.

    Returns:
        ``(src_vocab, tgt_vocab)``; ``src_vocab`` holds both languages' tokens (``"."`` once).
    """
    data = splits_or_triples.train if isinstance(splits_or_triples, TripleSplits) else splits_or_triples
    triples = _triples(data)
    sources = itertools.chain.from_iterable((t.fr.tgt, t.ko.tgt) for t in triples)
    return Vocab.build(sources), Vocab.build(t.en for t in triples)


def encode_triples(
    triples: Iterable[Triple], src_vocab: Vocab, tgt_vocab: Vocab
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Tensors for each triple: ``(src (2, S), tgt_in (T,), tgt_out (T,))``, int64.

    ``src`` row 0 is French + ``<eos>``, row 1 Korean + ``<eos>``, the shorter one padded with
    ``PAD``; ``tgt_in`` = ``<bos>`` + English, ``tgt_out`` = English + ``<eos>``
    (:func:`attnlab.data.loaders.encode_pairs` encodes each side).
    """
    triples = _triples(triples)
    fr, ko = (encode_pairs((Pair(t.side(lang), t.en) for t in triples), src_vocab, tgt_vocab) for lang in LANGS)
    return [
        (pad_sequence([f[0], k[0]], batch_first=True, padding_value=PAD), f[1], f[2])  # (2, S), (T,), (T,)
        for f, k in zip(fr, ko, strict=True)
    ]


def make_triple_dataloaders(
    splits: TripleSplits,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    bs: int = 64,
    device: str | torch.device | None = None,
    seed: int = 0,
    num_workers: int = 0,
):
    """fastai ``DataLoaders`` over the train and valid triples, as
    :func:`attnlab.data.loaders.make_dataloaders` builds them.

    Train: the seeded, length-bucketed ``SortedDL`` of :mod:`attnlab.data.loaders` (order fixed by ``seed``
    and the epoch), sorted by the width ``S`` of the ``(2, S)`` source; valid: longest first, not
    shuffled. Batches are ``(src (B, 2, S), tgt_in (B, T), tgt_out (B, T))``, padded by
    :func:`attnlab.data.loaders.collate` (which pads a 2-D item in both dimensions with zeros, and
    ``PAD`` is 0, so both source rows come out right-padded).

    Args:
        splits: the triples; ``test`` is not used.
        src_vocab, tgt_vocab: from :func:`build_vocabs`.
        bs: batch size.
        device: where batches go; None picks :func:`attnlab.core.profiles.get_device`.
        seed: seed of the training order.
        num_workers: worker processes for loading.

    Returns:
        ``fastai.data.core.DataLoaders`` (train, valid).
    """
    from fastai.data.core import DataLoaders
    from fastai.text.data import SortedDL

    if PAD != 0:  # pragma: no cover - collate pads 2-D items with zeros
        raise AssertionError("make_triple_dataloaders relies on PAD == 0")
    if not isinstance(splits, TripleSplits):
        raise TypeError(f"splits must be TripleSplits (attnlab.data.corpus.triples), got {type(splits).__name__}")
    device = get_device() if device is None else device
    train = encode_triples(splits.train, src_vocab, tgt_vocab)
    valid = encode_triples(splits.valid, src_vocab, tgt_vocab)
    common = dict(bs=check_positive_int("bs", bs), create_batch=collate, num_workers=num_workers, device=device)
    train_dl = loaders.SeededSortedDL(
        train, res=[it[0].size(1) for it in train], shuffle=True, drop_last=False, seed=seed, **common
    )
    valid_dl = SortedDL(valid, res=[it[0].size(1) for it in valid], shuffle=False, **common)
    return DataLoaders(train_dl, valid_dl, device=device)


# ----------------------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------------------


def _check_model(model) -> None:
    if not isinstance(model, MultiSourceRNN):
        raise TypeError(f"model must be a MultiSourceRNN, got {type(model).__name__}")


def _batches_of(items, bs: int):
    """Length-sorted index batches (evaluate's) and their collated tensors."""
    for idx in length_batches(len(items), [it[0].size(1) for it in items], bs):
        yield idx, collate([items[i] for i in idx])


@torch.no_grad()
def translate(
    model: MultiSourceRNN,
    triples: Sequence[Triple],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    bs: int = _EVAL_BS,
    max_len: int | None = None,
) -> tuple[list[list[str]], float]:
    """English translations of the French + Korean sides of ``triples`` (batched, length-sorted).

    Args:
        model: a :class:`MultiSourceRNN`.
        triples: the triples (their English side is not read).
        src_vocab, tgt_vocab: vocabularies.
        beam: beam width (1 = greedy), :func:`attnlab.models.decoding.beam_search`.
        bs: triples per batch.
        max_len: most English tokens; default ``2 * S + 10`` per batch.

    Returns:
        ``(hypotheses, seconds)``: token lists in the order of ``triples``, wall time.
    """
    _check_model(model)
    triples = _triples(triples)
    items = encode_triples(triples, src_vocab, tgt_vocab)
    device = model._device()
    hyps: list[list[str] | None] = [None] * len(items)
    start = time.perf_counter()
    for idx, (src, _, _) in _batches_of(items, check_positive_int("bs", bs)):
        src = src.to(device)  # (b, 2, S)
        out = beam_search(model, src, beam=beam, max_len=max_len or 2 * src.size(2) + 10)
        for row, i in enumerate(idx):
            toks = out.tokens[row, : int(out.lengths[row])].tolist()
            hyps[i] = tgt_vocab.decode(toks[:-1] if toks and toks[-1] == EOS else toks, strip=True)
    return hyps, time.perf_counter() - start


def source_attention(
    model: MultiSourceRNN, triples: Sequence[Triple], src_vocab: Vocab, tgt_vocab: Vocab, *, bs: int = _EVAL_BS
) -> list[dict[str, np.ndarray]]:
    """The attention of each English word over each source, with the gold English fed in (teacher forcing).

    Runs in eval mode without gradients and restores the model's mode afterwards.

    Returns:
        Per triple ``{"fr": (T, n_fr + 1), "ko": (T, n_ko + 1)}`` float arrays: row ``t`` is the step that
        writes English token ``t`` (``T`` tokens, no ``<eos>`` step), the columns are the source's tokens
        and its ``<eos>``, the weights as the model gave them (with ``combine="separate"`` each row of a
        block sums to 1; with ``"flat"`` a row sums to 1 over both blocks together).
    """
    _check_model(model)
    triples = _triples(triples)
    items = encode_triples(triples, src_vocab, tgt_vocab)
    device = model._device()
    out: list[dict[str, np.ndarray] | None] = [None] * len(items)
    with eval_mode(model):
        for idx, (src, tgt_in, _) in _batches_of(items, check_positive_int("bs", bs)):
            _, attn = model(src.to(device), tgt_in.to(device), return_attention=True)  # (b, T, 2S)
            blocks = by_source(attn).float().cpu().numpy()  # (b, T, 2, S)
            for row, i in enumerate(idx):
                t = triples[i]
                out[i] = {lang: blocks[row, : len(t.en), k, : len(t.side(lang)) + 1] for k, lang in enumerate(LANGS)}
    return out


def source_mass(attns: Sequence[dict[str, np.ndarray]], lang: str = "fr") -> list[np.ndarray]:
    """Per triple, the share of each English word's attention that lies on the ``lang`` block.

    Args:
        attns: from :func:`source_attention`.
        lang: ``"fr"`` or ``"ko"``.

    Returns:
        Per triple a ``(T,)`` array in ``[0, 1]``: the block's mass over both blocks' (for a ``"flat"``
        model the block's own mass, the row summing to 1; for ``"separate"`` always 0.5).
    """
    check_choice("lang", lang, LANGS)
    out = []
    for a in attns:
        total = sum(a[x].sum(1) for x in LANGS)  # (T,)
        out.append(a[lang].sum(1) / np.where(total > 0, total, 1.0))  # (T,)
    return out


def _link_view(block: np.ndarray) -> np.ndarray:
    """A block renormalised to sum to 1 per row, without the source's ``<eos>`` column: ``(T, n)``."""
    total = block.sum(1, keepdims=True)  # (T, 1)
    return (block / np.where(total > 0, total, 1.0))[:, :-1]  # (T, n)


def _source_share(attns: Sequence[dict[str, np.ndarray]], triples: Sequence[Triple]) -> dict:
    """Where the flat attention's mass and peak lie, per English token (see :func:`evaluate`)."""
    mass = {"all": [], "content": [], "function": [], "no_ko_link": []}
    top_fr, top_gold = [], []
    for a, t, fr_mass in zip(attns, triples, source_mass(attns, "fr"), strict=True):
        pairs = {lang: t.to_english(lang) for lang in LANGS}
        ko_possible = pairs["ko"].possible
        n_fr = a["fr"].shape[1]
        row = np.concatenate([a["fr"], a["ko"]], axis=1)  # (T, n_fr + 1 + n_ko + 1)
        peak = row.argmax(1)  # (T,)
        for e, m in enumerate(fr_mass):
            content = t.en_content[e]
            mass["all"].append(m)
            mass["content" if content else "function"].append(m)
            if not pairs["ko"].align[e] and not ko_possible[e]:
                mass["no_ko_link"].append(m)
            if content:
                lang, j = ("fr", peak[e]) if peak[e] < n_fr else ("ko", peak[e] - n_fr)
                top_fr.append(lang == "fr")
                top_gold.append(int(j) in pairs[lang].align[e])
    mean = lambda xs: round(float(np.mean(xs)), 4) if xs else None
    return {
        "mass_fr": mean(mass["all"]),
        "mass_fr_content": mean(mass["content"]),
        "mass_fr_function": mean(mass["function"]),
        "mass_fr_no_ko_link": mean(mass["no_ko_link"]),
        "top_fr_content": mean(top_fr),
        "top_gold_content": mean(top_gold),
    }


def evaluate(
    model: MultiSourceRNN,
    triples: Sequence[Triple],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    bs: int = _EVAL_BS,
) -> dict:
    """Translate ``triples`` and score the translations and each source's attention.

    Translation: corpus BLEU and chrF (:func:`attnlab.data.metrics.corpus_bleu` / ``corpus_chrf``) and
    exact match, overall and per English length bucket (``by_bucket``).

    Attention, teacher-forced (:func:`source_attention`), per source in ``by_source[lang]``: each
    source's block is renormalised to a distribution over its positions (a no-op for ``"separate"``,
    whose blocks are softmaxes already), its ``<eos>`` column dropped, and scored against that
    source's gold links inverted to English (:meth:`attnlab.data.corpus.triples.Triple.to_english`):
    ``aer`` (:func:`attnlab.data.metrics.alignment_error_rate`) and ``align_content`` / ``align_all`` /
    ``align_function`` (:func:`attnlab.data.metrics.alignment_agreement`: the share of English content
    words, all words, function words whose most attended position in that source is a gold link).

    For ``combine="flat"``, ``source_share`` says which source each English word is read from:
    ``mass_fr`` is the mean share of the attention mass on the French block (Korean has the rest),
    over all English tokens and over content words, function words and the words with no Korean link
    at all (the/a/an); ``top_fr_content`` is the share of content words whose single most attended
    position (over both sources) is French, ``top_gold_content`` the share for which that position is
    a gold link of its source. ``None`` for ``"separate"``, whose blocks sum to 1 each by construction.

    Returns:
        dict with ``bleu``, ``chrf``, ``exact_match``, ``by_bucket``, ``by_source``, ``source_share``,
        ``combine``, ``decode_seconds``, ``sentences_per_second``, ``n_test``, ``beam``, ``corpus_version``.
    """
    _check_model(model)
    triples = _triples(triples)
    if not triples:
        raise ValueError("triples is empty: nothing to evaluate")
    hyps, seconds = translate(model, triples, src_vocab, tgt_vocab, beam=beam, bs=bs)
    refs = [list(t.en) for t in triples]

    def scores(sel):
        h, r = [hyps[i] for i in sel], [refs[i] for i in sel]
        return {
            "bleu": round(corpus_bleu(h, r), 2),
            "chrf": round(corpus_chrf(h, r), 2),
            "exact_match": round(exact_match(h, r), 4),
        }

    res: dict = {**scores(range(len(triples))), "by_bucket": {}}
    for name in BUCKET_NAMES:
        sel = [i for i, t in enumerate(triples) if t.bucket == name]
        if sel:
            res["by_bucket"][name] = {**scores(sel), "n": len(sel)}
    attns = source_attention(model, triples, src_vocab, tgt_vocab, bs=bs)
    res["by_source"] = {}
    for lang in LANGS:
        pairs = [t.to_english(lang) for t in triples]
        blocks = [_link_view(a[lang]) for a in attns]
        agreement = alignment_agreement(blocks, pairs)
        res["by_source"][lang] = {
            "aer": round(alignment_error_rate(blocks, pairs), 4),
            **{k: round(v, 4) for k, v in agreement.items()},
        }
    res["source_share"] = _source_share(attns, triples) if model.config.combine == "flat" else None
    res.update(
        combine=model.config.combine,
        decode_seconds=round(seconds, 3),
        sentences_per_second=round(len(triples) / max(seconds, 1e-9), 1),
        n_test=len(triples),
        beam=beam,
        corpus_version=CORPUS_VERSION,
    )
    return res
