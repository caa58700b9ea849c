"""GRU encoder-decoders: no attention (the bottleneck), Bahdanau attention, Luong attention.

One model class with a switch (``RNNConfig.attention``):

* ``None`` -- the decoder's only view of the source is one vector, the encoder's final state
  ``c``: ``s_t = GRU([E y_{t-1}; c], s_{t-1})`` (the RNNencdec baseline of Bahdanau et al.; Cho et
  al. 2014 feed ``c`` to every step). With ``context_every_step=False`` ``c`` only sets the first
  state ``s_0 = tanh(W c)``, as Sutskever et al. (2014) pass the encoder's final state on:
  ``s_t = GRU(E y_{t-1}, s_{t-1})``, ``p(y_t) = softmax(W_o [s_t; E y_{t-1}])`` (lesson 01's ablation).
* ``"bahdanau"`` -- the context is recomputed at every step from the *previous* decoder state:
  ``e_{t-1,j} = score(s_{t-1}, h_j)``, ``alpha = softmax(e)``, ``c_t = sum_j alpha_j h_j``,
  ``s_t = GRU([E y_{t-1}; c_t], s_{t-1})`` (Bahdanau et al., 2014).
* ``"luong"`` -- attention comes *after* the RNN step, from the *current* state:
  ``h_t = GRU([E y_{t-1}; h~_{t-1}], h_{t-1})`` (input feeding), ``c_t = sum_j alpha_tj h_j`` with
  ``alpha_t = softmax(score(h_t, h_j))``, ``h~_t = tanh(W_c [c_t; h_t])``, ``p(y_t) = softmax(W_s h~_t)``;
  global or local (``local="m"`` / ``"p"``) attention.

Lesson 07's variants are further switches of the same model (all off by default, so every
checkpoint saved before them loads unchanged); the computations live in :mod:`attnlab.models.variants`:

* ``coverage=True`` -- Tu et al. (2016): the coverage vector ``C_j = sum_{t' < t} alpha_t',j`` enters
  the concat score, ``e_j = v^T tanh(W q + U h_j + w_c C_j)``;
* ``prev_conv=K`` -- location-aware attention (Chorowski et al. 2015): a width-``K`` convolution
  over the previous step's attention enters the concat score, ``e_j = v^T tanh(W q + U h_j + U_f f_j)``;
* ``monotonic=True`` -- Raffel et al. (2017): ``p_j = sigmoid(e_j + r)``; training attends with the
  expected alignment, eval mode decodes with hard monotonic attention;
* ``hard="gumbel"`` -- hard attention (one source position per step), trained with the
  straight-through Gumbel-softmax at ``temperature`` (annealed down to ``temperature_final`` over a
  run when that is set: the model reads the attribute ``model.temperature``, which
  :class:`attnlab.training.train.GumbelAnnealing` lowers); eval mode takes the argmax;
* ``hard="reinforce"`` -- the same hard attention trained with REINFORCE (Williams 1992; Xu et al.
  2015): training samples a position from the softmax (no gradient through the one-hot) and keeps
  its log-probability; the scores learn from the surrogate ``-(r - b) sum_t log p(a_t)`` with the
  reward ``r`` the sentence's mean gold-token log-likelihood and ``b`` a moving average of it
  (``model.reward_baseline``, a buffer outside the state dict), minus ``entropy_bonus`` times the
  attention's entropy; eval mode takes the argmax. With ``reinforce_baseline="learned"`` each step is
  credited with its reward-to-go ``G_t = (1/n) sum_{t' >= t} log p(y_t')`` (what the sample at step ``t``
  can still change) less a baseline ``b_t`` that a linear layer predicts from the detached query state
  and the share of the sentence still to come, fitted to ``G_t`` by squared error (Williams 1992's
  state-dependent baseline, as Mnih et al. 2014 and Ranzato et al. 2016 train it);
* ``fertility=N`` (with ``coverage``) -- Tu et al.'s fertility: ``Phi_j = N sigmoid(u_f^T h_j)`` is
  predicted once per source word (``memory["fertility"]``, :meth:`Seq2SeqRNN.predicted_fertility`)
  and the coverage grows by ``alpha_j / Phi_j``;
* ``sources=K`` -- Zoph & Knight (2016): ``K`` sources, each with its own softmax over its states
  (``memory["segments"]`` says which source each state is from), contexts combined by
  ``tanh(W_s [c_1; ...; c_K])``; for a decoder over given states (``source="states"``);
* ``coverage_loss=w`` / ``align_loss=lambda`` -- extra training losses (See et al. 2017's coverage
  loss; cross-entropy against the gold links), left in ``model.aux_loss`` by :meth:`forward` for the
  training loop to add (and so is the REINFORCE surrogate);
* ``coverage_loss_from=f`` -- See et al.'s recipe: the coverage vector and the coverage loss are off
  (``model.coverage_phase = False``) for the first share ``f`` of the budget and on for the rest
  (:class:`attnlab.training.train.CoveragePhase` switches them); ``w_c`` then starts at zero, so the
  trained model is unchanged at the first step of the phase;
* ``undertranslation_loss=w`` -- the under-translation term ``sum_j (1 - sum_t alpha_tj)^2`` (Xu et
  al. 2015's doubly stochastic attention; Cohn et al. 2016's global fertility), also in ``aux_loss``;
* ``fertility_floor=m`` (with ``fertility``) -- ``Phi_j = m + (N - m) sigmoid(u_f^T h_j)``: a fertility
  that cannot fall below ``m``, so no source word's coverage grows faster than ``alpha_j / m``.

With ``coverage`` or ``prev_conv``/``monotonic`` the decoder state carries one more ``(B, S)`` tensor
each (coverage first, then the previous attention) after the RNN state.

The encoder is a bidirectional GRU with ``hid_dim // 2`` units per direction, so its states
``h_j`` have the decoder's size ``H`` and the parameter-free ``dot`` score works.

The source is a switch too (``RNNConfig.source``): ``"tokens"`` (the default, every model above) reads
token ids through that encoder; ``"states"`` has no source embedding and no encoder at all, and
decodes from any ``(B, S, H)`` sequence of vectors the caller computed (image regions, frames of a
signal), e.g. ``model.decode(model.memory_from_states(regions), tgt_in)``. Both build their memory
with the same code (:meth:`Seq2SeqRNN.memory_from_states` for states; :meth:`Seq2SeqRNN.encode`
runs the GRU first and passes its own summary), and :meth:`Seq2SeqRNN.decode` is the whole decoder,
so a captioner reuses this decoder rather than a copy of it.

Every model speaks the decoding protocol used by :mod:`attnlab.models.decoding`:
``encode(src) -> memory``, ``init_state(memory) -> state``,
``step(memory, state, y_prev, t) -> (logits, state, attn)``, and ``check_source(src)`` (the checks
``encode`` makes, run by the decoders before they start). With ``source="states"``, ``src`` is a
float ``(B, S, H)`` tensor in which every position takes part.

Shape legend
------------
B  batch size
S  source length (incl. ``<eos>``), or number of given states
T  target length (incl. ``<bos>`` for inputs / ``<eos>`` for outputs)
E  embedding size
H  decoder state size (= encoder state size, both directions together)
V  target vocabulary size
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.core.checks import (
    check_choice,
    check_float,
    check_float_tensor,
    check_int,
    check_positive_int,
    check_probability,
    check_right_padded,
    check_tensor,
    check_token_ids,
)
from attnlab.core.masks import masked_softmax
from attnlab.core.scores import AttentionScore, LocalPosition, attend, local_window_mask
from attnlab.data.vocab import PAD
from attnlab.models import variants

__all__ = ["RNNConfig", "Seq2SeqRNN", "StatesEncoderDecoder", "encode_tokens"]

ATTENTIONS = (None, "bahdanau", "luong")
SOURCES = ("tokens", "states")
HARD = (None, "gumbel", "reinforce")
REINFORCE_BASELINES = ("average", "learned")
_CONV_CHANNELS = 8  # filters of the location-aware convolution (Chorowski et al. use 10)
_MONOTONIC_BIAS = -1.0  # initial r: start by reading on rather than stopping
_MONOTONIC_NOISE = 1.0  # std of the pre-sigmoid noise in training, which pushes p towards 0 or 1
REINFORCE_DECAY = 0.9  # b <- 0.9 b + 0.1 r, the moving-average baseline of Xu et al. (2015)


def encode_tokens(
    src_emb: nn.Embedding, encoder: nn.GRU, src: torch.Tensor, lengths: torch.Tensor, drop: nn.Module
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a bidirectional GRU encoder over checked, right-padded token ids (the one copy of these steps).

    :meth:`Seq2SeqRNN.encode` and the multi-source model's encoders (:mod:`attnlab.models.multisource`) use it.

    Args:
        src_emb: the source embedding (``E`` wide).
        encoder: a batch-first bidirectional ``nn.GRU`` with ``H / 2`` units per direction.
        src: ``(B, S)`` token ids, right-padded with ``PAD`` (checked by the caller).
        lengths: ``(B,)`` real tokens per row (each >= 1).
        drop: dropout applied to the embeddings.

    Returns:
        ``states (B, S, H)`` (zeros at padding) and ``summary (B, H)``: the forward direction's last
        state beside the backward direction's first.
    """
    emb = drop(src_emb(src))  # (B, S, E)
    packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder(packed)  # h_n: (2, B, H/2)
    states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, H)
    return states, torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, S, H), (B, H)


@dataclass(frozen=True)
class RNNConfig:
    """Configuration of :class:`Seq2SeqRNN` (frozen: a config is a value, saved beside checkpoints).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes; ``src_vocab_size`` must be ``None`` with
            ``source="states"`` (there is no source vocabulary) and a positive int otherwise.
        emb_dim: E.
        hid_dim: H (even; the encoder uses H/2 per direction).
        attention: ``None``, ``"bahdanau"`` or ``"luong"``.
        score: score kind (:data:`attnlab.core.scores.SCORE_KINDS`); Bahdanau's own is ``"concat"``.
        attn_dim: hidden size of the ``concat`` score (default H).
        input_feeding: Luong only: feed ``h~_{t-1}`` into the next RNN step.
        context_every_step: no attention only: feed the summary ``c`` to every decoder step and to
            the output layer (Cho et al. 2014; the default); ``False``: ``c`` only sets ``s_0``
            (Sutskever et al. 2014). Checkpoints saved before this field load unchanged.
        local: Luong only: ``None`` (global), ``"m"`` (monotonic) or ``"p"`` (predictive).
        window: half width D of the local window.
        max_src_len: longest source the ``location`` score can address.
        dropout: dropout on embeddings and decoder outputs.
        coverage: Tu et al.'s coverage vector in the score (needs ``score="concat"``).
        prev_conv: width (odd, >= 1) of the convolution over the previous attention in the score
            (location-aware attention; needs ``score="concat"``); 0 = off.
        monotonic: Raffel et al.'s monotonic attention (expected alignment when training, hard at eval).
        hard: ``None`` (soft attention), ``"gumbel"`` (straight-through Gumbel-softmax hard
            attention) or ``"reinforce"`` (sampled hard attention trained with REINFORCE).
        temperature: Gumbel-softmax temperature (> 0); with ``temperature_final`` the one training starts at.
        coverage_loss: weight (>= 0) of See et al.'s coverage loss.
        align_loss: weight lambda (>= 0) of the supervised attention loss (needs gold attention
            as the third input of :meth:`Seq2SeqRNN.forward` in training).
        source: ``"tokens"`` (token ids through the bidirectional GRU encoder) or ``"states"`` (no
            encoder: the caller gives ``(B, S, H)`` encoder states; ``hid_dim`` may then be odd).
        sources: number ``K >= 1`` of sources, each with its own attention (Zoph & Knight 2016);
            ``K > 1`` needs plain soft attention, ``source="states"`` and the ``segments`` of
            :meth:`Seq2SeqRNN.memory_from_states`.
        fertility: ``N >= 0``; ``N > 0`` (needs ``coverage``) predicts a fertility
            ``Phi_j = N sigmoid(u_f^T h_j)`` per source word and grows its coverage by ``alpha_j / Phi_j``
            (Tu et al. 2016); 0 = off.
        fertility_floor: ``0 <= m < N``: ``Phi_j = m + (N - m) sigmoid(u_f^T h_j)`` (needs ``fertility``);
            0 = Tu et al.'s.
        coverage_loss_from: share ``f`` in ``[0, 1)`` of the training budget after which coverage
            (vector and loss) switches on (See et al. 2017 add both for a short final phase); 0 = from the start.
        undertranslation_loss: weight (>= 0) of ``sum_j (1 - sum_t alpha_tj)^2`` per target step
            (:func:`attnlab.models.variants.undertranslation_loss`).
        entropy_bonus: ``hard="reinforce"`` only: weight (>= 0) of the attention entropy subtracted
            from the REINFORCE surrogate (Xu et al.'s entropy term); 0 = off.
        reinforce_mix: ``hard="reinforce"`` only: probability in ``[0, 1)`` that a training step of a
            sentence reads the expected context (soft attention, trained by backpropagation) instead
            of the sampled word -- Xu et al.'s (2015) trick, who use 0.5; such steps leave the
            REINFORCE surrogate; 0 = always sample.
        reinforce_baseline: ``hard="reinforce"`` only: ``"average"`` (one sentence reward credited to
            every step, less a moving average of it: Xu et al.) or ``"learned"`` (each step's
            reward-to-go less a baseline predicted from the step's query state, see the module docstring).
        temperature_final: ``hard="gumbel"`` only: anneal the Gumbel-softmax temperature from
            ``temperature`` down to this value (``0 < temperature_final <= temperature``) over a
            training run (:func:`attnlab.training.train.fit_budget` does it); ``None`` = a fixed temperature.
    """

    src_vocab_size: int | None
    tgt_vocab_size: int
    emb_dim: int = 64
    hid_dim: int = 256
    attention: str | None = None
    score: str = "concat"
    attn_dim: int | None = None
    input_feeding: bool = True
    local: str | None = None
    window: int = 5
    max_src_len: int = 64
    dropout: float = 0.0
    coverage: bool = False
    prev_conv: int = 0
    monotonic: bool = False
    hard: str | None = None
    temperature: float = 1.0
    coverage_loss: float = 0.0
    align_loss: float = 0.0
    source: str = "tokens"
    sources: int = 1
    fertility: int = 0
    entropy_bonus: float = 0.0
    reinforce_mix: float = 0.0
    reinforce_baseline: str = "average"
    temperature_final: float | None = None
    fertility_floor: float = 0.0
    coverage_loss_from: float = 0.0
    undertranslation_loss: float = 0.0
    context_every_step: bool = True

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention={self.attention!r}; expected one of {ATTENTIONS}")
        check_choice("source", self.source, SOURCES)
        if self.source == "states" and self.src_vocab_size is not None:
            raise ValueError(
                f"src_vocab_size must be None with source='states' (the source is encoder states, not token ids), "
                f"got {self.src_vocab_size!r}"
            )
        sizes = ("tgt_vocab_size", "emb_dim", "hid_dim", "max_src_len")
        for name in (("src_vocab_size",) if self.source == "tokens" else ()) + sizes:
            check_positive_int(name, getattr(self, name))
        if self.source == "tokens" and (self.hid_dim % 2 or self.hid_dim < 2):
            raise ValueError(
                f"hid_dim must be even and >= 2 (two encoder directions of hid_dim // 2 units), got {self.hid_dim}"
            )
        if self.attn_dim is not None:
            check_positive_int("attn_dim", self.attn_dim)
        if not isinstance(self.input_feeding, bool):
            raise TypeError(f"input_feeding must be a bool, got {type(self.input_feeding).__name__}")
        if not isinstance(self.context_every_step, bool):
            raise TypeError(f"context_every_step must be a bool, got {type(self.context_every_step).__name__}")
        if not self.context_every_step and self.attention is not None:
            raise ValueError(
                "context_every_step=False is the no-attention model's switch (attention=None), "
                f"got attention={self.attention!r}"
            )
        if self.local not in (None, "m", "p"):
            raise ValueError(f"local={self.local!r}; expected None, 'm' or 'p'")
        if self.local and self.attention != "luong":
            raise ValueError("local attention is a Luong variant: set attention='luong'")
        check_int("window", self.window, minimum=0)
        if self.local == "p" and self.window < 1:
            # the Gaussian of local-p has sigma = window / 2: a zero window divides by zero
            raise ValueError(f"local='p' needs window >= 1 (its Gaussian has sigma = window / 2), got {self.window}")
        check_probability("dropout", self.dropout)
        for name in ("coverage", "monotonic"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        check_int("prev_conv", self.prev_conv, minimum=0)
        if self.prev_conv and self.prev_conv % 2 == 0:
            raise ValueError(f"prev_conv must be odd (a centred convolution) or 0, got {self.prev_conv}")
        if self.hard not in HARD:
            raise ValueError(f"hard={self.hard!r}; expected one of {HARD}")
        check_float("temperature", self.temperature, strict=True)
        check_float("coverage_loss", self.coverage_loss)
        check_float("align_loss", self.align_loss)
        check_int("fertility", self.fertility, minimum=0)
        if self.fertility and not self.coverage:
            raise ValueError(f"fertility={self.fertility} divides the coverage update: it needs coverage=True")
        check_float("fertility_floor", self.fertility_floor)
        if self.fertility_floor and not 0 < self.fertility_floor < self.fertility:
            raise ValueError(
                f"fertility_floor must be in [0, fertility={self.fertility}) (Phi = m + (N - m) sigmoid), "
                f"got {self.fertility_floor}"
            )
        check_probability("coverage_loss_from", self.coverage_loss_from)
        if self.coverage_loss_from and not (self.coverage and self.coverage_loss > 0):
            raise ValueError(
                f"coverage_loss_from={self.coverage_loss_from} delays coverage: it needs coverage=True and "
                f"coverage_loss > 0, got coverage={self.coverage}, coverage_loss={self.coverage_loss}"
            )
        check_float("undertranslation_loss", self.undertranslation_loss)
        check_float("entropy_bonus", self.entropy_bonus)
        if self.entropy_bonus and self.hard != "reinforce":
            raise ValueError(
                f"entropy_bonus is a term of the REINFORCE surrogate: it needs hard='reinforce', got {self.hard!r}"
            )
        check_probability("reinforce_mix", self.reinforce_mix)
        check_choice("reinforce_baseline", self.reinforce_baseline, REINFORCE_BASELINES)
        if self.reinforce_baseline != "average" and self.hard != "reinforce":
            raise ValueError(
                f"reinforce_baseline={self.reinforce_baseline!r} is a REINFORCE baseline: it needs hard='reinforce', "
                f"got {self.hard!r}"
            )
        if self.reinforce_mix and self.hard != "reinforce":
            raise ValueError(
                f"reinforce_mix mixes soft steps into REINFORCE training: it needs hard='reinforce', got {self.hard!r}"
            )
        if self.temperature_final is not None:
            check_float("temperature_final", self.temperature_final, strict=True)
            if self.hard != "gumbel":
                raise ValueError(
                    f"temperature_final anneals the Gumbel-softmax: it needs hard='gumbel', got {self.hard!r}"
                )
            if self.temperature_final > self.temperature:
                raise ValueError(
                    f"temperature_final must be <= temperature (annealing lowers it), "
                    f"got {self.temperature_final} > {self.temperature}"
                )
        switches = (
            self.coverage, self.prev_conv, self.monotonic, self.hard, self.coverage_loss, self.align_loss,
            self.undertranslation_loss,
        )
        if any(switches) and self.attention is None:
            raise ValueError("the attention variants (coverage, prev_conv, monotonic, hard, losses) need attention")
        if (self.coverage or self.prev_conv) and self.score != "concat":
            raise ValueError(f"coverage and prev_conv enter the concat score: set score='concat', got {self.score!r}")
        if (self.coverage or self.prev_conv or self.monotonic or self.hard) and self.local:
            raise ValueError("coverage, prev_conv, monotonic and hard attention do not combine with local attention")
        if self.monotonic and self.hard:
            raise ValueError("monotonic and hard attention are two different attentions: choose one")
        check_positive_int("sources", self.sources)
        if self.sources > 1:
            if self.attention is None or self.local or self.coverage or self.prev_conv or self.monotonic or self.hard:
                raise ValueError(
                    f"sources={self.sources} combines plain soft attentions: it needs attention='bahdanau' or "
                    f"'luong' without local, coverage, prev_conv, monotonic or hard (got attention={self.attention!r}, "
                    f"local={self.local!r}, coverage={self.coverage}, prev_conv={self.prev_conv}, "
                    f"monotonic={self.monotonic}, hard={self.hard!r})"
                )
            if self.source != "states":
                raise ValueError(
                    f"sources={self.sources} needs source='states' (a multi-source model brings its own encoders), "
                    f"got source={self.source!r}"
                )


class Seq2SeqRNN(nn.Module):
    """GRU encoder-decoder with a switchable attention (see module docstring)."""

    def __init__(self, config: RNNConfig):
        super().__init__()
        self.config = c = config
        H, E = c.hid_dim, c.emb_dim
        if c.source == "tokens":  # with given states there is nothing to embed or encode: no unused weights
            self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)
            self.encoder = nn.GRU(E, H // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(H, H)  # final encoder summary -> initial decoder state
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, E, padding_idx=PAD)
        self.drop = nn.Dropout(c.dropout)
        fed = c.input_feeding if c.attention == "luong" else c.context_every_step  # a context enters every step
        rnn_in = E + (H if fed else 0)
        self.decoder = nn.GRU(rnn_in, H, batch_first=True)
        if c.attention is not None:
            self.score = AttentionScore(c.score, H, H, c.attn_dim, max_len=c.max_src_len)
        if c.attention == "luong":
            self.W_c = nn.Linear(2 * H, H, bias=False)  # h~_t = tanh(W_c [c_t; h_t])
            self.out = nn.Linear(H, c.tgt_vocab_size)
            if c.local == "p":
                self.position = LocalPosition(H, H)
        else:  # deep output from [s_t; c_t; E y_{t-1}], or [s_t; E y_{t-1}] when c only sets s_0
            self.out = nn.Linear((2 * H if c.context_every_step else H) + E, c.tgt_vocab_size)
        A = c.attn_dim or H
        if c.coverage:
            self.coverage_proj = nn.Linear(1, A, bias=False)  # w_c C_j
            if c.coverage_loss_from:  # added late (See et al.): starts as no change to the trained model
                nn.init.zeros_(self.coverage_proj.weight)
        # Coverage (vector and loss) on now: CoveragePhase turns it off for the first share of a
        # coverage_loss_from run; a plain attribute, so a loaded model has it on.
        self.coverage_phase: bool = True
        self.last_fertility: torch.Tensor | None = None  # Phi of the last training batch's real positions
        if c.prev_conv:
            self.prev_filter = nn.Conv1d(1, _CONV_CHANNELS, c.prev_conv, padding=c.prev_conv // 2, bias=False)
            self.prev_proj = nn.Linear(_CONV_CHANNELS, A, bias=False)  # U_f f_j
        if c.monotonic:
            self.monotonic_bias = nn.Parameter(torch.tensor(_MONOTONIC_BIAS))  # r of sigmoid(e + r)
        if c.sources > 1:
            self.source_combine = nn.Linear(c.sources * H, H)  # c_t = tanh(W_s [c_1; ...; c_K])
        if c.fertility:
            self.fertility_proj = nn.Linear(H, 1, bias=False)  # u_f of Phi_j = N sigmoid(u_f^T h_j)
        if c.hard == "reinforce":
            # The moving average of the reward; NaN until the first training batch sets it. Not
            # persistent: it belongs to a training run, not to the model, and checkpoints keep their keys.
            self.register_buffer("reward_baseline", torch.tensor(float("nan")), persistent=False)
            if c.reinforce_baseline == "learned":
                self.baseline_head = nn.Linear(H + 1, 1)  # b_t = w^T [s; share of the sentence to come] + b0
        # The Gumbel-softmax temperature now: a plain attribute (the config is frozen) that
        # attnlab.training.train's GumbelAnnealing lowers during training when config.temperature_final is set.
        self.temperature: float = c.temperature
        self.aux_loss: torch.Tensor | None = None
        # REINFORCE samples of one decode: per step (log_prob, entropy, sampled, query (B, H)), each (B,) but the query
        self._policy: list[tuple[torch.Tensor, ...]] | None = None

    def _device(self) -> torch.device:
        return self.tgt_emb.weight.device

    # ----------------------------------------------------------------- encoder
    def check_source(self, src) -> None:
        """Raise unless :meth:`encode` accepts ``src`` (the decoders call this before they start).

        Raises:
            TypeError, ValueError: as :meth:`encode`.
        """
        if self.config.source == "tokens":
            self._check_tokens(src)
        else:
            self._check_sources_given("src")
            self._check_states("src", src, None)

    def _check_sources_given(self, name: str) -> None:
        """A model of several sources cannot take one tensor of states: which source is each one from?"""
        K = self.config.sources
        if K > 1:
            raise ValueError(
                f"this model attends to sources={K} sources, so a bare {name} tensor does not say which source "
                f"each state comes from; build the memory with memory_from_states(states, mask, segments=...) "
                f"(a multi-source model's own encode does that)"
            )

    def _check_tokens(self, src) -> torch.Tensor:
        """Check token ids ``src (B, S)``; returns their ``(B,)`` lengths."""
        check_token_ids("src", src, vocab_size=self.config.src_vocab_size, device=self._device())
        return check_right_padded("src", src, PAD)  # (B,)

    def _check_states(self, name: str, states, mask) -> None:
        """``states``: float ``(B, S >= 1, H)`` like the model; ``mask``: None or bool ``(B, S)``, no row empty."""
        H = self.config.hid_dim
        check_float_tensor(name, states, dims=3, shape_text="(B, S, H)")
        if states.shape[2] != H or states.shape[1] < 1:
            raise ValueError(f"{name} must be (B, S >= 1, H={H}), got shape {tuple(states.shape)}")
        weight = self.tgt_emb.weight
        if states.device != weight.device:
            raise ValueError(
                f"{name} is on {states.device} but the model is on {weight.device}; move one of them "
                f"(e.g. {name}.to(next(model.parameters()).device))"
            )
        if states.dtype != weight.dtype:
            raise TypeError(f"{name} has dtype {states.dtype} but the model's weights are {weight.dtype}")
        if mask is None:
            return
        check_tensor("mask", mask, dims=2, shape_text="(B, S)")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = takes part in attention), got dtype {mask.dtype}")
        if mask.shape != states.shape[:2] or mask.device != states.device:
            raise ValueError(
                f"mask must be (B, S) = {tuple(states.shape[:2])} on {states.device} like {name}, "
                f"got shape {tuple(mask.shape)} on {mask.device}"
            )
        empty = ~mask.any(1)  # (B,)
        if bool(empty.any()):
            row = int(empty.nonzero()[0, 0])
            raise ValueError(f"mask row {row} has no True: every row needs at least one state to attend to")
        c = self.config
        if c.local or c.monotonic:
            # both read positions from the start (window centres, the monotonic read head)
            check_right_padded("mask", mask.long(), 0)

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the encoder (``source="tokens"``), or take ``src`` as the states (``source="states"``).

        Args:
            src: ``(B, S)`` integer source ids on the model's device, each row its tokens then
                ``PAD`` (right padding; a left-padded row is refused, since the encoder would read
                its padding as part of the sentence). With ``source="states"``: float ``(B, S, H)``
                states, every position real (for padded states use :meth:`memory_from_states`).

        Returns:
            memory dict: ``states (B, S, H)``, ``mask (B, S)`` bool, ``lengths (B,)``,
            ``summary (B, H)`` (final forward + first backward state; for given states their
            mean) and, with attention, ``prepared`` (the query-independent part of the score).

        Raises:
            TypeError: ``src`` is not an integer tensor (float for ``source="states"``).
            ValueError: wrong shape, another device, an id outside the source vocabulary, an
                all-padding row, or padding before a real token.
        """
        if self.config.source == "states":
            self._check_sources_given("src")
            return self.memory_from_states(src, name="src")
        lengths = self._check_tokens(src)  # (B,)
        states, summary = encode_tokens(self.src_emb, self.encoder, src, lengths, self.drop)  # (B, S, H), (B, H)
        return self._memory(states, src != PAD, summary)

    def memory_from_states(
        self,
        states: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        segments: torch.Tensor | None = None,
        summary: torch.Tensor | None = None,
        name: str = "states",
    ) -> dict[str, torch.Tensor]:
        """The decoder's memory over encoder states computed elsewhere (image regions, signal frames).

        The decoder's first state comes from one summary vector of the source. A GRU encoder has
        its final states for that; given states have no order to end in, so the summary is their
        mean over the real positions -- what Xu et al. (2015), "Show, Attend and Tell", feed the
        decoder's initialisation (the average of the annotation vectors) -- unless the caller
        passes its own ``summary``.

        With ``config.sources = K > 1`` the states of all sources come in one sequence and
        ``segments`` says which source each one belongs to; each source gets its own softmax (see
        :meth:`_attend`).

        Args:
            states: float ``(B, S, H)`` on the model's device, of its dtype.
            mask: ``(B, S)`` bool, True where a state takes part in attention (every row at least
                one; with local or monotonic attention the True positions must come first), or
                ``None`` (all True).
            segments: ``(B, S)`` integer source index in ``[0, K)`` of every state; required iff
                ``K > 1``, and every source needs at least one True mask position in every row.
            summary: optional float ``(B, H)`` that replaces the mean as the decoder's summary
                (e.g. the final states of the sources' own encoders).
            name: the argument's name in error messages.

        Returns:
            The dict :meth:`encode` returns: ``states``, ``mask``, ``lengths (B,)`` (True per row),
            ``summary (B, H)``, with attention ``prepared``, with ``K > 1`` ``segments (B, S)`` and
            with ``config.fertility`` ``fertility (B, S)``.

        Raises:
            TypeError: ``states`` or ``summary`` not float or of another dtype than the model;
                ``mask`` not bool; ``segments`` not integer.
            ValueError: wrong shapes or width, another device, a mask row without True; ``segments``
                missing for ``K > 1`` or given for ``K = 1``, out of ``[0, K)``, or a source without a
                True mask position in some row.
        """
        self._check_states(name, states, mask)
        if mask is None:
            mask = torch.ones(states.shape[:2], dtype=torch.bool, device=states.device)  # (B, S)
        self._check_segments(segments, states, mask)
        if summary is None:
            keep = mask.unsqueeze(-1).to(states.dtype)  # (B, S, 1)
            summary = (states * keep).sum(1) / keep.sum(1)  # (B, H) mean over the real positions
        else:
            self._check_summary(summary, states)
        return self._memory(states, mask, summary, segments)

    def _check_segments(self, segments, states: torch.Tensor, mask: torch.Tensor) -> None:
        """``segments``: integer ``(B, S)`` in ``[0, K)``, each source under the mask in every row; None iff K = 1."""
        K = self.config.sources
        if K == 1:
            if segments is not None:
                raise ValueError("segments is for a model of several sources; this one has sources=1 (give None)")
            return
        if segments is None:
            raise ValueError(f"sources={K}: memory_from_states needs segments, the (B, S) source index of each state")
        check_tensor("segments", segments, dims=2, shape_text="(B, S)")
        if segments.dtype.is_floating_point or segments.dtype.is_complex or segments.dtype == torch.bool:
            raise TypeError(f"segments must hold integer source indices in [0, {K}), got dtype {segments.dtype}")
        if segments.shape != states.shape[:2] or segments.device != states.device:
            raise ValueError(
                f"segments must be (B, S) = {tuple(states.shape[:2])} on {states.device} like the states, "
                f"got shape {tuple(segments.shape)} on {segments.device}"
            )
        lo, hi = int(segments.min()), int(segments.max())
        if lo < 0 or hi >= K:
            raise ValueError(f"segments holds source index {lo if lo < 0 else hi}, outside [0, sources={K})")
        for k in range(K):
            empty = ~((segments == k) & mask).any(1)  # (B,)
            if bool(empty.any()):
                row = int(empty.nonzero()[0, 0])
                raise ValueError(
                    f"segments row {row} has no True mask position of source {k}: each of the {K} sources "
                    f"needs at least one state to attend to in every row"
                )

    def _check_summary(self, summary, states: torch.Tensor) -> None:
        """``summary``: float ``(B, H)`` on the states' device, of their dtype."""
        check_float_tensor("summary", summary, dims=2, shape_text="(B, H)")
        want = (states.shape[0], self.config.hid_dim)
        if tuple(summary.shape) != want or summary.device != states.device:
            raise ValueError(
                f"summary must be (B, H) = {want} on {states.device} like the states, "
                f"got shape {tuple(summary.shape)} on {summary.device}"
            )
        if summary.dtype != states.dtype:
            raise TypeError(f"summary has dtype {summary.dtype} but the states are {states.dtype}")

    def _memory(
        self, states: torch.Tensor, mask: torch.Tensor, summary: torch.Tensor, segments: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """The one place the memory dict is built, whatever the source."""
        c = self.config
        memory = {"states": states, "mask": mask, "lengths": mask.sum(1), "summary": summary}  # lengths: (B,)
        if c.attention is not None:
            memory["prepared"] = self.score.prepare(states)  # (B, S, *)
        if segments is not None:
            memory["segments"] = segments  # (B, S)
        if c.fertility:
            m = c.fertility_floor
            squashed = torch.sigmoid(self.fertility_proj(states)).squeeze(-1)  # (B, S)
            memory["fertility"] = m + (c.fertility - m) * squashed  # (B, S)
            if self.training:  # for attnlab.training.train.FertilityTrace: Phi of the real positions
                self.last_fertility = memory["fertility"].detach()[mask]  # (n,)
        return memory

    def _memory_keys(self) -> tuple[str, ...]:
        """The tensors :meth:`decode` needs in its memory dict."""
        c = self.config
        keys = ("states", "mask", "lengths", "summary") + (("prepared",) if c.attention else ())
        return keys + (("segments",) if c.sources > 1 else ()) + (("fertility",) if c.fertility else ())

    def predicted_fertility(self, memory: dict[str, torch.Tensor]) -> torch.Tensor:
        """The fertility ``Phi_j = m + (N - m) sigmoid(u_f^T h_j)`` the model predicts for each source position.

        Tu et al. (2016) divide each step's attention by it before adding it to the coverage, so a
        word counts as covered once it has received about ``Phi_j`` steps' worth of attention;
        compare it with :func:`attnlab.data.gold.gold_fertility`.

        Args:
            memory: from :meth:`encode` or :meth:`memory_from_states` (``memory["fertility"]``).

        Returns:
            ``(B, S)`` values in ``(0, N)`` (also at masked positions, where they are never used).

        Raises:
            ValueError: the model has ``config.fertility = 0``.
            TypeError: ``memory`` is not such a dict.
        """
        if not self.config.fertility:
            raise ValueError("predicted_fertility needs a model with config.fertility > 0 (fertility coverage)")
        if not isinstance(memory, dict) or not isinstance(memory.get("fertility"), torch.Tensor):
            got = sorted(memory) if isinstance(memory, dict) else type(memory).__name__
            raise TypeError(f"memory must be the dict of encode or memory_from_states (with 'fertility'), got {got}")
        return memory["fertility"]  # (B, S)

    def init_state(self, memory: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Initial decoder state: ``(s_0,)`` or, for Luong, ``(h_0, h~_0 = 0)`` (``(B, H)`` each)."""
        s0 = torch.tanh(self.bridge(memory["summary"]))  # (B, H)
        base = (s0, torch.zeros_like(s0)) if self.config.attention == "luong" else (s0,)  # (B, H) each
        return base + self._init_extras(memory["mask"], s0.dtype)

    def _extra_names(self) -> tuple[str, ...]:
        """Names of the ``(B, S)`` tensors the variants add to the state, in order."""
        c = self.config
        return (("coverage",) if c.coverage else ()) + (("previous attention",) if (c.prev_conv or c.monotonic) else ())

    def _init_extras(self, mask: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        extras = []
        for name in self._extra_names():
            zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)  # (B, S)
            if name == "previous attention" and self.config.monotonic:
                zeros[:, 0] = 1.0  # the monotonic read head starts at the first source word
            extras.append(zeros)
        return tuple(extras)

    # ----------------------------------------------------------------- attention
    def _attend(
        self, query: torch.Tensor, memory: dict, t: int, extras: tuple[torch.Tensor, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """Context ``(B, H)``, weights ``(B, S)`` and the next variant state for query ``(B, H)`` at step ``t``.

        Soft variants end in one call of :func:`attnlab.core.scores.attend`; the local ones only narrow
        the mask to a window (and local-p adds its Gaussian). Coverage and the previous-attention
        convolution add a term to the concat score's ``U h_j``; monotonic and hard attention turn
        the scores into weights their own way and average the states with them.

        With ``K = config.sources > 1`` the scores are computed once and softmaxed ``K`` times, each
        time over one source's positions (``segments == k``): contexts ``c_k (B, H)`` and weights
        ``a_k (B, S)``. The context is ``tanh(W_s [c_1; ...; c_K])`` and the weights returned are
        ``sum_k a_k``, whose block of each source sums to 1 (Zoph & Knight 2016).
        """
        c = self.config
        states = memory["states"]  # (B, S, H)
        prepared = memory["prepared"]  # (B, S, *)
        named = dict(zip(self._extra_names(), extras, strict=True))
        if c.coverage and self.coverage_phase:
            prepared = prepared + self.coverage_proj(named["coverage"].unsqueeze(-1))  # (B, S, A)
        if c.prev_conv:
            f = self.prev_filter(named["previous attention"].unsqueeze(1)).transpose(1, 2)  # (B, S, F)
            prepared = prepared + self.prev_proj(f)  # (B, S, A)
        scores = self.score(query, states, prepared)  # (B, S)
        if c.monotonic or c.hard:
            attn = self._special_weights(scores, memory["mask"], named.get("previous attention"), query)  # (B, S)
            context = torch.bmm(attn.unsqueeze(1), states).squeeze(1)  # (B, H)
            return context, attn, self._next_extras(named, attn, memory.get("fertility"))
        allowed, gauss = memory["mask"], None  # (B, S)
        if c.sources > 1:
            segments = memory["segments"]  # (B, S)
            contexts, attn = [], None
            for k in range(c.sources):
                c_k, a_k = attend(scores, states, allowed & (segments == k))  # (B, H), (B, S)
                contexts.append(c_k)
                attn = a_k if attn is None else attn + a_k  # (B, S): the sources' blocks are disjoint
            context = torch.tanh(self.source_combine(torch.cat(contexts, dim=-1)))  # (B, H)
            return context, attn, self._next_extras(named, attn)
        if c.local is not None:
            S = scores.size(1)
            lengths = memory["lengths"]  # (B,)
            if c.local == "m":
                center = torch.minimum(torch.full_like(lengths, t), lengths - 1).to(scores.dtype)  # (B,)
            else:
                center = self.position(query, lengths)  # (B,)
            # The centre is a real position, always inside its own window: no row is empty.
            allowed = local_window_mask(center, S, c.window) & allowed  # (B, S)
            if c.local == "p":
                pos = torch.arange(S, device=scores.device, dtype=scores.dtype)  # (S,)
                sigma = c.window / 2
                gauss = torch.exp(-((pos - center.unsqueeze(1)) ** 2) / (2 * sigma**2))  # (B, S)
        context, attn = attend(scores, states, allowed, scale=gauss)  # (B, H), (B, S)
        return context, attn, self._next_extras(named, attn, memory.get("fertility"))

    def _special_weights(
        self, scores: torch.Tensor, mask: torch.Tensor, prev: torch.Tensor | None, query: torch.Tensor
    ) -> torch.Tensor:
        """``(B, S)`` weights of monotonic or hard attention (training: differentiable; eval: hard).

        ``query`` ``(B, H)`` is the step's query state, kept for REINFORCE's learned baseline.
        """
        if self.config.monotonic:
            energy = scores + self.monotonic_bias  # (B, S)
            if self.training:
                energy = energy + _MONOTONIC_NOISE * torch.randn_like(energy)  # (B, S)
            p = torch.sigmoid(energy) * mask  # (B, S): padding is never selected
            if self.training:
                return variants.monotonic_attention(p, prev)  # (B, S)
            return variants.hard_monotonic_attention(p, prev)  # (B, S)
        if self.training and self.config.hard == "gumbel":
            return variants.gumbel_straight_through(scores, mask, self.temperature)  # (B, S)
        if self.training:  # REINFORCE: a sample, no gradient through it; its log-probability is kept
            weights, log_prob, entropy = variants.reinforce_sample(scores, mask)  # (B, S), (B,), (B,)
            sampled = torch.ones_like(log_prob, dtype=torch.bool)  # (B,)
            if self.config.reinforce_mix:
                # Xu et al.: now and then read the expected context instead; those steps learn by
                # backpropagation like soft attention and are left out of the surrogate
                sampled = torch.rand(log_prob.shape, device=scores.device) >= self.config.reinforce_mix  # (B,)
                soft = masked_softmax(scores, mask)  # (B, S)
                weights = torch.where(sampled.unsqueeze(1), weights, soft)  # (B, S)
            if self._policy is not None:  # inside decode, which turns them into the surrogate loss
                self._policy.append((log_prob, entropy, sampled, query))
            return weights
        weights = masked_softmax(scores, mask)  # (B, S)
        return nn.functional.one_hot(weights.argmax(-1), scores.size(1)).to(scores.dtype)  # (B, S)

    @staticmethod
    def _next_extras(
        named: dict, attn: torch.Tensor, fertility: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """The variant state after a step: coverage ``C + alpha`` (``C + alpha / Phi`` with fertility), attention."""
        out = []
        for name in named:
            if name == "coverage":
                out.append(named[name] + (attn if fertility is None else attn / fertility))  # (B, S)
            else:
                out.append(attn)  # (B, S)
        return tuple(out)

    # ----------------------------------------------------------------- one step
    def step(
        self, memory: dict, state: tuple[torch.Tensor, ...], y_prev: torch.Tensor, t: int
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor | None]:
        """One decoding step.

        Args:
            memory: output of :meth:`encode`.
            state: decoder state from :meth:`init_state` or the previous step: a tuple of
                ``(B, H)`` tensors (one for Bahdanau and no attention, two for Luong).
            y_prev: ``(B,)`` previous target token ids (``BOS`` at ``t = 0``).
            t: step index ``>= 0`` (used by local-m attention).

        Returns:
            ``(logits (B, V), new state, attention weights (B, S) or None)``.

        Raises:
            TypeError, ValueError: ``y_prev`` is not ``(B,)`` integer ids of the target
                vocabulary on the model's device, ``state`` does not have the shape
                :meth:`init_state` gives for this batch, or ``t < 0``.
        """
        self._check_step(memory, state, y_prev, t)
        pre, state, attn = self._step(memory, state, self.drop(self.tgt_emb(y_prev)), t)
        return self.out(self.drop(pre)), state, attn

    def _check_step(self, memory: dict, state, y_prev: torch.Tensor, t: int) -> None:
        self._check_memory(memory)
        check_token_ids("y_prev", y_prev, vocab_size=self.config.tgt_vocab_size, device=self._device(), dims=1)
        check_int("t", t, minimum=0)
        B, H = memory["states"].shape[0], self.config.hid_dim
        if y_prev.shape[0] != B:
            raise ValueError(f"y_prev must be (B={B},) to match the memory, got shape {tuple(y_prev.shape)}")
        n = 2 if self.config.attention == "luong" else 1
        extra = self._extra_names()
        if not isinstance(state, (tuple, list)) or len(state) != n + len(extra):
            got = f"{len(state)} tensors" if isinstance(state, (tuple, list)) else type(state).__name__
            what = f"{n} (B, H) tensors" + (f" then {len(extra)} (B, S) ({', '.join(extra)})" if extra else "")
            raise ValueError(f"state must be a tuple of {what} (from init_state or step), got {got}")
        for i, s in enumerate(state[:n]):
            if not isinstance(s, torch.Tensor) or tuple(s.shape) != (B, H):
                got = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
                raise ValueError(f"state[{i}] must be (B={B}, H={H}), got {got}")
        S = memory["states"].shape[1]
        for i, (name, s) in enumerate(zip(extra, state[n:], strict=True), start=n):
            if not isinstance(s, torch.Tensor) or tuple(s.shape) != (B, S) or not s.is_floating_point():
                got = (s.dtype, tuple(s.shape)) if isinstance(s, torch.Tensor) else type(s).__name__
                raise ValueError(f"state[{i}] ({name}) must be a float (B={B}, S={S}) tensor, got {got}")

    def _cell(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One GRU step with the decoder's weights: ``(B, in) x (B, H) -> (B, H)``.

        ``nn.GRU`` on a length-1 sequence costs more per call than the bare cell; sharing the
        weights keeps one parameter set for both the fused and the step-by-step paths.
        """
        d = self.decoder
        return torch.gru_cell(x, h, d.weight_ih_l0, d.weight_hh_l0, d.bias_ih_l0, d.bias_hh_l0)  # (B, H)

    def _step(self, memory, state, emb, t):
        """Advance one step from embedded input ``emb (B, E)``; returns the pre-output (before
        the vocabulary projection, so training can project all steps at once), state, attention."""
        c = self.config
        if c.attention == "luong":
            h_prev, feed = state[:2]
            x = torch.cat([emb, feed], dim=-1) if c.input_feeding else emb  # (B, E+H) or (B, E)
            h = self._cell(x, h_prev)  # (B, H)
            context, attn, extras = self._attend(h, memory, t, tuple(state[2:]))  # (B, H), (B, S)
            h_tilde = torch.tanh(self.W_c(torch.cat([context, h], dim=-1)))  # (B, H)
            return h_tilde, (h, h_tilde, *extras), attn
        s_prev = state[0]
        extras = ()
        if c.attention == "bahdanau":
            # from the PREVIOUS state s_{t-1}
            context, attn, extras = self._attend(s_prev, memory, t, tuple(state[1:]))  # (B, H), (B, S)
        elif c.context_every_step:
            context, attn = memory["summary"], None  # the bottleneck: one fixed vector
        else:  # Sutskever et al.: c only set s_0
            s = self._cell(emb, s_prev)  # (B, H)
            return torch.cat([s, emb], dim=-1), (s,), None  # (B, H+E)
        x = torch.cat([emb, context], dim=-1)  # (B, E+H)
        s = self._cell(x, s_prev)  # (B, H)
        pre = torch.cat([s, context, emb], dim=-1)  # (B, 2H+E)
        return pre, (s, *extras), attn

    # ----------------------------------------------------------------- training
    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        gold: torch.Tensor | None = None,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score a batch of target sequences: :meth:`decode` of :meth:`encode`'s memory.

        Args:
            src: ``(B, S)`` source ids (``source="states"``: float ``(B, S, H)`` states).
            tgt_in, gold, teacher_forcing, return_attention: as :meth:`decode`.

        Returns:
            As :meth:`decode`.

        Raises:
            TypeError, ValueError: as :meth:`encode` for ``src`` and :meth:`decode` for the rest;
                the cheap checks run before the encoder does.
        """
        if self.config.source == "tokens":
            check_token_ids("src", src)  # fully checked in encode; B and S are needed first
        else:
            check_float_tensor("src", src, dims=3, shape_text="(B, S, H)")
        self._check_decode_args(src.shape[:2], tgt_in, gold, teacher_forcing)
        return self.decode(
            self.encode(src), tgt_in, gold, teacher_forcing=teacher_forcing, return_attention=return_attention
        )

    def _check_memory(self, memory) -> None:
        keys = self._memory_keys()
        if not isinstance(memory, dict) or not all(isinstance(memory.get(k), torch.Tensor) for k in keys):
            got = sorted(memory) if isinstance(memory, dict) else type(memory).__name__
            raise TypeError(f"memory must be the dict of encode or memory_from_states (keys {list(keys)}), got {got}")

    def _decode_steps(
        self, memory: dict, state: tuple[torch.Tensor, ...], emb: torch.Tensor, teacher_forcing: float
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the decoder step by step over the embedded inputs ``emb (B, T, E)``: logits and attention."""
        pres, attns, logits_steps = [], [], []
        # unbind once: indexing emb[:, t] inside the loop would make autograd build a full-size
        # zero gradient for every step.
        emb_steps = emb.unbind(1)  # T x (B, E)
        y_prev_emb = emb_steps[0]  # (B, E)
        for t in range(emb.size(1)):
            pre, state, attn = self._step(memory, state, y_prev_emb, t)
            pres.append(pre)
            attns.append(attn)
            if teacher_forcing < 1.0:
                logits_t = self.out(self.drop(pre))  # (B, V): needed now to pick the next input
                logits_steps.append(logits_t)
            if t + 1 < emb.size(1):
                if teacher_forcing < 1.0 and torch.rand(()) >= teacher_forcing:
                    y_prev_emb = self.drop(self.tgt_emb(logits_t.argmax(-1)))  # (B, E) own prediction
                else:
                    y_prev_emb = emb_steps[t + 1]  # (B, E) gold token
        if logits_steps:
            logits = torch.stack(logits_steps, dim=1)  # (B, T, V)
        else:
            # The output layer is position-wise, so apply it once to all steps (faster on CPU).
            logits = self.out(self.drop(torch.stack(pres, dim=1)))  # (B, T, V)
        attn = torch.stack(attns, dim=1) if attns[0] is not None else None  # (B, T, S)
        return logits, attn

    def _reinforce_loss(self, policy: list, logits: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """REINFORCE loss of one training batch; moves the reward baseline on.

        The reward of sentence ``b`` is the mean log-likelihood per token of its gold target under
        this forward pass (targets read off ``tgt_in``: :func:`attnlab.models.variants.next_tokens`); the
        baseline is the moving average of the batch-mean reward over the earlier batches (the
        first batch uses its own mean). The policy-gradient part of
        :func:`attnlab.models.variants.reinforce_surrogate` counts by its gradient only -- its value swings
        with ``r - b`` and would drown the cross-entropy in the recorded training loss -- so its
        value is subtracted again (detached): the loss returned has the surrogate's gradient and
        the value of its entropy term alone (0 without ``entropy_bonus``).
        """
        sampled = torch.stack([s for _, _, s, _ in policy], dim=1)  # (B, T): False where the step read soft
        keep = (tgt_in != PAD) & sampled  # (B, T)
        log_probs = torch.stack([lp for lp, _, _, _ in policy], dim=1)  # (B, T)
        entropy = torch.stack([h for _, h, _, _ in policy], dim=1)  # (B, T)
        bonus = self.config.entropy_bonus
        if self.config.reinforce_baseline == "learned":
            queries = torch.stack([q for _, _, _, q in policy], dim=1).detach()  # (B, T, H)
            return self._reinforce_to_go(log_probs, keep, entropy, queries, logits, tgt_in)
        reward = variants.sentence_log_likelihood(logits.detach(), variants.next_tokens(tgt_in))  # (B,)
        with torch.no_grad():
            seen = self.reward_baseline
            baseline = torch.where(torch.isnan(seen), reward.mean().to(seen.dtype), seen)  # ()
            self.reward_baseline.copy_(REINFORCE_DECAY * baseline + (1 - REINFORCE_DECAY) * reward.mean())
        baseline = baseline.to(reward.dtype)
        full = variants.reinforce_surrogate(log_probs, keep, reward, baseline, entropy=entropy, entropy_bonus=bonus)
        policy_gradient = variants.reinforce_surrogate(log_probs, keep, reward, baseline)
        return full - policy_gradient.detach()  # the gradient of full; the value of its entropy term alone

    def _reinforce_to_go(self, log_probs, keep, entropy, queries, logits, tgt_in) -> torch.Tensor:
        """REINFORCE loss with per-step rewards-to-go and a learned baseline (``reinforce_baseline="learned"``).

        ``G_t = (1/n) sum_{t' >= t} log p(y_t')`` (so ``G_0`` is the sentence reward of the ``"average"``
        baseline); ``b_t = w^T [s_t; (n - t) / n] + b0`` from the detached query; the loss has the gradient
        of ``-(1/B) sum_{b,t} (G_t - b_t) log p(a_t) - lambda_e mean H + mean (b_t - G_t)^2`` and the value
        of its entropy term alone (as :meth:`_reinforce_loss`).
        """
        real = tgt_in != PAD  # (B, T)
        n = real.sum(1, keepdim=True).clamp_min(1).to(log_probs.dtype)  # (B, 1)
        targets = variants.next_tokens(tgt_in)  # (B, T)
        logp = torch.log_softmax(logits.detach().float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
        logp = (logp * real).to(log_probs.dtype)  # (B, T)
        to_go = logp.flip(1).cumsum(1).flip(1) / n  # (B, T): G_t
        steps = torch.arange(tgt_in.size(1), device=tgt_in.device).to(log_probs.dtype)  # (T,)
        share = ((n - steps.unsqueeze(0)) / n).clamp_min(0)  # (B, T): the share of the sentence from t on
        baseline = self.baseline_head(torch.cat([queries, share.unsqueeze(-1)], dim=-1)).squeeze(-1)  # (B, T)
        advantage = (to_go - baseline).detach()  # (B, T)
        policy_gradient = -(advantage * log_probs * keep).sum() / log_probs.size(0)
        fit = ((baseline - to_go) ** 2 * real).sum() / real.sum().clamp_min(1)
        entropy_term = -self.config.entropy_bonus * (entropy * keep).sum() / keep.sum().clamp_min(1)
        gradient_only = policy_gradient + fit
        return entropy_term + gradient_only - gradient_only.detach()

    def _check_decode_args(self, source_shape, tgt_in, gold, teacher_forcing) -> float:
        """Check :meth:`decode`'s arguments against the source's ``(B, S)``; returns ``teacher_forcing``."""
        B, S = source_shape
        check_token_ids("tgt_in", tgt_in, vocab_size=self.config.tgt_vocab_size, device=self._device())
        if tgt_in.size(0) != B:
            raise ValueError(f"tgt_in must be (B={B}, T), got shape {tuple(tgt_in.shape)}")
        teacher_forcing = check_probability("teacher_forcing", teacher_forcing, allow_one=True)
        if self.training and self.config.align_loss > 0:
            if gold is None:
                raise ValueError("align_loss > 0 needs the gold attention (B, T, S) as forward's third input to train")
            check_float_tensor("gold", gold, dims=3, shape_text="(B, T, S)")
            if gold.shape != (*tgt_in.shape, S):
                raise ValueError(f"gold must be (B, T, S) = {(*tgt_in.shape, S)}, got {tuple(gold.shape)}")
        return teacher_forcing

    def decode(
        self,
        memory: dict[str, torch.Tensor],
        tgt_in: torch.Tensor,
        gold: torch.Tensor | None = None,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score a batch of target sequences given the memory (everything after the encoder).

        Args:
            memory: from :meth:`encode` or :meth:`memory_from_states`.
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + target), ``T >= 1``.
            gold: optional ``(B, T, S)`` gold attention (rows of :func:`attnlab.data.gold.gold_attention`);
                needed in training when ``config.align_loss > 0``, ignored otherwise.
            teacher_forcing: probability in ``[0, 1]`` of feeding the gold previous token (1.0 = always);
                otherwise the model's own greedy prediction is fed back.
            return_attention: also return the attention weights.

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn (B, T, S))`` when ``return_attention``
            (``attn`` is ``None`` for the model without attention). In training mode with a
            coverage or alignment loss weight, ``self.aux_loss`` holds their weighted sum
            (else ``None``).

        Raises:
            TypeError, ValueError: ``memory`` is not such a dict; ``tgt_in`` not ``(B, T >= 1)``
                integer ids of the target vocabulary on the model's device; ``teacher_forcing``
                outside ``[0, 1]``; a missing or misshapen ``gold`` where it is needed.
        """
        self._check_memory(memory)
        teacher_forcing = self._check_decode_args(memory["mask"].shape, tgt_in, gold, teacher_forcing)
        c = self.config
        reinforce = self.training and c.hard == "reinforce"
        cover = c.coverage_loss > 0 and self.coverage_phase
        wants_aux = self.training and (cover or c.align_loss > 0 or c.undertranslation_loss > 0 or reinforce)
        self.aux_loss = None
        state = self.init_state(memory)
        emb = self.drop(self.tgt_emb(tgt_in))  # (B, T, E)
        if c.attention is None and teacher_forcing >= 1.0:
            # Fast path: with a fixed context and gold inputs, all steps run in one fused GRU call.
            T = tgt_in.size(1)
            ctx = memory["summary"].unsqueeze(1).expand(-1, T, -1)  # (B, T, H)
            if c.context_every_step:
                states, _ = self.decoder(torch.cat([emb, ctx], dim=-1), state[0].unsqueeze(0))  # (B, T, H)
                logits = self.out(self.drop(torch.cat([states, ctx, emb], dim=-1)))  # (B, T, V)
            else:
                states, _ = self.decoder(emb, state[0].unsqueeze(0))  # (B, T, H)
                logits = self.out(self.drop(torch.cat([states, emb], dim=-1)))  # (B, T, V)
            return (logits, None) if return_attention else logits
        self._policy = [] if reinforce else None  # filled by _special_weights, one entry per step
        try:
            logits, attn = self._decode_steps(memory, state, emb, teacher_forcing)  # (B, T, V), (B, T, S)
            policy = self._policy
        finally:
            self._policy = None
        if wants_aux:
            aux = attn.new_zeros(())
            if cover:
                aux = aux + c.coverage_loss * variants.coverage_loss(attn, tgt_in != PAD)
            if c.undertranslation_loss > 0:
                under = variants.undertranslation_loss(attn, memory["mask"], tgt_in != PAD)
                aux = aux + c.undertranslation_loss * under
            if c.align_loss > 0:
                aux = aux + c.align_loss * variants.alignment_loss(attn, gold.to(attn.dtype))
            if reinforce:
                aux = aux + self._reinforce_loss(policy, logits, tgt_in)
            self.aux_loss = aux
        if not return_attention:
            return logits
        return logits, attn


def states_decoder_config(config, **fields) -> RNNConfig:
    """The :class:`RNNConfig` of lesson 2's Bahdanau decoder (``concat`` score) over states that a model's own
    encoder gives (``source="states"``), sized by ``config``.

    Args:
        config: a model config with ``tgt_vocab_size``, ``emb_dim``, ``hid_dim``, ``attn_dim`` and ``dropout``
            (the captioner's, the transcriber's, the multi-source model's).
        fields: the further :class:`RNNConfig` fields the model sets (``max_src_len``, ``prev_conv``, ``sources``).
    """
    return RNNConfig(
        src_vocab_size=None,
        tgt_vocab_size=config.tgt_vocab_size,
        emb_dim=config.emb_dim,
        hid_dim=config.hid_dim,
        attention="bahdanau",
        score="concat",
        attn_dim=config.attn_dim,
        dropout=config.dropout,
        source="states",
        **fields,
    )


class StatesEncoderDecoder(nn.Module):
    """Base of the models whose own encoder feeds a ``source="states"`` :class:`Seq2SeqRNN` (``self.decoder``).

    The captioner (:class:`attnlab.models.vision.Captioner`) and the transcriber
    (:class:`attnlab.models.speech.Transcriber`) differ only in what turns their input into states; a
    subclass gives :meth:`check_source` and :meth:`encode_states`, and this class speaks the
    decoding protocol of :mod:`attnlab.models.decoding` with them. It adds no parameters.
    """

    decoder: Seq2SeqRNN

    def check_source(self, x: torch.Tensor) -> None:  # pragma: no cover - every subclass overrides it
        """Raise ``TypeError``/``ValueError`` unless :meth:`encode` accepts ``x``."""
        raise NotImplementedError

    def encode_states(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:  # pragma: no cover
        """``x`` -> ``(states (B, S, H), keep (B, S) bool or None when every position is real)``."""
        raise NotImplementedError

    def encode(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Check ``x``, encode it, and build the decoder's memory over the states."""
        self.check_source(x)
        states, keep = self.encode_states(x)  # (B, S, H), (B, S) or None
        return self.decoder.memory_from_states(states, keep)

    def init_state(self, memory: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The decoder's initial state (see :meth:`Seq2SeqRNN.init_state`)."""
        return self.decoder.init_state(memory)

    def step(self, memory: dict, state: tuple[torch.Tensor, ...], y_prev: torch.Tensor, t: int):
        """One decoding step: ``(logits (B, V), state, attention over the states (B, S))``."""
        return self.decoder.step(memory, state, y_prev, t)
