"""Attention over a signal: a Listen-Attend-Spell-style transcriber of the generated tone words.

Chan, Jaitly, Le and Vinyals (2016), "Listen, Attend and Spell": a *listener* turns the frames of
an utterance into a shorter sequence of states, a *speller* -- an attention decoder -- writes the
transcript one character at a time, attending over those states. Here:

* the **listener** (:class:`Listener`) is a frame-wise convolution, then ``log2(reduction)``
  convolutions of stride 2 (each halves the frame rate, as the pyramid of the paper's listener
  does), then a bidirectional GRU: ``(B, S, F)`` frames -> ``(B, S', H)`` states,
  ``S' = ceil(S / reduction)``;
* the **speller** is lesson 2's Bahdanau decoder, :class:`attnlab.models.rnn.Seq2SeqRNN` with
  ``source="states"``, unchanged: :meth:`~attnlab.models.rnn.Seq2SeqRNN.memory_from_states` builds its
  memory over the listener's states (padding frames masked) and
  :meth:`~attnlab.models.rnn.Seq2SeqRNN.decode` / ``step`` run it. By default its score is
  location-aware (lesson 7's ``prev_conv``; Chorowski et al. 2015, "Attention-Based Models for
  Speech Recognition", introduced it for speech): knowing where it looked one step earlier, the
  speller does not write a letter twice.

:class:`Transcriber` speaks the decoding protocol (``check_source``, ``encode``, ``init_state``,
``step``), so :func:`attnlab.models.decoding.greedy_decode` transcribes a batch of frames.

The data (:mod:`attnlab.data.corpus.signals`) knows which frames each letter fills, so the attention
is scored against the truth (:func:`evaluate_transcriber`): how often the attention peak of each
letter lies inside that letter's frames (mapped to the listener's reduced time axis,
:func:`state_spans`), and how monotonic the attention is -- the share of steps whose peak does not
move backwards, the property lesson 7's monotonic attention (Raffel et al. 2017) builds in.

Shape legend
------------
B   batch size
S   frames of the input (padded)
S'  listener states, ``ceil(S / reduction)``
F   features per frame (:data:`attnlab.data.corpus.signals.N_FEATURES`)
C   convolution channels
H   listener state size = decoder state size
T   target length (letters + 1)
V   target vocabulary size (specials + letters)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.core.checks import check_float_tensor, check_int, check_positive_int, check_probability, eval_mode
from attnlab.data.corpus.signals import (
    N_FEATURES,
    Utterance,
    char_vocab,
    collate_signals,
    encode_utterances,
    frame_mask,
)
from attnlab.data.vocab import EOS, PAD, Vocab
from attnlab.models.decoding import greedy_decode
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN, StatesEncoderDecoder, states_decoder_config

__all__ = [
    "REDUCTIONS",
    "TranscriberConfig",
    "Listener",
    "Transcriber",
    "state_spans",
    "edit_distance",
    "peak_in_span",
    "monotonicity",
    "peak_moves",
    "transcribe",
    "evaluate_transcriber",
]

REDUCTIONS = (1, 2, 4)


@dataclass(frozen=True)
class TranscriberConfig:
    """Configuration of :class:`Transcriber` (frozen: a config is a value).

    Attributes:
        tgt_vocab_size: V (default: the letter vocabulary of :func:`attnlab.data.corpus.signals.char_vocab`).
        n_features: F of the frames.
        reduction: how many frames one listener state covers: 1, 2 or 4 (:data:`REDUCTIONS`).
        conv_channels: C.
        hid_dim: H, even (the listener's BiGRU has ``H / 2`` units per direction).
        emb_dim: size of the decoder's letter embeddings.
        attn_dim: hidden size of the Bahdanau score (default H).
        dropout: dropout of the decoder (embeddings and outputs).
        prev_conv: width (odd) of the location-aware convolution over the previous step's attention
            in the score (Chorowski et al. 2015, lesson 7; on by default: it keeps the speller from
            writing a letter twice), 0 = plain Bahdanau attention.
    """

    tgt_vocab_size: int = len(char_vocab())
    n_features: int = N_FEATURES
    reduction: int = 4
    conv_channels: int = 48
    hid_dim: int = 48
    emb_dim: int = 16
    attn_dim: int | None = None
    dropout: float = 0.0
    prev_conv: int = 5

    def __post_init__(self):
        for name in ("n_features", "reduction", "conv_channels", "hid_dim"):
            check_positive_int(name, getattr(self, name))
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS} (frames per listener state), got {self.reduction}")
        if self.hid_dim % 2:
            raise ValueError(f"hid_dim must be even (two GRU directions of hid_dim // 2 units), got {self.hid_dim}")
        check_probability("dropout", self.dropout)
        self.rnn_config()  # the decoder's own sizes are checked by RNNConfig

    def rnn_config(self) -> RNNConfig:
        """The :class:`attnlab.models.rnn.RNNConfig` of the speller: Bahdanau attention over given states."""
        return states_decoder_config(self, prev_conv=self.prev_conv)


class Listener(nn.Module):
    """Frames ``(B, S, F)`` -> states ``(B, S', H)``: a convolution, stride-2 convolutions, a BiGRU.

    After every convolution the positions beyond each signal's end are set to zero, so a signal's
    states do not depend on how much padding its batch has.

    Args:
        n_features: F.
        channels: C.
        hid_dim: H (even).
        reduction: 1, 2 or 4.
    """

    def __init__(self, n_features: int, channels: int, hid_dim: int, reduction: int):
        super().__init__()
        n_features = check_positive_int("n_features", n_features)
        channels = check_positive_int("channels", channels)
        hid_dim = check_positive_int("hid_dim", hid_dim)
        if reduction not in REDUCTIONS or hid_dim % 2:
            raise ValueError(f"need reduction in {REDUCTIONS} and an even hid_dim, got {reduction}, {hid_dim}")
        self.reduction = reduction
        convs = [nn.Conv1d(n_features, channels, 3, padding=1)]
        convs += [nn.Conv1d(channels, channels, 3, stride=2, padding=1) for _ in range(int(math.log2(reduction)))]
        self.convs = nn.ModuleList(convs)
        self.rnn = nn.GRU(channels, hid_dim // 2, batch_first=True, bidirectional=True)

    def forward(self, frames: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Listen.

        Args:
            frames: ``(B, S, F)`` float features.
            mask: ``(B, S)`` bool, True at real frames (right-padded).

        Returns:
            ``(states (B, S', H), keep (B, S'))``: ``keep`` is True at the states of real frames.
        """
        lengths = mask.sum(1)  # (B,)
        x = frames.transpose(1, 2)  # (B, F, S)
        for i, conv in enumerate(self.convs):
            if i:
                lengths = (lengths + 1) // 2  # (B,): a stride-2, width-3, pad-1 convolution keeps ceil(S / 2)
            x = torch.relu(conv(x))  # (B, C, S_i)
            keep = torch.arange(x.size(2), device=x.device) < lengths.unsqueeze(1)  # (B, S_i)
            x = x * keep.unsqueeze(1).to(x.dtype)  # (B, C, S_i): zero beyond each signal's end
        x = x.transpose(1, 2)  # (B, S', C)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))  # (B, S', H)
        return states, keep


class Transcriber(StatesEncoderDecoder):
    """Listen, attend and spell: a :class:`Listener` and lesson 2's Bahdanau decoder over its states."""

    def __init__(self, config: TranscriberConfig):
        super().__init__()
        if not isinstance(config, TranscriberConfig):
            raise TypeError(f"config must be a TranscriberConfig, got {type(config).__name__}")
        self.config = c = config
        self.listener = Listener(c.n_features, c.conv_channels, c.hid_dim, c.reduction)
        self.decoder = Seq2SeqRNN(c.rnn_config())

    def check_source(self, frames) -> None:
        """Raise unless ``frames`` is float ``(B, S, F)`` padded frames (see
        :func:`attnlab.data.corpus.signals.frame_mask`)
        on the model's device and of its dtype."""
        frame_mask(frames)
        if frames.size(2) != self.config.n_features:
            raise ValueError(f"frames must be (B, S, F={self.config.n_features}), got shape {tuple(frames.shape)}")
        weight = self.decoder.tgt_emb.weight
        if frames.device != weight.device:
            raise ValueError(f"frames are on {frames.device} but the model is on {weight.device}; move one of them")
        if frames.dtype != weight.dtype:
            raise TypeError(f"frames have dtype {frames.dtype} but the model's weights are {weight.dtype}")

    def encode_states(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``frames (B, S, F)`` -> the ``S'`` listener states ``(B, S', H)`` and which are real ``(B, S')``."""
        return self.listener(frames, frame_mask(frames))  # (B, S', H), (B, S')

    def forward(
        self,
        frames: torch.Tensor,
        tgt_in: torch.Tensor,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score transcripts of a batch of signals.

        Args:
            frames: float ``(B, S, F)`` (from :func:`attnlab.data.corpus.signals.collate_signals`).
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + letters, right-padded with ``PAD``).
            teacher_forcing: as :meth:`attnlab.models.rnn.Seq2SeqRNN.decode`.
            return_attention: also return the attention over the listener states.

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn (B, T, S'))`` with ``return_attention``.

        Raises:
            TypeError, ValueError: bad ``frames`` (:meth:`check_source`) or ``tgt_in`` /
                ``teacher_forcing`` (:meth:`attnlab.models.rnn.Seq2SeqRNN.decode`).
        """
        memory = self.encode(frames)
        return self.decoder.decode(memory, tgt_in, teacher_forcing=teacher_forcing, return_attention=return_attention)


# ----------------------------------------------------------------------------------------------
# scoring
# ----------------------------------------------------------------------------------------------


def state_spans(spans: Sequence[tuple[int, int]], reduction: int) -> list[tuple[int, int]]:
    """Frame spans ``[start, end)`` mapped to listener states: ``[start // r, ceil(end / r))``.

    State ``j`` covers frames ``j*r .. j*r + r - 1``; a letter's states are those covering at least
    one of its frames.

    Raises:
        ValueError: ``reduction`` not in :data:`REDUCTIONS`, or a span with ``end <= start`` or ``start < 0``.
    """
    r = check_int("reduction", reduction)
    if r not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {r}")
    out = []
    for start, end in spans:
        if not 0 <= start < end:
            raise ValueError(f"a span must be (start, end) with 0 <= start < end, got {(start, end)}")
        out.append((start // r, -(-end // r)))
    return out


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance (insertions, deletions, substitutions, each costing 1) between two sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _check_attn(attn) -> torch.Tensor:
    check_float_tensor("attn", attn, dims=2, shape_text="(T, S'), one row per letter")
    return attn


def peak_in_span(attn: torch.Tensor, spans: Sequence[tuple[int, int]], reduction: int) -> list[bool]:
    """Per letter, whether its attention peak lies on the states of its own frames.

    Args:
        attn: ``(T, S')`` attention of one utterance, row ``t`` the step that wrote letter ``t``
            (at least ``len(spans)`` rows; the rest, e.g. ``<eos>``, are ignored).
        spans: the letters' gold frame spans (:attr:`attnlab.data.corpus.signals.Utterance.spans`).
        reduction: frames per listener state.

    Returns:
        One bool per letter.
    """
    attn = _check_attn(attn)
    if attn.size(0) < len(spans):
        raise ValueError(f"attn has {attn.size(0)} rows for {len(spans)} letters")
    peaks = attn[: len(spans)].argmax(-1).tolist()
    return [lo <= p < hi for p, (lo, hi) in zip(peaks, state_spans(spans, reduction), strict=True)]


def monotonicity(attn: torch.Tensor, n_letters: int | None = None) -> tuple[int, int]:
    """How many steps' attention peak did not move backwards: ``(steps that did not, steps)``.

    Args:
        attn: ``(T, S')`` attention of one utterance.
        n_letters: rows to look at (default all); step ``t >= 1`` is counted as monotonic when
            ``argmax attn[t] >= argmax attn[t - 1]``.

    Returns:
        ``(monotonic steps, steps)``, with ``steps = n - 1``.
    """
    attn = _check_attn(attn)
    n = attn.size(0) if n_letters is None else check_int("n_letters", n_letters, minimum=0)
    if n > attn.size(0):
        raise ValueError(f"n_letters={n} but attn has {attn.size(0)} rows")
    peaks = attn[:n].argmax(-1)  # (n,)
    forward = (peaks[1:] >= peaks[:-1]).sum() if n > 1 else 0
    return int(forward), max(n - 1, 0)


def peak_moves(attn: torch.Tensor, n_letters: int | None = None) -> tuple[int, int, int]:
    """How the attention peak moves from each letter to the next: ``(forward, stationary, backward)`` steps.

    :func:`monotonicity` counts a peak that stays where it was as monotonic; a speller that stares
    at one state for every letter is "monotonic" too, so the three moves are counted apart.

    Args:
        attn: ``(T, S')`` attention of one utterance.
        n_letters: rows to look at (default all).

    Returns:
        ``(forward, stationary, backward)``, summing to ``n - 1`` steps.
    """
    attn = _check_attn(attn)
    n = attn.size(0) if n_letters is None else check_int("n_letters", n_letters, minimum=0)
    if n > attn.size(0):
        raise ValueError(f"n_letters={n} but attn has {attn.size(0)} rows")
    peaks = attn[:n].argmax(-1)  # (n,)
    step = peaks[1:] - peaks[:-1]  # (n - 1,)
    return int((step > 0).sum()), int((step == 0).sum()), int((step < 0).sum())


def _batches(items: list, bs: int):
    for i in range(0, len(items), bs):
        yield i, collate_signals(items[i : i + bs])


def transcribe(
    model: Transcriber, utterances: Sequence[Utterance], vocab: Vocab | None = None, *, bs: int = 256, max_len: int = 10
) -> list[str]:
    """Greedy transcripts (:func:`attnlab.models.decoding.greedy_decode`) of ``utterances``.

    Args:
        model: a :class:`Transcriber`.
        utterances: the signals.
        vocab: the letter vocabulary (default :func:`attnlab.data.corpus.signals.char_vocab`).
        bs: utterances per batch.
        max_len: most letters per transcript, ``<eos>`` included.
    """

    vocab = char_vocab() if vocab is None else vocab
    device = model.decoder.tgt_emb.weight.device
    out = []
    for _, (frames, _, _) in _batches(encode_utterances(utterances, vocab), check_positive_int("bs", bs)):
        dec = greedy_decode(model, frames.to(device), max_len=max_len)
        for row in dec.tokens.tolist():
            out.append("".join(vocab.itos[i] for i in row if i not in (EOS, PAD)))
    return out


def evaluate_transcriber(
    model: Transcriber, utterances: Sequence[Utterance], vocab: Vocab | None = None, *, bs: int = 256
) -> dict:
    """Exact match, character error rate and attention agreement of ``model`` on ``utterances``.

    The transcripts are greedy (:func:`transcribe`); the attention is scored with the gold letters
    fed in (teacher forcing), so that row ``t`` is the step that writes gold letter ``t``.

    Returns:
        ``{"exact_match", "cer", "peak_in_span", "monotonic", "forward", "stationary", "n", "by_bucket"}``:
        ``cer`` -- total
        edit distance / total gold letters; ``peak_in_span`` -- share of gold letters whose
        attention peak lies on their own frames; ``monotonic`` -- share of steps (letter to next
        letter) whose peak does not move backwards; ``forward`` / ``stationary`` -- the shares of those
        steps whose peak moves on / stays put (:func:`peak_moves`); ``by_bucket[word bucket]`` -- exact match,
        cer and peak_in_span per word-length bucket.
    """
    if not isinstance(model, Transcriber):
        raise TypeError(f"model must be a Transcriber, got {type(model).__name__}")
    utterances = list(utterances)
    if not utterances:
        raise ValueError("utterances is empty: nothing to evaluate")
    vocab = char_vocab() if vocab is None else vocab
    bs = check_positive_int("bs", bs)
    hyps = transcribe(model, utterances, vocab, bs=bs)
    r = model.config.reduction
    device = model.decoder.tgt_emb.weight.device
    hits, mono, moves = [], [0, 0], [0, 0, 0]
    with eval_mode(model):
        for i, (frames, tgt_in, _) in _batches(encode_utterances(utterances, vocab), bs):
            _, attn = model(frames.to(device), tgt_in.to(device), return_attention=True)  # (b, T, S')
            for u, a in zip(utterances[i : i + bs], attn.cpu(), strict=True):
                hits.append(peak_in_span(a, u.spans, r))
                m, n = monotonicity(a, len(u.word))
                mono[0] += m
                mono[1] += n
                moves = [x + y for x, y in zip(moves, peak_moves(a, len(u.word)), strict=True)]

    def scores(idx):
        errors = sum(edit_distance(hyps[k], utterances[k].word) for k in idx)
        letters = sum(len(utterances[k].word) for k in idx)
        flat = [h for k in idx for h in hits[k]]
        return {
            "exact_match": sum(hyps[k] == utterances[k].word for k in idx) / len(idx),
            "cer": errors / letters,
            "peak_in_span": sum(flat) / len(flat),
        }

    out = scores(range(len(utterances)))
    out["monotonic"] = mono[0] / mono[1] if mono[1] else None
    out["forward"] = moves[0] / mono[1] if mono[1] else None
    out["stationary"] = moves[1] / mono[1] if mono[1] else None
    out["n"] = len(utterances)
    buckets = sorted({u.bucket for u in utterances})
    out["by_bucket"] = {b: scores([k for k, u in enumerate(utterances) if u.bucket == b]) for b in buckets}
    return out
