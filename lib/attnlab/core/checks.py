"""The input checks every public entry point of :mod:`attnlab` uses, and ``eval_mode``.

One small set of helpers, so that a wrong argument gives the same kind of message everywhere:
the argument's name, what was expected, and what was given (shape, dtype, value). Nothing here
changes its input; each check either returns normally or raises.

Exception types (the same everywhere in the library):

* ``TypeError`` -- the wrong kind of object or dtype (a float tensor of token ids, a str size);
* ``ValueError`` -- the right kind with a wrong value or shape (a negative size, an id outside
  the vocabulary, a tensor on another device, a left-padded batch).

Shape legend
------------
B   batch size
S   source length
T   target length
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator, Sequence

import torch
from torch import nn

__all__ = [
    "check_choice",
    "check_int",
    "check_positive_int",
    "check_probability",
    "check_float",
    "check_tensor",
    "check_float_tensor",
    "check_token_ids",
    "check_right_padded",
    "eval_mode",
]


def check_choice(name: str, value, allowed) -> str:
    """Return ``value`` after checking it is one of the strings ``allowed``.

    Raises:
        ValueError: ``{name} must be one of 'a', 'b', got 'c'``.
    """
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def check_int(name: str, value, *, minimum: int | None = None) -> int:
    """Return ``value`` as an ``int`` after checking it is a whole number ``>= minimum``.

    ``bool`` is refused (``True`` is an ``int`` in Python but never a size).

    Raises:
        TypeError: ``value`` is not an integer.
        ValueError: ``value < minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` after checking it is ``>= 1`` (sizes, head counts, lengths)."""
    return check_int(name, value, minimum=1)


def check_probability(name: str, p, *, allow_one: bool = False) -> float:
    """Return ``p`` as a float after checking it lies in ``[0, 1)`` (``[0, 1]`` with ``allow_one``).

    Dropout uses the half-open interval: ``p = 1`` would zero every activation.

    Raises:
        TypeError: ``p`` is not a real number.
        ValueError: ``p`` is outside the interval (NaN included).
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(p).__name__} {p!r}")
    p = float(p)
    ok = 0.0 <= p <= 1.0 if allow_one else 0.0 <= p < 1.0
    if not ok:
        interval = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {p}")
    return p


def check_float(name: str, value, *, minimum: float = 0.0, strict: bool = False) -> float:
    """Return ``value`` as a finite float after checking it is ``>= minimum`` (``> minimum`` with ``strict``).

    Loss weights use ``minimum=0`` (``>= 0``); temperatures use ``strict=True`` (``> 0``).

    Raises:
        TypeError: ``value`` is not a real number (``bool`` included).
        ValueError: ``value`` is NaN, infinite or below the bound.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float, got {type(value).__name__} {value!r}")
    value = float(value)
    ok = math.isfinite(value) and (value > minimum if strict else value >= minimum)
    if not ok:
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {value}")
    return value


def _shape_text(shape: Sequence[str | int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def check_tensor(name: str, x, *, dims: int | Sequence[int] | None = None, shape_text: str | None = None) -> None:
    """Check ``x`` is a tensor with ``dims`` dimensions (one int or a choice of several).

    Args:
        name: the argument's name, used in the message.
        x: the object to check.
        dims: the allowed number(s) of dimensions, or None for any.
        shape_text: how the expected shape reads in the message, e.g. ``"(B, S)"``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if dims is None:
        return
    allowed = (dims,) if isinstance(dims, int) else tuple(dims)
    if x.dim() not in allowed:
        want = shape_text or " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name} must be {want}, got shape {tuple(x.shape)}")


def check_float_tensor(name: str, x, *, dims: int | Sequence[int] | None = None, shape_text: str | None = None) -> None:
    """Like :func:`check_tensor`, and the dtype must be floating point."""
    check_tensor(name, x, dims=dims, shape_text=shape_text)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype} (shape {tuple(x.shape)})")


def check_token_ids(
    name: str,
    x,
    *,
    vocab_size: int | None = None,
    device: torch.device | str | None = None,
    dims: int = 2,
    min_length: int | None = 1,
) -> None:
    """Check a tensor of token ids: integer dtype, ``dims`` dims, ids in ``[0, vocab_size)``.

    Args:
        name: the argument's name (``"src"``, ``"tgt_in"``...).
        x: ``(B, S)`` (or ``(B,)`` with ``dims=1``) token ids.
        vocab_size: ids must be below this (None: not checked).
        device: the model's device; ``x`` must be on it (None: not checked).
        dims: 2 for a batch of sequences, 1 for one token per sentence.
        min_length: for ``dims=2``, the smallest allowed length (dim 1); None for no limit.
    """
    want = {1: "(B,)", 2: "(B, S)" if name.startswith("src") else "(B, T)"}.get(dims)
    check_tensor(name, x, dims=dims, shape_text=f"{want} token ids" if want else None)
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {x.dtype}")
    if device is not None and x.device != torch.device(device):
        raise ValueError(
            f"{name} is on {x.device} but the model is on {torch.device(device)}; move one of them "
            f"(e.g. {name}.to(next(model.parameters()).device))"
        )
    if dims == 2 and min_length is not None and x.shape[1] < min_length:
        raise ValueError(f"{name} must have length >= {min_length} (dim 1), got shape {tuple(x.shape)}")
    if x.numel() and vocab_size is not None:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{name} holds token id {bad}, outside the vocabulary [0, {vocab_size})")


def check_right_padded(name: str, ids: torch.Tensor, pad: int) -> torch.Tensor:
    """Check every row of ``ids`` is tokens then padding (no pad before a real token).

    The RNN encoders read a sentence left to right and pack it by length; a left-padded row
    would be read as padding followed by a truncated sentence and give silently wrong states.

    Args:
        name: the argument's name.
        ids: ``(B, S)`` token ids.
        pad: the padding id.

    Returns:
        ``(B,)`` int64 lengths (number of non-pad tokens per row).

    Raises:
        ValueError: a row has a pad before a real token, or a row is all padding.
    """
    real = ids != pad  # (B, S)
    lengths = real.sum(1)  # (B,)
    if bool((lengths == 0).any()):
        row = int((lengths == 0).nonzero()[0, 0])
        raise ValueError(f"{name} row {row} is all padding: every sentence needs at least one token")
    positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)  # (1, S)
    expected = positions < lengths.unsqueeze(1)  # (B, S)
    bad = (real != expected).any(1)  # (B,)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{name} row {row} has padding (id {pad}) before a real token: the models expect right-padded "
            f"batches (tokens first, then padding); got {ids[row].tolist()}"
        )
    return lengths


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``with eval_mode(model): ...`` runs the block in eval mode without gradients, then restores.

    The model's previous train/eval flag is put back even if the block raises, so evaluating in
    the middle of training never leaves dropout switched off.
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)
