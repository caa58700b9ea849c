"""Pointer networks (Vinyals, Fortunato & Jaitly 2015): the output is a position in the input.

An LSTM encoder reads the input elements ``P_1 .. P_N`` (vectors; for sorting one number each) into
states ``e_j``; an LSTM decoder, fed at each step the element it pointed at the step before (a
learned start vector at the first), has state ``d_i``. The attention scores *are* the output::

    u_j^i = v^T tanh(W1 e_j + W2 d_i)        p(C_i | C_1..C_{i-1}, P) = softmax_j(u^i)

Unlike content-based attention, the weights are not used to blend the ``e_j`` into a context vector:
the most likely position is the answer, so the output "vocabulary" is the input itself and grows
with it. As in the paper, the decoder's initial state is the encoder's final state.

``mask_pointed`` (default True): positions already pointed at get score ``-inf`` in training
(teacher forcing: the gold ones) and in decoding (the model's own). Vinyals et al. let the softmax
range over all positions and kept only valid outputs at inference (their beam search for the
travelling salesman); masking in training too is the common modern reading and a departure, say so
where it matters. The mask follows the course's rule: True = takes part.

Shape legend
------------
B  batch size
N  input elements (one length per batch)
T  output steps (N for a permutation)
D  features per element (``input_dim``)
H  LSTM state size
A  attention hidden size
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnlab.core.checks import check_float_tensor, check_positive_int, check_tensor

__all__ = ["PointerNetConfig", "PointerNet"]


@dataclass(frozen=True)
class PointerNetConfig:
    """A pointer network's sizes.

    Attributes:
        input_dim: features per input element (1 for a number).
        hid_dim: LSTM state size of the encoder and the decoder.
        attn_dim: size of ``W1 e_j`` and ``W2 d_i``.
        mask_pointed: forbid pointing twice at one position (see the module docstring).
    """

    input_dim: int = 1
    hid_dim: int = 64
    attn_dim: int = 64
    mask_pointed: bool = True

    def __post_init__(self):
        for name in ("input_dim", "hid_dim", "attn_dim"):
            check_positive_int(name, getattr(self, name))
        if not isinstance(self.mask_pointed, bool):
            raise TypeError(f"mask_pointed must be a bool, got {type(self.mask_pointed).__name__}")


class PointerNet(nn.Module):
    """Vinyals et al.'s Ptr-Net: LSTM encoder, LSTM decoder, additive attention as the output distribution."""

    def __init__(self, config: PointerNetConfig):
        super().__init__()
        if not isinstance(config, PointerNetConfig):
            raise TypeError(f"config must be a PointerNetConfig, got {type(config).__name__}")
        self.config = c = config
        self.encoder = nn.LSTM(c.input_dim, c.hid_dim, batch_first=True)
        self.decoder = nn.LSTMCell(c.input_dim, c.hid_dim)
        self.start = nn.Parameter(torch.full((c.input_dim,), -1.0))  # the paper's "=>" input symbol
        self.W1 = nn.Linear(c.hid_dim, c.attn_dim, bias=False)
        self.W2 = nn.Linear(c.hid_dim, c.attn_dim, bias=False)
        self.v = nn.Linear(c.attn_dim, 1, bias=False)

    def _check_x(self, x) -> None:
        check_float_tensor("x", x, dims=3, shape_text="(B, N, D)")
        if x.size(-1) != self.config.input_dim:
            raise ValueError(
                f"x must have input_dim={self.config.input_dim} features (dim 2), got shape {tuple(x.shape)}"
            )
        if x.size(1) < 1:
            raise ValueError(f"x must hold at least one element (dim 1), got shape {tuple(x.shape)}")

    def _check_targets(self, targets, x) -> None:
        check_tensor("targets", targets, dims=2, shape_text="(B, T) positions")
        if targets.dtype.is_floating_point or targets.dtype == torch.bool:
            raise TypeError(f"targets must hold integer positions, got dtype {targets.dtype}")
        if targets.size(0) != x.size(0) or targets.size(1) > x.size(1):
            raise ValueError(
                f"targets must be (B, T) with B={x.size(0)} and T <= N={x.size(1)}, got shape {tuple(targets.shape)}"
            )
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= x.size(1)):
            bad = int(targets.min()) if int(targets.min()) < 0 else int(targets.max())
            raise ValueError(f"targets holds position {bad}, outside the input [0, {x.size(1)})")

    def scores(self, keys: torch.Tensor, d: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """``u_j = v^T tanh(W1 e_j + W2 d)`` with ``-inf`` where ``allowed`` is False: ``(B, N)``.

        Args:
            keys: ``(B, N, A)`` the precomputed ``W1 e_j``.
            d: ``(B, H)`` decoder state.
            allowed: ``(B, N)`` bool, True = may be pointed at.
        """
        u = self.v(torch.tanh(keys + self.W2(d).unsqueeze(1))).squeeze(-1)  # (B, N)
        return u.masked_fill(~allowed, float("-inf"))  # (B, N)

    def _run(self, x: torch.Tensor, targets: torch.Tensor | None, steps: int):
        B, N, _ = x.shape
        e, (h, c) = self.encoder(x)  # e: (B, N, H); h, c: (1, B, H)
        keys = self.W1(e)  # (B, N, A)
        state = (h[0], c[0])  # (B, H) each
        inp = self.start.expand(B, -1)  # (B, D)
        allowed = torch.ones(B, N, dtype=torch.bool, device=x.device)  # (B, N)
        rows = torch.arange(B, device=x.device)  # (B,)
        logits, picks = [], []
        for t in range(steps):
            state = self.decoder(inp, state)  # (B, H) each
            u = self.scores(keys, state[0], allowed)  # (B, N)
            logits.append(u)
            pick = u.argmax(-1) if targets is None else targets[:, t]  # (B,)
            picks.append(pick)
            if self.config.mask_pointed:
                allowed = allowed.clone()
                allowed[rows, pick] = False
            inp = x[rows, pick]  # (B, D): the element just pointed at
        return torch.stack(logits, dim=1), torch.stack(picks, dim=1)  # (B, T, N), (B, T)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Pointer scores with the gold positions fed back (teacher forcing).

        Args:
            x: ``(B, N, D)`` float input elements.
            targets: ``(B, T)`` gold positions (``T <= N``).

        Returns:
            ``(B, T, N)`` scores ``u`` (``-inf`` at masked positions); ``softmax(-1)`` is ``p``.
        """
        self._check_x(x)
        self._check_targets(targets, x)
        return self._run(x, targets, targets.size(1))[0]

    @torch.no_grad()
    def decode(self, x: torch.Tensor, steps: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding: at each step the most likely position, fed back as the next input.

        Args:
            x: ``(B, N, D)`` float input elements.
            steps: output steps (default ``N``: a permutation when ``mask_pointed``).

        Returns:
            ``(pointers (B, T), attention (B, T, N))``: the chosen positions and the pointer
            distributions ``p`` (rows sum to 1; masked positions get exactly 0).
        """
        self._check_x(x)
        steps = x.size(1) if steps is None else check_positive_int("steps", steps)
        if self.config.mask_pointed and steps > x.size(1):
            raise ValueError(f"steps must be <= N={x.size(1)} when positions cannot repeat, got {steps}")
        logits, picks = self._run(x, None, steps)
        return picks, torch.softmax(logits, dim=-1)  # (B, T), (B, T, N)
