"""GRU encoder-decoders: no attention (the bottleneck), Bahdanau attention, Luong attention.

One model class with a switch (``RNNConfig.attention``):

* ``None`` -- the decoder's only view of the source is one vector, the encoder's final state
  ``c``: ``s_t = GRU([E y_{t-1}; c], s_{t-1})`` (the RNNencdec baseline of Bahdanau et al.).
* ``"bahdanau"`` -- the context is recomputed at every step from the *previous* decoder state:
  ``e_{t-1,j} = score(s_{t-1}, h_j)``, ``alpha = softmax(e)``, ``c_t = sum_j alpha_j h_j``,
  ``s_t = GRU([E y_{t-1}; c_t], s_{t-1})`` (Bahdanau et al., 2014).
* ``"luong"`` -- attention comes *after* the RNN step, from the *current* state:
  ``h_t = GRU([E y_{t-1}; h~_{t-1}], h_{t-1})`` (input feeding), ``c_t = sum_j alpha_tj h_j`` with
  ``alpha_t = softmax(score(h_t, h_j))``, ``h~_t = tanh(W_c [c_t; h_t])``, ``p(y_t) = softmax(W_s h~_t)``;
  global or local (``local="m"`` / ``"p"``) attention.

The encoder is a bidirectional GRU with ``hid_dim // 2`` units per direction, so its states
``h_j`` have the decoder's size ``H`` and the parameter-free ``dot`` score works.

Every model speaks the decoding protocol used by :mod:`attnlab.decoding`:
``encode(src) -> memory``, ``init_state(memory) -> state``,
``step(memory, state, y_prev, t) -> (logits, state, attn)``.

Shape legend
------------
B  batch size
S  source length (incl. ``<eos>``)
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

from .checks import check_int, check_positive_int, check_probability, check_right_padded, check_token_ids
from .scores import AttentionScore, LocalPosition, attend, local_window_mask
from .vocab import PAD

__all__ = ["RNNConfig", "Seq2SeqRNN"]

ATTENTIONS = (None, "bahdanau", "luong")


@dataclass(frozen=True)
class RNNConfig:
    """Configuration of :class:`Seq2SeqRNN` (frozen: a config is a value, saved beside checkpoints).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        emb_dim: E.
        hid_dim: H (even; the encoder uses H/2 per direction).
        attention: ``None``, ``"bahdanau"`` or ``"luong"``.
        score: score kind (:data:`attnlab.scores.SCORE_KINDS`); Bahdanau's own is ``"concat"``.
        attn_dim: hidden size of the ``concat`` score (default H).
        input_feeding: Luong only: feed ``h~_{t-1}`` into the next RNN step.
        local: Luong only: ``None`` (global), ``"m"`` (monotonic) or ``"p"`` (predictive).
        window: half width D of the local window.
        max_src_len: longest source the ``location`` score can address.
        dropout: dropout on embeddings and decoder outputs.
    """

    src_vocab_size: int
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

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention={self.attention!r}; expected one of {ATTENTIONS}")
        for name in ("src_vocab_size", "tgt_vocab_size", "emb_dim", "hid_dim", "max_src_len"):
            check_positive_int(name, getattr(self, name))
        if self.hid_dim % 2 or self.hid_dim < 2:
            raise ValueError(
                f"hid_dim must be even and >= 2 (two encoder directions of hid_dim // 2 units), got {self.hid_dim}"
            )
        if self.attn_dim is not None:
            check_positive_int("attn_dim", self.attn_dim)
        if not isinstance(self.input_feeding, bool):
            raise TypeError(f"input_feeding must be a bool, got {type(self.input_feeding).__name__}")
        if self.local not in (None, "m", "p"):
            raise ValueError(f"local={self.local!r}; expected None, 'm' or 'p'")
        if self.local and self.attention != "luong":
            raise ValueError("local attention is a Luong variant: set attention='luong'")
        check_int("window", self.window, minimum=0)
        if self.local == "p" and self.window < 1:
            # the Gaussian of local-p has sigma = window / 2: a zero window divides by zero
            raise ValueError(f"local='p' needs window >= 1 (its Gaussian has sigma = window / 2), got {self.window}")
        check_probability("dropout", self.dropout)


class Seq2SeqRNN(nn.Module):
    """GRU encoder-decoder with a switchable attention (see module docstring)."""

    def __init__(self, config: RNNConfig):
        super().__init__()
        self.config = c = config
        H, E = c.hid_dim, c.emb_dim
        self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)
        self.encoder = nn.GRU(E, H // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(H, H)  # final encoder summary -> initial decoder state
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, E, padding_idx=PAD)
        self.drop = nn.Dropout(c.dropout)
        rnn_in = E + (H if (c.attention != "luong" or c.input_feeding) else 0)
        self.decoder = nn.GRU(rnn_in, H, batch_first=True)
        if c.attention is not None:
            self.score = AttentionScore(c.score, H, H, c.attn_dim, max_len=c.max_src_len)
        if c.attention == "luong":
            self.W_c = nn.Linear(2 * H, H, bias=False)  # h~_t = tanh(W_c [c_t; h_t])
            self.out = nn.Linear(H, c.tgt_vocab_size)
            if c.local == "p":
                self.position = LocalPosition(H, H)
        else:
            self.out = nn.Linear(2 * H + E, c.tgt_vocab_size)  # deep output from [s_t; c_t; E y_{t-1}]

    def _device(self) -> torch.device:
        return self.src_emb.weight.device

    # ----------------------------------------------------------------- encoder
    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the encoder.

        Args:
            src: ``(B, S)`` integer source ids on the model's device, each row its tokens then
                ``PAD`` (right padding; a left-padded row is refused, since the encoder would read
                its padding as part of the sentence).

        Returns:
            memory dict: ``states (B, S, H)``, ``mask (B, S)`` bool, ``lengths (B,)``,
            ``summary (B, H)`` (final forward + first backward state) and, with attention,
            ``prepared`` (the query-independent part of the score).

        Raises:
            TypeError: ``src`` is not an integer tensor.
            ValueError: wrong shape, another device, an id outside the source vocabulary, an
                all-padding row, or padding before a real token.
        """
        check_token_ids("src", src, vocab_size=self.config.src_vocab_size, device=self._device())
        lengths = check_right_padded("src", src, PAD)  # (B,)
        mask = src != PAD  # (B, S)
        emb = self.drop(self.src_emb(src))  # (B, S, E)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.encoder(packed)  # h_n: (2, B, H/2)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, H)
        summary = torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, H)
        memory = {"states": states, "mask": mask, "lengths": lengths, "summary": summary}
        if self.config.attention is not None:
            memory["prepared"] = self.score.prepare(states)  # (B, S, *)
        return memory

    def init_state(self, memory: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Initial decoder state: ``(s_0,)`` or, for Luong, ``(h_0, h~_0 = 0)`` (``(B, H)`` each)."""
        s0 = torch.tanh(self.bridge(memory["summary"]))  # (B, H)
        if self.config.attention == "luong":
            return (s0, torch.zeros_like(s0))  # (B, H), (B, H)
        return (s0,)

    # ----------------------------------------------------------------- attention
    def _attend(self, query: torch.Tensor, memory: dict, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Context ``(B, H)`` and weights ``(B, S)`` for decoder query ``(B, H)`` at step ``t``.

        Every variant ends in one call of :func:`attnlab.scores.attend`; the local ones only
        narrow the mask to a window (and local-p adds its Gaussian).
        """
        c = self.config
        states = memory["states"]  # (B, S, H)
        scores = self.score(query, states, memory["prepared"])  # (B, S)
        allowed, gauss = memory["mask"], None  # (B, S)
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
        return attend(scores, states, allowed, scale=gauss)  # (B, H), (B, S)

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
        check_token_ids("y_prev", y_prev, vocab_size=self.config.tgt_vocab_size, device=self._device(), dims=1)
        check_int("t", t, minimum=0)
        B, H = memory["states"].shape[0], self.config.hid_dim
        if y_prev.shape[0] != B:
            raise ValueError(f"y_prev must be (B={B},) to match the memory, got shape {tuple(y_prev.shape)}")
        n = 2 if self.config.attention == "luong" else 1
        if not isinstance(state, (tuple, list)) or len(state) != n:
            got = f"{len(state)} tensors" if isinstance(state, (tuple, list)) else type(state).__name__
            raise ValueError(f"state must be a tuple of {n} (B, H) tensors (from init_state or step), got {got}")
        for i, s in enumerate(state):
            if not isinstance(s, torch.Tensor) or tuple(s.shape) != (B, H):
                got = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
                raise ValueError(f"state[{i}] must be (B={B}, H={H}), got {got}")

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
            h_prev, feed = state
            x = torch.cat([emb, feed], dim=-1) if c.input_feeding else emb  # (B, E+H) or (B, E)
            h = self._cell(x, h_prev)  # (B, H)
            context, attn = self._attend(h, memory, t)  # (B, H), (B, S)
            h_tilde = torch.tanh(self.W_c(torch.cat([context, h], dim=-1)))  # (B, H)
            return h_tilde, (h, h_tilde), attn
        (s_prev,) = state
        if c.attention == "bahdanau":
            context, attn = self._attend(s_prev, memory, t)  # from the PREVIOUS state s_{t-1}
        else:
            context, attn = memory["summary"], None  # the bottleneck: one fixed vector
        x = torch.cat([emb, context], dim=-1)  # (B, E+H)
        s = self._cell(x, s_prev)  # (B, H)
        pre = torch.cat([s, context, emb], dim=-1)  # (B, 2H+E)
        return pre, (s,), attn

    # ----------------------------------------------------------------- training
    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score a batch of target sequences.

        Args:
            src: ``(B, S)`` source ids.
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + target), ``T >= 1``.
            teacher_forcing: probability in ``[0, 1]`` of feeding the gold previous token (1.0 = always);
                otherwise the model's own greedy prediction is fed back.
            return_attention: also return the attention weights.

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn (B, T, S))`` when ``return_attention``
            (``attn`` is ``None`` for the model without attention).

        Raises:
            TypeError, ValueError: as :meth:`encode` for ``src``; ``tgt_in`` not ``(B, T >= 1)``
                integer ids of the target vocabulary on the model's device; ``teacher_forcing``
                outside ``[0, 1]``.
        """
        check_token_ids("src", src)  # fully checked in encode; B is needed first
        check_token_ids("tgt_in", tgt_in, vocab_size=self.config.tgt_vocab_size, device=self._device())
        if tgt_in.size(0) != src.size(0):
            raise ValueError(f"tgt_in must be (B={src.size(0)}, T), got shape {tuple(tgt_in.shape)}")
        teacher_forcing = check_probability("teacher_forcing", teacher_forcing, allow_one=True)
        memory = self.encode(src)
        state = self.init_state(memory)
        c = self.config
        emb = self.drop(self.tgt_emb(tgt_in))  # (B, T, E)
        if c.attention is None and teacher_forcing >= 1.0:
            # Fast path: with a fixed context and gold inputs, all steps run in one fused GRU call.
            T = tgt_in.size(1)
            ctx = memory["summary"].unsqueeze(1).expand(-1, T, -1)  # (B, T, H)
            states, _ = self.decoder(torch.cat([emb, ctx], dim=-1), state[0].unsqueeze(0))  # (B, T, H)
            logits = self.out(self.drop(torch.cat([states, ctx, emb], dim=-1)))  # (B, T, V)
            return (logits, None) if return_attention else logits
        pres, attns, logits_steps = [], [], []
        # unbind once: indexing emb[:, t] inside the loop would make autograd build a full-size
        # zero gradient for every step.
        emb_steps = emb.unbind(1)  # T x (B, E)
        y_prev_emb = emb_steps[0]  # (B, E)
        for t in range(tgt_in.size(1)):
            pre, state, attn = self._step(memory, state, y_prev_emb, t)
            pres.append(pre)
            attns.append(attn)
            if teacher_forcing < 1.0:
                logits_t = self.out(self.drop(pre))  # (B, V): needed now to pick the next input
                logits_steps.append(logits_t)
            if t + 1 < tgt_in.size(1):
                if teacher_forcing < 1.0 and torch.rand(()) >= teacher_forcing:
                    y_prev_emb = self.drop(self.tgt_emb(logits_t.argmax(-1)))  # (B, E) own prediction
                else:
                    y_prev_emb = emb_steps[t + 1]  # (B, E) gold token
        if logits_steps:
            logits = torch.stack(logits_steps, dim=1)  # (B, T, V)
        else:
            # The output layer is position-wise, so apply it once to all steps (faster on CPU).
            logits = self.out(self.drop(torch.stack(pres, dim=1)))  # (B, T, V)
        if not return_attention:
            return logits
        attn = torch.stack(attns, dim=1) if attns[0] is not None else None  # (B, T, S)
        return logits, attn
