"""Attention that points: copy models over an extended vocabulary (lesson 10).

One model class, :class:`CopyModel`, with two switches in :class:`CopyConfig`:

* ``attention="bahdanau"`` -- the pointer-generator of See et al. (2017), "Get To The Point": the
  lesson-02 model (:class:`attnlab.models.rnn.Seq2SeqRNN` with Bahdanau attention, used as it is, not
  copied) whose attention weights double as a distribution over the source positions to copy from,
  mixed with its vocabulary distribution by

      p_gen = sigmoid(w_c . c_t + w_s . s_t + w_x . x_t + b),
      P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{j: x_j = w} alpha_tj

  (``c_t`` the context, ``s_t`` the decoder state, ``x_t`` the embedded input: the three parts of the
  model's pre-output ``[s_t; c_t; E y_{t-1}]``, so ``w_c, w_s, w_x, b`` are one linear layer on it).
* ``attention="conv"`` -- the convolutional attention network with a copy head of Allamanis, Peng &
  Sutton (2016), "A Convolutional Attention Network for Extreme Summarization of Source Code": no
  encoder RNN; the attention features are convolutions over the source embeddings gated by the
  previous decoder state,

      L1 = relu(conv_1(E_src)),  L2 = conv_2(L1) * h_{t-1},  L_feat = L2 / ||L2||_2,
      alpha = softmax(conv_alpha(L_feat)),  kappa = softmax(conv_kappa(L_feat)),
      lambda = max_j sigmoid(conv_lambda(L_feat))_j,  n = softmax(W_out sum_j alpha_j E_j + b),
      P(w) = (1 - lambda) n(w) + lambda sum_{j: x_j = w} kappa_j,   h_t = GRU(E y_{t-1}, h_{t-1}),

  so "the word after *Mr.*" is a local pattern a filter can match. Departures from the paper: the
  filter widths are small (the sentences are short), the first state is ``tanh(W mean_j E_j)`` and the
  output layer is its own matrix rather than the embedding; ``p_gen`` below means ``1 - lambda``.
* ``copy=False`` -- no copying: the output is the vocabulary distribution alone (for
  ``attention="bahdanau"`` the lesson-02 model's own distribution).

The extended vocabulary (See et al.): per sentence, every source word that is not in the target
vocabulary gets a temporary id ``V, V+1, ...`` in order of first appearance. ``copy_ids (B, S)`` gives
each source position its id in that extended vocabulary (a target-vocabulary id when the word has one);
the model then outputs a distribution over ``V + X`` ids, ``X`` the most temporary ids of a row.
:func:`encode_copy_pair` builds the tensors from a pair and the two vocabularies.

Shape legend
------------
B  batch size
S  source length (incl. ``<eos>``)
T  target length
E  embedding size
H  decoder state size
C  channels of the first convolution
V  target vocabulary size
X  temporary ids of the extended vocabulary (the most of any row)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.checks import (
    check_choice,
    check_int,
    check_positive_int,
    check_probability,
    check_right_padded,
    check_token_ids,
)
from attnlab.core.masks import masked_softmax
from attnlab.data.vocab import BOS, EOS, PAD, UNK, Vocab
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

__all__ = [
    "COPY_ATTENTIONS",
    "CopyConfig",
    "CopyModel",
    "check_copy_ids",
    "extended_size",
    "encode_copy_pair",
    "decode_extended",
    "mix_copy",
    "greedy_copy",
]

COPY_ATTENTIONS = ("bahdanau", "conv")
_LOG_FLOOR = 1e-12  # log(0) of an id nobody can produce -> log(1e-12): finite losses


@dataclass(frozen=True)
class CopyConfig:
    """Configuration of :class:`CopyModel` (frozen; saved beside checkpoints).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes (``V`` is the target's).
        emb_dim: E. hid_dim: H (even for ``"bahdanau"``: its encoder has two directions).
        attn_dim: hidden size of the Bahdanau score (default H).
        attention: ``"bahdanau"`` (See et al.'s pointer-generator) or ``"conv"`` (Allamanis et al.).
        copy: mix in the copy distribution (False: the vocabulary distribution alone).
        channels: C, channels of the first convolution (``"conv"``).
        widths: three odd filter widths ``(w1, w2, w3)``: ``conv_1``, ``conv_2`` and the three heads.
        dropout: dropout on embeddings and outputs (``"bahdanau"``).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 32
    hid_dim: int = 96
    attn_dim: int | None = 32
    attention: str = "bahdanau"
    copy: bool = True
    channels: int = 32
    widths: tuple[int, int, int] = (3, 3, 3)
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("src_vocab_size", "tgt_vocab_size", "emb_dim", "hid_dim", "channels"):
            check_positive_int(name, getattr(self, name))
        if self.attn_dim is not None:
            check_positive_int("attn_dim", self.attn_dim)
        check_choice("attention", self.attention, COPY_ATTENTIONS)
        if not isinstance(self.copy, bool):
            raise TypeError(f"copy must be a bool, got {type(self.copy).__name__}")
        widths = tuple(self.widths) if isinstance(self.widths, (list, tuple)) else None
        if widths is None or len(widths) != 3:
            raise ValueError(f"widths must be three odd filter widths (w1, w2, w3), got {self.widths!r}")
        for w in widths:
            check_int("widths", w, minimum=1)
            if w % 2 == 0:
                raise ValueError(f"widths must be odd (centred convolutions), got {self.widths!r}")
        object.__setattr__(self, "widths", widths)  # a list from JSON becomes the tuple
        check_probability("dropout", self.dropout)
        if self.attention == "bahdanau" and self.hid_dim % 2:
            raise ValueError(
                f"hid_dim must be even with attention='bahdanau' (two encoder directions), got {self.hid_dim}"
            )

    def rnn_config(self) -> RNNConfig:
        """The lesson-02 model's config inside a ``"bahdanau"`` copy model."""
        return RNNConfig(
            src_vocab_size=self.src_vocab_size,
            tgt_vocab_size=self.tgt_vocab_size,
            emb_dim=self.emb_dim,
            hid_dim=self.hid_dim,
            attention="bahdanau",
            score="concat",
            attn_dim=self.attn_dim,
            dropout=self.dropout,
        )


def extended_size(copy_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Per row, the size of its extended vocabulary: ``V`` plus its temporary ids. ``(B, S) -> (B,)``."""
    return vocab_size + (copy_ids - vocab_size + 1).clamp_min(0).amax(1)  # (B,): highest temporary id + 1


def check_copy_ids(copy_ids, src: torch.Tensor, vocab_size: int) -> None:
    """Raise unless ``copy_ids`` gives each position of ``src`` an id of its row's extended vocabulary.

    A row's temporary ids are ``V, V+1, ..., V+n-1`` with no gap (one per distinct source word outside
    the target vocabulary); an id beyond them, a negative id, or a ``copy_ids`` of another shape than
    ``src`` is refused.

    Raises:
        TypeError: not an integer tensor.
        ValueError: another shape or device than ``src``, an id outside the row's extended vocabulary.
    """
    check_token_ids("copy_ids", copy_ids, device=src.device)
    if copy_ids.shape != src.shape:
        raise ValueError(f"copy_ids must have the shape of src {tuple(src.shape)}, got {tuple(copy_ids.shape)}")
    if bool((copy_ids < 0).any()):
        raise ValueError(f"copy_ids holds the negative id {int(copy_ids.min())}")
    for b, row in enumerate(copy_ids.tolist()):
        temporary = sorted({i for i in row if i >= vocab_size})
        n = len(temporary)
        if temporary and temporary[-1] >= vocab_size + n:
            bad = next(i for i in temporary if i >= vocab_size + n)
            raise ValueError(
                f"copy_ids row {b} holds id {bad}, outside its extended vocabulary [0, {vocab_size + n}) "
                f"(the target vocabulary's {vocab_size} ids and the row's {n} temporary ids)"
            )


def mix_copy(
    p_vocab: torch.Tensor, copy_attn: torch.Tensor, p_gen: torch.Tensor, copy_ids: torch.Tensor
) -> torch.Tensor:
    """See et al.'s final distribution over the extended vocabulary.

    ``P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{j: copy_ids_j = w} a_j``.

    Args:
        p_vocab: ``(B, V)`` vocabulary distribution.
        copy_attn: ``(B, S)`` copy distribution over source positions (0 at padding).
        p_gen: ``(B,)`` or ``(B, 1)`` generation probability.
        copy_ids: ``(B, S)`` extended ids of the source positions.

    Returns:
        ``(B, V + X)`` probabilities; each row sums to 1 when ``p_vocab`` and ``copy_attn`` do.
    """
    B, V = p_vocab.shape
    X = int((copy_ids - V + 1).clamp_min(0).max()) if copy_ids.numel() else 0
    p_gen = p_gen.reshape(B, 1)  # (B, 1)
    probs = torch.cat([p_gen * p_vocab, p_vocab.new_zeros(B, X)], dim=1)  # (B, V+X)
    return probs.scatter_add(1, copy_ids, (1 - p_gen) * copy_attn)  # (B, V+X)


class CopyModel(nn.Module):
    """A pointer-generator (``attention="bahdanau"``) or a convolutional copy network (``"conv"``).

    See the module docstring.
    """

    def __init__(self, config: CopyConfig):
        super().__init__()
        self.config = c = config
        self.aux_loss = None  # fastai's AuxLoss callback reads it: copy models add none
        E, H, C, V = c.emb_dim, c.hid_dim, c.channels, c.tgt_vocab_size
        if c.attention == "bahdanau":
            self.rnn = Seq2SeqRNN(c.rnn_config())
            if c.copy:
                self.gen = nn.Linear(2 * H + E, 1)  # w_s, w_c, w_x and b of p_gen on [s_t; c_t; E y_{t-1}]
        else:
            w1, w2, w3 = c.widths
            self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)
            self.tgt_emb = nn.Embedding(V, E, padding_idx=PAD)
            self.bridge = nn.Linear(E, H)
            self.decoder = nn.GRUCell(E, H)
            self.conv1 = nn.Conv1d(E, C, w1, padding=w1 // 2)
            self.conv2 = nn.Conv1d(C, H, w2, padding=w2 // 2)
            self.conv_alpha = nn.Conv1d(H, 1, w3, padding=w3 // 2)
            if c.copy:
                self.conv_kappa = nn.Conv1d(H, 1, w3, padding=w3 // 2)
                self.conv_lambda = nn.Conv1d(H, 1, w3, padding=w3 // 2)
            self.out = nn.Linear(E, V)

    # ------------------------------------------------------------------ steps
    def check_inputs(self, src, copy_ids) -> None:
        """Raise unless ``src`` are right-padded source ids and ``copy_ids`` their extended ids.

        Raises:
            TypeError, ValueError: as :func:`attnlab.core.checks.check_token_ids` and :func:`check_copy_ids`.
        """
        check_token_ids("src", src, vocab_size=self.config.src_vocab_size, device=self.out_device())
        check_right_padded("src", src, PAD)
        if self.config.copy:
            check_copy_ids(copy_ids, src, self.config.tgt_vocab_size)

    def out_device(self) -> torch.device:
        return next(self.parameters()).device

    def start(self, src: torch.Tensor, copy_ids: torch.Tensor | None) -> tuple[dict, torch.Tensor]:
        """Encode: the memory dict and the first decoder state ``(B, H)``."""
        self.check_inputs(src, copy_ids)
        mask = src != PAD  # (B, S)
        if self.config.attention == "bahdanau":
            memory = self.rnn.encode(src)
            return {**memory, "copy_ids": copy_ids}, self.rnn.init_state(memory)[0]
        emb = self.src_emb(src)  # (B, S, E)
        keep = mask.unsqueeze(-1).to(emb.dtype)  # (B, S, 1)
        h0 = torch.tanh(self.bridge((emb * keep).sum(1) / keep.sum(1).clamp_min(1)))  # (B, H)
        l1 = torch.relu(self.conv1(emb.transpose(1, 2)))  # (B, C, S)
        l2 = self.conv2(l1 * keep.transpose(1, 2)).transpose(1, 2)  # (B, S, H): conv_2(L1), gated per step
        return {"emb": emb, "l2": l2, "mask": mask, "copy_ids": copy_ids}, h0

    def step(self, memory: dict, state: torch.Tensor, y_prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """One output step from the previous token ``y_prev (B,)`` (extended ids are read as ``<unk>``).

        Returns:
            ``probs (B, V + X)`` (``(B, V)`` without copying), the new state ``(B, H)`` and the parts
            ``{"attn": (B, S), "copy": (B, S), "p_gen": (B,)}`` (copy and p_gen None without copying).
        """
        c = self.config
        V = c.tgt_vocab_size
        y_in = y_prev.masked_fill(y_prev >= V, UNK)  # (B,)
        if c.attention == "bahdanau":
            emb = self.rnn.drop(self.rnn.tgt_emb(y_in))  # (B, E)
            pre, (s,), attn = self.rnn._step(memory, (state,), emb, 0)  # (B, 2H+E), (B, H), (B, S)
            p_vocab = torch.softmax(self.rnn.out(self.rnn.drop(pre)), dim=-1)  # (B, V)
            if not c.copy:
                return p_vocab, s, {"attn": attn, "copy": None, "p_gen": None}
            p_gen = torch.sigmoid(self.gen(pre)).squeeze(-1)  # (B,)
            probs = mix_copy(p_vocab, attn, p_gen, memory["copy_ids"])  # (B, V+X)
            return probs, s, {"attn": attn, "copy": attn, "p_gen": p_gen}
        mask = memory["mask"]  # (B, S)
        feat = F.normalize(memory["l2"] * state.unsqueeze(1), dim=-1).transpose(1, 2)  # (B, H, S): L_feat
        alpha = masked_softmax(self.conv_alpha(feat).squeeze(1), mask)  # (B, S)
        n_hat = (alpha.unsqueeze(-1) * memory["emb"]).sum(1)  # (B, E)
        p_vocab = torch.softmax(self.out(n_hat), dim=-1)  # (B, V)
        s = self.decoder(self.tgt_emb(y_in), state)  # (B, H): h_t = GRU(m_{t-1}, h_{t-1})
        if not c.copy:
            return p_vocab, s, {"attn": alpha, "copy": None, "p_gen": None}
        kappa = masked_softmax(self.conv_kappa(feat).squeeze(1), mask)  # (B, S)
        lam = torch.sigmoid(self.conv_lambda(feat).squeeze(1)).masked_fill(~mask, 0).amax(1)  # (B,)
        probs = mix_copy(p_vocab, kappa, 1 - lam, memory["copy_ids"])  # (B, V+X)
        return probs, s, {"attn": alpha, "copy": kappa, "p_gen": 1 - lam}

    # --------------------------------------------------------------- training
    def forward(self, src: torch.Tensor, copy_ids: torch.Tensor, tgt_in: torch.Tensor, *, return_parts: bool = False):
        """Log-probabilities of the next token over the extended vocabulary, teacher-forced.

        Args:
            src: ``(B, S)`` source ids, right-padded.
            copy_ids: ``(B, S)`` extended ids of the source positions (ignored without copying).
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + target; extended ids are read as ``<unk>``).
            return_parts: also return ``{"attn", "copy", "p_gen"}`` stacked over steps
                (``(B, T, S)``, ``(B, T, S)``, ``(B, T)``; None without copying).

        Returns:
            ``log_probs (B, T, V + X)`` (``(B, T, V)`` without copying), and the parts when asked.

        Raises:
            TypeError, ValueError: bad ids (:meth:`check_inputs`); ``tgt_in`` not ``(B, T)`` integer ids.
        """
        check_token_ids("tgt_in", tgt_in, device=src.device if isinstance(src, torch.Tensor) else None)
        memory, state = self.start(src, copy_ids)
        if tgt_in.size(0) != src.size(0):
            raise ValueError(f"tgt_in must be (B={src.size(0)}, T), got shape {tuple(tgt_in.shape)}")
        steps, parts = [], []
        for t in range(tgt_in.size(1)):
            probs, state, part = self.step(memory, state, tgt_in[:, t])
            steps.append(probs)
            parts.append(part)
        probs = torch.stack(steps, dim=1)  # (B, T, V+X)
        log_probs = probs.clamp_min(_LOG_FLOOR).log()  # (B, T, V+X): an id nobody can produce gets log 1e-12
        if not return_parts:
            return log_probs
        stacked = {
            k: None if parts[0][k] is None else torch.stack([p[k] for p in parts], dim=1)
            for k in ("attn", "copy", "p_gen")
        }
        return log_probs, stacked


# ---------------------------------------------------------------------- data
def encode_copy_pair(
    src: Sequence[str], tgt: Sequence[str] | None, src_vocab: Vocab, tgt_vocab: Vocab, *, copy: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None, list[str]]:
    """Tensors of one pair for a copy model.

    Args:
        src, tgt: the tokens (``tgt`` None at test time).
        src_vocab, tgt_vocab: the model's vocabularies.
        copy: target words outside the vocabulary get their temporary id when the source has them
            (False: ``<unk>``, what a model without copying is trained to say).

    Returns:
        ``(src (S,), copy_ids (S,), tgt_in (T,), tgt_out (T,), oovs)``: source ids + ``<eos>``; each source
        position's extended id; ``<bos>`` + target ids (``<unk>`` outside the vocabulary); target
        extended ids + ``<eos>``; the source words with temporary ids, in order (``oovs[k]`` is id ``V + k``).
    """
    V = len(tgt_vocab)
    oovs: list[str] = []
    ext = []
    for tok in src:
        if tok in tgt_vocab.stoi:
            ext.append(tgt_vocab.stoi[tok])
        else:
            if tok not in oovs:
                oovs.append(tok)
            ext.append(V + oovs.index(tok))
    s = torch.tensor(src_vocab.encode(src), dtype=torch.long)  # (S,)
    copy_ids = torch.tensor(ext + [EOS], dtype=torch.long)  # (S,)
    if tgt is None:
        return s, copy_ids, None, None, oovs
    tgt_in = torch.tensor(tgt_vocab.encode(tgt, bos=True, eos=False), dtype=torch.long)  # (T,)
    out = []
    for tok in tgt:
        if tok in tgt_vocab.stoi:
            out.append(tgt_vocab.stoi[tok])
        elif copy and tok in oovs:
            out.append(V + oovs.index(tok))
        else:
            out.append(UNK)
    tgt_out = torch.tensor(out + [EOS], dtype=torch.long)  # (T,)
    return s, copy_ids, tgt_in, tgt_out, oovs


def decode_extended(ids: Sequence[int], tgt_vocab: Vocab, oovs: Sequence[str]) -> list[str]:
    """Tokens of extended ids (stops at ``<eos>``, skips ``<pad>``/``<bos>``).

    Raises:
        ValueError: an id outside ``[0, V + len(oovs))``, naming ``ids``.
    """
    V, out = len(tgt_vocab), []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i in (PAD, BOS):
            continue
        if not 0 <= i < V + len(oovs):
            raise ValueError(f"ids holds {i}, outside the extended vocabulary [0, {V + len(oovs)}) of this sentence")
        out.append(tgt_vocab.itos[i] if i < V else oovs[i - V])
    return out


@torch.no_grad()
def greedy_copy(model: CopyModel, src: torch.Tensor, copy_ids: torch.Tensor, *, max_len: int = 80):
    """Greedy decoding of a batch: the extended ids and, per step, the parts of :meth:`CopyModel.step`.

    Returns:
        ``(ids (B, L), parts)`` with ``parts`` the dict of ``(B, L, S)``/``(B, L)`` tensors (None entries
        without copying); rows stop at ``<eos>`` (padded with ``<pad>`` after it).
    """
    check_positive_int("max_len", max_len)
    was = model.training
    model.eval()
    try:
        memory, state = model.start(src, copy_ids)
        B = src.size(0)
        y = torch.full((B,), BOS, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        ids, parts = [], []
        for _ in range(max_len):
            probs, state, part = model.step(memory, state, y)
            y = probs.argmax(-1).masked_fill(done, PAD)  # (B,)
            ids.append(y)
            parts.append(part)
            done = done | (y == EOS)
            if bool(done.all()):
                break
    finally:
        model.train(was)
    stacked = {
        k: None if parts[0][k] is None else torch.stack([p[k] for p in parts], 1) for k in ("attn", "copy", "p_gen")
    }
    return torch.stack(ids, 1), stacked
