"""Token-level losses shared by every model family: the masked cross-entropy and its label-smoothing floor.

Shape legend
------------
B  batch size
T  target length
V  target vocabulary size
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_float_tensor, check_positive_int, check_probability, check_token_ids
from attnlab.data.vocab import PAD


def _check_logits(logits: torch.Tensor, target: torch.Tensor) -> None:
    """``logits (B, T, V)`` floats and ``target (B, T)`` integer ids in ``[0, V)`` on the same device."""
    check_float_tensor("logits", logits, dims=3, shape_text="(B, T, V)")
    check_token_ids("target", target, device=logits.device, min_length=None)
    if target.shape != logits.shape[:2]:
        raise ValueError(
            f"target must be (B, T) = {tuple(logits.shape[:2])} to match logits {tuple(logits.shape)}, "
            f"got shape {tuple(target.shape)}"
        )
    check_token_ids("target", target, vocab_size=logits.shape[2], min_length=None)


def masked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over non-pad target tokens.

    Args:
        logits: ``(B, T, V)`` floats.
        target: ``(B, T)`` integer ids in ``[0, V)``, ``PAD`` where there is no token.
        label_smoothing: fraction in ``[0, 1)`` of probability mass spread over the vocabulary.

    Returns:
        Scalar loss (NaN when every target is ``PAD``: there is nothing to average).

    Raises:
        TypeError: non-float logits, non-integer target, ``label_smoothing`` not a number.
        ValueError: wrong shapes, target ids outside the vocabulary or on another device,
            ``label_smoothing`` outside ``[0, 1)``.
    """
    label_smoothing = check_probability("label_smoothing", label_smoothing)
    _check_logits(logits, target)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), target.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


def smoothed_loss_floor(vocab_size: int, label_smoothing: float) -> float:
    """The lowest value :func:`masked_cross_entropy` can reach with label smoothing: a perfect model's loss.

    The smoothed target puts ``1 - e + e / V`` on the right word and ``e / V`` on each other word;
    the cross-entropy of any prediction against it is at least the target's own entropy, reached
    when the prediction equals the target. With ``e = 0`` that is 0.

    Args:
        vocab_size: ``V``, an int >= 2.
        label_smoothing: ``e`` in ``[0, 1)``.

    Returns:
        The entropy of the smoothed target, in nats.
    """
    v = check_positive_int("vocab_size", vocab_size)
    if v < 2:
        raise ValueError(f"vocab_size must be >= 2, got {v}")
    e = check_probability("label_smoothing", label_smoothing)
    right, other = 1 - e + e / v, e / v
    return -(right * math.log(right)) - ((v - 1) * other * math.log(other) if e > 0 else 0.0)
