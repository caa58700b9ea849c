"""Attention masks and the masked softmax every attention module in the course uses.

Convention (the same as ``torch.nn.functional.scaled_dot_product_attention``):

* a **boolean** mask says which positions *take part*: ``True`` = attend, ``False`` = blocked;
* a **float** mask is *added* to the scores (``0`` = keep, ``-inf`` = blocked, anything else = bias).

A row in which every key is blocked ("fully masked row", e.g. a query at a padding position
that is not allowed to see anything) is defined here on purpose: its attention weights are all
exactly ``0`` and therefore its output is the zero vector. No NaN reaches the output or the
gradients. PyTorch's own modules disagree with each other on this case, so the course pins it.

Shape legend
------------
B  batch size
H  number of heads (optional leading dims are allowed wherever ``...`` appears)
L  number of queries (target length)
S  number of keys / values (source length)
"""

from __future__ import annotations

import torch

__all__ = [
    "padding_mask",
    "causal_mask",
    "combine_masks",
    "as_additive",
    "check_mask",
    "masked_softmax",
    "to_nn_mha_mask",
]


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Boolean key-padding mask from sequence lengths.

    Args:
        lengths: ``(B,)`` integer tensor of true lengths.
        max_len: padded length ``S``; defaults to ``lengths.max()``.

    Returns:
        ``(B, S)`` bool tensor, ``True`` at real tokens, ``False`` at padding.
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError("lengths must be non-negative")
    S = int(lengths.max().item()) if max_len is None else int(max_len)
    if max_len is not None and lengths.numel() and int(lengths.max()) > S:
        raise ValueError(f"max_len={S} is shorter than the longest length {int(lengths.max())}")
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)


def causal_mask(L: int, S: int | None = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean causal mask: query ``i`` may attend to keys ``0..i`` (aligned to the end when S > L).

    Args:
        L: number of queries.
        S: number of keys (defaults to ``L``). When ``S > L`` the queries are the last ``L``
            positions of the key sequence (incremental decoding with a cache).
        device: where to create the mask.

    Returns:
        ``(L, S)`` bool tensor, lower-triangular ``True``.
    """
    S = L if S is None else S
    if L < 0 or S < 0:
        raise ValueError(f"L and S must be non-negative, got L={L}, S={S}")
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)  # (L, S)


def check_mask(mask: torch.Tensor, scores_shape: torch.Size | tuple[int, ...], name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is bool/float and broadcasts to ``scores_shape``.

    The mask may have fewer leading dims than the scores, but its last two dims must equal
    ``(L, S)`` or be 1, and every other dim must equal the score's dim or be 1. Silent
    broadcasting of a wrong-length mask is refused.
    """
    if not (mask.dtype == torch.bool or mask.dtype.is_floating_point):
        raise TypeError(f"{name} must be bool (True = attend) or float (added to scores), got {mask.dtype}")
    shape = tuple(scores_shape)
    if mask.dim() > len(shape):
        raise ValueError(f"{name} has shape {tuple(mask.shape)}, more dims than the scores {shape}")
    for m, s in zip(reversed(mask.shape), reversed(shape)):
        if m not in (1, s):
            raise ValueError(
                f"{name} has shape {tuple(mask.shape)}, which does not broadcast to the scores' "
                f"shape {shape} (expected trailing dims (L, S) = {shape[-2:]} or 1)"
            )


def as_additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Turn a bool mask into an additive one (``0`` keep, ``-inf`` blocked); floats pass through."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)  # same shape as mask
        return zeros.masked_fill(~mask, float("-inf"))
    return mask.to(dtype)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Combine masks that must all allow a position (logical AND for bools, sum for floats).

    Bool and float masks may be mixed; the result is float if any input is float.
    ``None`` entries are skipped; all-``None`` gives ``None``.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    if all(m.dtype == torch.bool for m in present):
        out = present[0]
        for m in present[1:]:
            out = out & m  # broadcasts, e.g. (B, 1, 1, S) & (L, S) -> (B, 1, L, S)
        return out
    dtype = next(m.dtype for m in present if m.dtype.is_floating_point)
    out = as_additive(present[0], dtype)
    for m in present[1:]:
        out = out + as_additive(m, dtype)  # -inf + anything = -inf: blocked stays blocked
    return out


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` that respects a mask and never produces NaN.

    Args:
        scores: ``(..., L, S)`` raw attention scores.
        mask: ``None``, a bool mask (``True`` = attend) or a float mask (added), broadcastable
            to ``scores`` (checked).
        dim: the key dimension (default last).

    Returns:
        Weights with the shape of ``scores``: non-negative, summing to 1 over allowed keys,
        exactly 0 on blocked keys, and all 0 in a row where every key is blocked.
    """
    if mask is not None:
        check_mask(mask, scores.shape)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # (..., L, S)
        else:
            scores = scores + mask.to(scores.dtype)  # (..., L, S)
    # A row that is -inf everywhere would give 0/0 = NaN; give it finite scores, then zero it.
    dead = torch.isneginf(scores).all(dim=dim, keepdim=True)  # (..., L, 1)
    safe = scores.masked_fill(dead, 0.0)  # (..., L, S)
    weights = torch.softmax(safe, dim=dim)  # (..., L, S)
    return weights.masked_fill(dead, 0.0)  # (..., L, S)


def to_nn_mha_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Convert a course mask to what ``nn.MultiheadAttention`` expects.

    ``nn.MultiheadAttention``'s boolean ``attn_mask`` / ``key_padding_mask`` mean the opposite of
    ours: ``True`` = *blocked*. Float masks mean the same in both and pass through.
    """
    if mask is None:
        return None
    return ~mask if mask.dtype == torch.bool else mask
