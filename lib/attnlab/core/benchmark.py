"""Forward+backward time of multi-head self-attention on CPU: PyTorch vs attnlab's two paths.

The functions behind ``python benchmarks/bench_mha.py`` and lesson 5's benchmark cell, in the installed
package so that a lesson copied out of ``notebooks/`` still finds them. The script's defaults: batch
32, length 128, width 256, 8 heads, 2 threads; ``--causal`` and ``--padding`` add masks). It prints the
median time of each variant and its ratio to ``nn.MultiheadAttention``. Both modules get the same masks, each in its own
convention: ours ``key_keep`` (``True`` = real token), PyTorch's ``key_padding_mask`` (``True`` =
padding, converted with :func:`attnlab.core.masks.to_nn_mha_mask`).
Targets: fast path <= 1.1x, weights path <= 2x ``nn.MultiheadAttention`` (need_weights=False,
PyTorch's own fast configuration). This is a measurement, not a test: nothing asserts on time.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from attnlab.core.attention import MultiHeadAttention
from attnlab.core.masks import causal_mask, padding_mask, to_nn_mha_mask

# torch.utils.benchmark imports torch.utils.cpp_extension, which logs "No CUDA runtime is found" on a CPU-only
# machine: a warning about compiling CUDA extensions, which nothing here does.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark as torch_benchmark  # noqa: E402

__all__ = ["time_fwd_bwd", "run", "report", "median_ms"]


def _fwd_bwd_seconds(fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> float:
    for p in params:
        p.grad = None
    start = time.perf_counter()
    fn().sum().backward()
    return time.perf_counter() - start


def time_fwd_bwd(
    variants: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]], warmup: int, repeats: int
) -> dict[str, float]:
    """Median seconds of ``fn().sum().backward()`` per variant.

    The variants take turns (one run each per round) so that a burst of load from other programs
    hits all of them alike instead of whichever happened to be running.
    """
    times: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(warmup + repeats):
        for name, (fn, params) in variants.items():
            elapsed = _fwd_bwd_seconds(fn, params)
            if i >= warmup:
                times[name].append(elapsed)
    return {name: statistics.median(ts) for name, ts in times.items()}


def run(
    batch: int = 32,
    length: int = 128,
    width: int = 256,
    heads: int = 8,
    *,
    causal: bool = False,
    padding: bool = False,
    warmup: int = 3,
    repeats: int = 10,
    seed: int = 0,
) -> dict[str, float]:
    """Time every variant once; returns ``{name: median seconds}`` (the first entry is the baseline)."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(width, heads, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(batch, length, width, requires_grad=True)  # (B, L, E)
    ours_mask = causal_mask(length) if causal else None  # (L, L) True = attend
    theirs_mask = to_nn_mha_mask(ours_mask)  # (L, L) True = blocked
    lengths = torch.randint(length // 2, length + 1, (batch,)) if padding else None  # (B,)
    key_keep = padding_mask(lengths, length) if padding else None  # (B, L) True = real token
    key_padding_mask = to_nn_mha_mask(key_keep)  # (B, L) True = padding

    variants: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]] = {
        "nn.MultiheadAttention (need_weights=False)": (
            lambda: theirs(x, x, x, attn_mask=theirs_mask, key_padding_mask=key_padding_mask, need_weights=False)[0],
            [x, *theirs.parameters()],
        ),
        "nn.MultiheadAttention (need_weights=True)": (
            lambda: theirs(x, x, x, attn_mask=theirs_mask, key_padding_mask=key_padding_mask, need_weights=True)[0],
            [x, *theirs.parameters()],
        ),
        "attnlab fast path (need_weights=False)": (
            lambda: ours(x, x, x, key_keep=key_keep, is_causal=causal, need_weights=False)[0],
            [x, *ours.parameters()],
        ),
        "attnlab weights path (need_weights=True)": (
            lambda: ours(x, x, x, key_keep=key_keep, is_causal=causal, need_weights=True)[0],
            [x, *ours.parameters()],
        ),
    }
    return time_fwd_bwd(variants, warmup, repeats)


def report(results: dict[str, float]) -> str:
    """A small table: median ms and the ratio to the first entry."""
    base = next(iter(results.values()))
    lines = [f"{'variant':46s} {'median ms':>10s} {'ratio':>7s}"]
    for name, t in results.items():
        lines.append(f"{name:46s} {t * 1e3:10.2f} {t / base:7.2f}x")
    return "\n".join(lines)


def median_ms(fn: Callable, *args, min_run_time: float = 0.3, **kwargs) -> float:
    """Median milliseconds of ``fn(*args, **kwargs)`` without autograd, on one thread.

    ``torch.utils.benchmark`` repeats the call until ``min_run_time`` seconds have passed (lesson 4 times a GRU
    and self-attention with it).
    """
    timer = torch_benchmark.Timer(
        "with torch.no_grad(): fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs, "torch": torch},
        num_threads=1,
    )
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3
