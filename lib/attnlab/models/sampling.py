"""Sampling decoders: temperature, top-k and top-p (nucleus) sampling, for any model of the decoding protocol.

Greedy decoding takes the most probable token at every step (:func:`attnlab.models.decoding.greedy_decode`).
Sampling draws the next token from the model's distribution, reshaped by three knobs applied in this
order to the logits ``z`` of one step:

* **temperature** ``tau > 0``: ``softmax(z / tau)``; below 1 sharpens the distribution (``tau -> 0``
  tends to greedy), above 1 flattens it;
* **top-k** ``k >= 1``: keep the ``k`` most probable tokens (Fan et al. 2018); ``k = 1`` is greedy;
* **top-p** ``0 < p <= 1``: keep the smallest set of most probable tokens whose probability reaches
  ``p`` (nucleus sampling, Holtzman et al. 2020); ``p = 1`` keeps every token.

What is cut gets probability 0 and the rest is renormalised to sum to 1. ``<pad>`` and ``<bos>``
never appear inside a sentence and are never drawn (as in beam search).

Shape legend
------------
B  batch size
V  target vocabulary size
T  decoded length (incl. ``<eos>``)
"""

from __future__ import annotations

import math
import numbers

import torch

from attnlab.core.checks import check_positive_int, check_token_ids, eval_mode
from attnlab.data.vocab import BOS, EOS, PAD
from attnlab.models.decoding import FORBIDDEN

__all__ = ["check_sampling", "next_token_probs", "sample_next", "sample_decode"]


def check_sampling(temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0) -> tuple:
    """The three knobs after checking them; a clear error names the one that is wrong.

    Raises:
        ValueError: ``temperature <= 0`` (or not finite), ``top_k < 1``, ``top_p`` outside ``(0, 1]``.
        TypeError: a knob of the wrong type.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a number > 0, got {type(temperature).__name__} {temperature!r}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be > 0 (and finite), got {temperature}; greedy decoding is its limit 0")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
            raise TypeError(f"top_k must be an int >= 1 or None, got {type(top_k).__name__} {top_k!r}")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1 (1 = greedy) or None (no cut), got {top_k}")
    if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real):
        raise TypeError(f"top_p must be a number in (0, 1], got {type(top_p).__name__} {top_p!r}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1 = no cut), got {top_p}")
    return float(temperature), None if top_k is None else int(top_k), float(top_p)


def next_token_probs(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0
) -> torch.Tensor:
    """The distribution sampling draws from: temperature, then top-k, then top-p, renormalised.

    Args:
        logits: ``(B, V)`` or ``(V,)`` float logits of the next token (``-inf`` = impossible).
        temperature, top_k, top_p: see the module docstring.

    Returns:
        Probabilities of the shape of ``logits``, each row summing to 1, zero outside the kept set.
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() not in (1, 2):
        raise TypeError(f"logits must be a (B, V) or (V,) float tensor, got {logits!r}")
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (B, V)
    V = probs.shape[-1]
    sorted_p, order = probs.sort(dim=-1, descending=True)  # (B, V) each
    rank = torch.arange(V, device=probs.device)  # (V,)
    keep = torch.ones_like(sorted_p, dtype=torch.bool)  # (B, V) in sorted order
    if top_k is not None:
        keep &= rank < top_k
    if top_p < 1:
        before = sorted_p.cumsum(-1) - sorted_p  # (B, V) mass of the more probable tokens
        keep &= before < top_p  # a token is kept while the mass before it has not reached p
    keep[..., 0] = True  # the most probable token always stays
    kept = torch.zeros_like(keep).scatter(-1, order, keep)  # (B, V) back in vocabulary order
    probs = probs.masked_fill(~kept, 0.0)  # (B, V)
    return probs / probs.sum(-1, keepdim=True)  # (B, V)


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row of ``logits (B, V)`` from :func:`next_token_probs`; returns ``(B,)`` ids."""
    probs = next_token_probs(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


@torch.no_grad()
def sample_decode(
    model,
    src: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    max_len: int = 80,
    seed: int = 0,
) -> torch.Tensor:
    """Decode ``src`` by sampling, step by step with the model's cache.

    Args:
        model: a model of the decoding protocol.
        src: ``(B, S)`` source ids.
        temperature, top_k, top_p: see the module docstring.
        max_len: most tokens per sentence (``<eos>`` included).
        seed: seed of the draws (the same seed, the same sentences).

    Returns:
        ``(B, T)`` ids: tokens, ``<eos>``, then ``<pad>`` (a row cut at ``max_len`` has no ``<eos>``).
    """
    check_sampling(temperature, top_k, top_p)
    check_token_ids("src", src, dims=2)
    max_len = check_positive_int("max_len", max_len)
    gen = torch.Generator(device=src.device).manual_seed(int(seed))
    with eval_mode(model):
        memory = model.encode(src)
        state = model.init_state(memory)
        B = src.shape[0]
        y = torch.full((B,), BOS, dtype=torch.long, device=src.device)  # (B,) <bos>
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        out = []
        for t in range(max_len):
            logits, state, _ = model.step(memory, state, y, t)  # (B, V)
            logits = logits.float().clone()
            logits[:, list(FORBIDDEN)] = -math.inf
            y = sample_next(logits, temperature, top_k, top_p, generator=gen)  # (B,)
            y = y.masked_fill(done, PAD)  # (B,) a finished sentence is padded
            out.append(y)
            done |= y == EOS
            if bool(done.all()):
                break
        return torch.stack(out, dim=1)  # (B, T)
