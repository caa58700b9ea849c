"""Attention masks and the masked softmax every attention module in the course uses.

Convention (the same as ``torch.nn.functional.scaled_dot_product_attention``):

* a **boolean** mask says which positions *take part*: ``True`` = attend, ``False`` = blocked;
* a **float** mask is *added* to the scores (``0`` = keep, ``-inf`` = blocked, any other finite
  value = a bias; ``+inf`` and NaN are refused).

``nn.MultiheadAttention`` and ``nn.Transformer*`` read boolean masks the other way round
(``True`` = blocked). So that code ported from them cannot silently invert its masks, the
course's mask arguments never reuse their names: ``key_keep`` / ``attn_keep`` instead of
``key_padding_mask`` / ``attn_mask``, ``src_keep`` / ``tgt_keep`` instead of ``src_mask`` /
``tgt_mask``; passing a PyTorch name raises a ``TypeError`` that says so
(:func:`refuse_torch_mask_names`).

A row in which every key is blocked ("fully masked row", e.g. a query at a padding position
that is not allowed to see anything) is defined here on purpose: its attention weights are all
exactly ``0`` and therefore its output is the zero vector, with finite gradients. PyTorch's own
modules disagree with each other on this case, so the course pins it.

NaN policy: NaN in, NaN out. The mask is *added* to the scores (a boolean mask in its additive
form), so a NaN score stays NaN even where the mask blocks it, and a row holding a NaN score
gets NaN weights -- fully masked or not. Nothing here turns a NaN into a number: a NaN score
always means a bug upstream (an overflow, a corrupted input) and hiding it would hide the bug.

Shape legend
------------
B  batch size
H  number of heads (optional leading dims are allowed wherever ``...`` appears)
L  number of queries (target length)
S  number of keys / values (source length)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from attnlab.core.checks import check_float_tensor, check_int, check_tensor

__all__ = [
    "padding_mask",
    "causal_mask",
    "combine_masks",
    "as_additive",
    "check_mask",
    "masked_softmax",
    "to_nn_mha_mask",
    "refuse_torch_mask_names",
]


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Boolean key-padding mask from sequence lengths.

    Args:
        lengths: ``(B,)`` integer tensor of true lengths.
        max_len: padded length ``S``; defaults to ``lengths.max()``.

    Returns:
        ``(B, S)`` bool tensor, ``True`` at real tokens, ``False`` at padding.
    """
    check_tensor("lengths", lengths, dims=1, shape_text="(B,)")
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    if max_len is None:
        S = int(lengths.max()) if lengths.numel() else 0
    else:
        S = check_int("max_len", max_len, minimum=0)
        if lengths.numel() and int(lengths.max()) > S:
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
    L = check_int("L", L, minimum=0)
    S = L if S is None else check_int("S", S, minimum=0)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)  # (L, S)


def _check_mask_dtype(mask, name: str) -> None:
    check_tensor(name, mask)
    if not (mask.dtype == torch.bool or mask.dtype.is_floating_point):
        raise TypeError(f"{name} must be bool (True = attend) or float (added to scores), got {mask.dtype}")


def check_mask(mask: torch.Tensor, scores_shape: torch.Size | tuple[int, ...], name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is a valid course mask for scores of ``scores_shape``.

    The mask must be bool, or float without ``+inf`` or NaN (``-inf`` blocks, finite values are
    biases; ``+inf`` would make the softmax NaN and NaN has no meaning as a mask). It may have
    fewer leading dims than the scores, but its last two dims must equal ``(L, S)`` or be 1, and
    every other dim must equal the score's dim or be 1. Silent broadcasting of a wrong-length
    mask is refused.
    """
    _check_mask_dtype(mask, name)
    shape = tuple(scores_shape)
    if mask.dim() > len(shape):
        raise ValueError(f"{name} has shape {tuple(mask.shape)}, more dims than the scores {shape}")
    for m, s in zip(reversed(mask.shape), reversed(shape), strict=False):
        if m not in (1, s):
            raise ValueError(
                f"{name} has shape {tuple(mask.shape)}, which does not broadcast to the scores' "
                f"shape {shape} (expected trailing dims (L, S) = {shape[-2:]} or 1)"
            )
    # The maximum is NaN when any entry is NaN and +inf when any is +inf: one number, no (L, S)
    # temporary (tiled attention checks an (L, S) mask without an (L, S) allocation).
    top = float(mask.max()) if mask.dtype.is_floating_point and mask.numel() else 0.0
    if math.isnan(top) or top == math.inf:
        bad = "NaN" if bool(mask.isnan().any()) else "+inf"
        raise ValueError(
            f"{name} is a float mask holding {bad}: float masks are added to the scores, so only finite "
            "values (biases) and -inf (blocked) are allowed"
        )


def as_additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive form of a mask: a bool mask becomes ``0`` (keep) / ``-inf`` (blocked); floats pass through.

    Args:
        mask: ``None``, a bool or a float mask (any shape).
        dtype: the floating-point dtype of the result.

    Returns:
        ``None`` or a float tensor of ``mask``'s shape in ``dtype``.
    """
    if mask is None:
        return None
    _check_mask_dtype(mask, "mask")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
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
    for i, m in enumerate(present):
        _check_mask_dtype(m, f"mask {i}")
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
    """Softmax over ``dim`` that respects a mask and gives fully masked rows zero weights.

    Args:
        scores: ``(..., L, S)`` raw attention scores (floating point).
        mask: ``None``, a bool mask (``True`` = attend) or a float mask (added), broadcastable
            to ``scores`` (checked).
        dim: the key dimension (default last).

    Returns:
        Weights with the shape of ``scores``: non-negative, summing to 1 over allowed keys,
        exactly 0 on blocked keys, and all 0 in a row where every key is blocked. A row with a
        NaN score is NaN (see the NaN policy in the module docstring).
    """
    check_float_tensor("scores", scores)
    if mask is not None:
        check_mask(mask, scores.shape)
        # Added, not filled in: a NaN score must stay NaN where the mask blocks it (NaN policy).
        scores = scores + as_additive(mask, scores.dtype)  # (..., L, S)
    # A row that is -inf everywhere would give 0/0 = NaN; give it finite scores, then zero it.
    dead = torch.isneginf(scores).all(dim=dim, keepdim=True)  # (..., L, 1)
    safe = scores.masked_fill(dead, 0.0)  # (..., L, S)
    weights = torch.softmax(safe, dim=dim)  # (..., L, S)
    return weights.masked_fill(dead, 0.0)  # (..., L, S)


def to_nn_mha_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Convert a course mask to the convention of ``nn.MultiheadAttention`` (and back).

    ``nn.MultiheadAttention``'s boolean ``attn_mask`` / ``key_padding_mask`` mean the opposite of
    ours: ``True`` = *blocked*. Inverting is its own inverse, so the same call also turns a
    PyTorch boolean mask into a course mask. Float masks mean the same in both and pass through.
    """
    if mask is None:
        return None
    _check_mask_dtype(mask, "mask")
    return ~mask if mask.dtype == torch.bool else mask


def refuse_torch_mask_names(**new_names: str | None) -> Callable:
    """Decorator: calling the function with one of PyTorch's mask names raises a ``TypeError``.

    Args:
        new_names: ``pytorch_name="our_name"`` for each refused keyword; ``None`` where the
            function has no such argument at all (the message then says so).

    The message names the function, says that PyTorch's boolean masks mean ``True`` = blocked
    while ours mean ``True`` = takes part, and names the argument to use instead.
    """

    def decorate(fn: Callable) -> Callable:
        where = fn.__qualname__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in new_names.items():
                if old in kwargs:
                    instead = (
                        f"pass {new}= instead, True where attention is allowed"
                        if new
                        else "this function has no such argument"
                    )
                    raise TypeError(
                        f"{where}() got {old}=..., but {old} is PyTorch's name for a mask in which True means "
                        f"*blocked*; attnlab's masks mean the opposite (True = takes part), so no argument here "
                        f"is called {old}: {instead} (a PyTorch boolean mask m converts with ~m or "
                        "attnlab.core.masks.to_nn_mha_mask(m))"
                    )
            return fn(*args, **kwargs)

        return wrapper

    return decorate
