"""Lesson 5's toy model: one multi-head attention layer whose four heads are given four jobs.

The input is a random sequence of ``length`` tokens; at every position ``i`` the model outputs four
tokens at once, one per head: the previous token (``i - 1``, wrapping around), the next one
(``i + 1``, wrapping around), the mirrored one (``length - 1 - i``) and the first one (``0``). Output
``h`` is read from head ``h``'s ``D`` features only (the layer's output projection is the identity),
so each head can be watched doing its own job. With ``positions=False`` the model has no position
embeddings: the ablation of lesson 5's exercise.

Shapes: ``N`` sequences, ``T`` = ``length`` positions, ``E`` = ``d_model``, ``H`` heads (= tasks),
``D = E / H``, ``V`` = ``vocab``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnlab.core.attention import MultiHeadAttention
from attnlab.core.checks import check_positive_int

__all__ = ["HEAD_TASKS", "HeadTasksConfig", "HeadPerTask", "head_task_sources", "make_head_batch"]

HEAD_TASKS = ("previous", "next", "mirror", "first")


@dataclass(frozen=True)
class HeadTasksConfig:
    """Sizes of :class:`HeadPerTask` (one head per task of :data:`HEAD_TASKS`, so ``num_heads`` is 4)."""

    vocab: int = 10
    length: int = 8
    d_model: int = 32
    num_heads: int = len(HEAD_TASKS)
    positions: bool = True

    def __post_init__(self):
        for name in ("vocab", "length", "d_model"):
            check_positive_int(name, getattr(self, name))
        if self.num_heads != len(HEAD_TASKS):
            raise ValueError(f"num_heads must be {len(HEAD_TASKS)} (one head per task of {HEAD_TASKS}), "
                             f"got {self.num_heads}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model must be a multiple of num_heads={self.num_heads}, got {self.d_model}")
        if not isinstance(self.positions, bool):
            raise TypeError(f"positions must be a bool, got {self.positions!r}")


def head_task_sources(length: int) -> torch.Tensor:
    """``(H, T)``: the position whose token output ``h`` must produce at each position ``i``."""
    pos = torch.arange(check_positive_int("length", length))  # (T,)
    return torch.stack([(pos - 1) % length, (pos + 1) % length, length - 1 - pos, torch.zeros_like(pos)])  # (H, T)


def make_head_batch(n: int, generator: torch.Generator, config: HeadTasksConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random sequences ``(N, T)`` and their answers ``(N, H, T)`` (answer of output ``h`` at position ``i``)."""
    tokens = torch.randint(0, config.vocab, (check_positive_int("n", n), config.length), generator=generator)  # (N, T)
    return tokens, tokens[:, head_task_sources(config.length)]  # (N, T), (N, H, T)


class HeadPerTask(nn.Module):
    """Token embeddings (+ learned positions) -> one ``MultiHeadAttention`` -> one readout per head."""

    def __init__(self, config: HeadTasksConfig):
        super().__init__()
        self.config = config
        E, H, T = config.d_model, config.num_heads, config.length
        self.tok = nn.Embedding(config.vocab, E)
        self.pos = nn.Parameter(0.5 * torch.randn(T, E)) if config.positions else None  # (T, E): learned positions
        self.attn = MultiHeadAttention(E, H)
        self.attn.out_proj = nn.Identity()  # head h's D features reach readout h unmixed
        self.readout = nn.ModuleList(nn.Linear(E // H, config.vocab) for _ in range(H))

    def forward(self, tokens: torch.Tensor, need_weights: bool = False):
        """``(N, T)`` tokens -> logits ``(N, H, T, V)`` and, with ``need_weights``, the weights ``(N, H, T, T)``."""
        h = self.tok(tokens)  # (N, T, E)
        if self.pos is not None:
            h = h + self.pos  # (N, T, E)
        out, w = self.attn(h, h, h, need_weights=need_weights, average_attn_weights=False)  # (N, T, E)
        heads = out.split(self.config.d_model // self.config.num_heads, dim=-1)  # H x (N, T, D)
        logits = torch.stack([r(o) for r, o in zip(self.readout, heads, strict=True)], 1)  # (N, H, T, V)
        return logits, w
