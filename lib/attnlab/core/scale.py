"""Attention at scale: FlashAttention's tiling, memory accounting, key/value caches, sliding windows.

* :func:`tiled_attention` computes exact softmax attention block by block with the *online
  softmax* (Milakov & Gimelshein, 2018) as FlashAttention does (Dao et al., 2022): a running
  maximum ``m``, a running normaliser ``l`` and a running weighted sum ``acc`` per query, updated
  by :func:`online_softmax_step` for every key block. No ``(L, S)`` score matrix is ever held,
  only one ``(Bq, Bk)`` tile at a time. :func:`naive_attention` is the textbook reference, which
  materialises all scores. Both follow the course's mask convention (bool ``True`` = takes part,
  float = added; a fully masked row gives a zero output, no NaN).
* :func:`peak_memory` measures the peak of the tensor memory a function allocates on the CPU
  (every allocation and free is tracked through PyTorch's dispatcher; scratch buffers inside a fused
  kernel are not seen, so a fused kernel's figure is a lower bound); :func:`training_step` is the
  forward + backward whose peak it measures for training; :func:`median_seconds`
  times it with ``torch.utils.benchmark``; :func:`fitted_exponent` reads the slope of a log-log plot.
* :func:`kv_cache_bytes` is the key/value cache formula ``2 layers Hkv D T B bytes``;
  :func:`tensor_bytes` sums the bytes of real cache tensors to check it.
* :func:`sliding_window_mask` is the band of Beltagy et al. (2020); :class:`RingKVCache` is a
  rolling cache of constant size (as in Mistral): attention of each new query over it equals the
  banded full computation. :func:`receptive_field` shows how far information travels through a
  stack of windowed layers.
* :func:`memory_model` is the arithmetic behind the lesson's widget: sequence length, block size
  and key/value heads in, the bytes of naive and tiled attention's scores and of the cache out.

Shape legend
------------
...  leading batch dims (e.g. ``B, H``), broadcast between q, k, v and the mask
L    number of queries
S    number of keys / values
D    query/key feature size (head width)
Dv   value feature size
Bq   query block size, Bk key block size (both ``block_size``)
B    batch size, H heads, Hkv key/value heads, W window, T cached tokens
"""

from __future__ import annotations

import logging
import math
import warnings
import weakref
from collections.abc import Callable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from attnlab.core.attention import _check_qkv, _check_scale, scaled_dot_product_attention
from attnlab.core.checks import check_float_tensor, check_int, check_positive_int
from attnlab.core.masks import causal_mask, check_mask

__all__ = [
    "naive_attention",
    "online_softmax_step",
    "tiled_attention",
    "causal_tile_mask",
    "flash_backward_tile",
    "FlashAttentionFunction",
    "peak_memory",
    "training_step",
    "median_seconds",
    "fitted_exponent",
    "kv_cache_bytes",
    "tensor_bytes",
    "sliding_window_mask",
    "RingKVCache",
    "receptive_field",
    "memory_model",
    "sdpa_backends",
]


# ----------------------------------------------------------------------------------------------
# naive and tiled attention
# ----------------------------------------------------------------------------------------------


def _check_attention_args(q, k, v, attn_keep, scale) -> tuple[torch.Size, float]:
    """The checks of :func:`attnlab.core.attention.scaled_dot_product_attention`; returns ``(..., L, S)`` and
    the scale."""
    scores_shape = _check_qkv(q, k, v)  # (..., L, S)
    if attn_keep is not None:
        check_mask(attn_keep, scores_shape, name="attn_keep")
    return scores_shape, _check_scale(scale, q.shape[-1])


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_keep: torch.Tensor | None = None,
    *,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Textbook attention: the whole ``(..., L, S)`` score matrix, a softmax, a product with ``v``.

    The reference :func:`tiled_attention` is checked against; it is
    :func:`attnlab.core.attention.scaled_dot_product_attention` on its explicit-softmax path.

    Args:
        q: ``(..., L, D)``; k: ``(..., S, D)``; v: ``(..., S, Dv)``.
        attn_keep: bool (``True`` = takes part) or float (added) mask broadcastable to ``(..., L, S)``.
        causal: also block the keys after each query (queries aligned to the end of the keys).
        scale: score factor, default ``1 / sqrt(D)``.

    Returns:
        ``(..., L, Dv)``.
    """
    _check_attention_args(q, k, v, attn_keep, scale)
    out, _ = scaled_dot_product_attention(q, k, v, attn_keep, is_causal=causal, scale=scale, need_weights=True)
    return out  # (..., L, Dv)


def online_softmax_step(
    m: torch.Tensor, l: torch.Tensor, acc: torch.Tensor, scores: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Fold one block of scores into the running softmax state (Milakov & Gimelshein, 2018).

    With :math:`m' = \max(m, \max_j s_j)`, the old state is rescaled by :math:`\alpha = e^{m - m'}`:
    :math:`l' = \alpha l + \sum_j e^{s_j - m'}` and :math:`acc' = \alpha\, acc + \sum_j e^{s_j - m'} v_j`.
    After the last block, ``acc / l`` is exactly :math:`\mathrm{softmax}(s)\,V` over all blocks.
    Blocked scores are ``-inf``; while a row has seen only blocked keys its ``m`` stays ``-inf``
    and the shift used is 0, so no ``-inf - (-inf)`` NaN appears.

    Args:
        m: ``(..., L, 1)`` running maximum (start at ``-inf``).
        l: ``(..., L, 1)`` running normaliser (start at 0).
        acc: ``(..., L, Dv)`` running weighted sum of values (start at 0).
        scores: ``(..., L, Bk)`` scaled and masked scores of this key block.
        v: ``(..., Bk, Dv)`` values of this key block.

    Returns:
        ``(m', l', acc')`` of the same shapes.
    """
    # The shift cancels in acc / l, so it carries no gradient (as in FlashAttention).
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True)).detach()  # (..., L, 1)
    shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)  # (..., L, 1)
    alpha = torch.exp(m - shift)  # (..., L, 1); 0 when m = -inf
    p = torch.exp(scores - shift)  # (..., L, Bk)
    l_new = alpha * l + p.sum(dim=-1, keepdim=True)  # (..., L, 1)
    acc_new = alpha * acc + torch.matmul(p, v)  # (..., L, Dv)
    return m_new, l_new, acc_new


def _tile(mask: torch.Tensor | None, rows: slice, cols: slice) -> torch.Tensor | None:
    """The ``(rows, cols)`` tile of a mask that may broadcast (size-1) in its last two dims."""
    if mask is None:
        return None
    if mask.dim() >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]
    if mask.shape[-1] != 1:
        mask = mask[..., cols]
    return mask


def causal_tile_mask(rows: slice, cols: slice, L: int, S: int, *, device=None) -> torch.Tensor:
    """The ``(rows, cols)`` tile of :func:`attnlab.core.masks.causal_mask` ``(L, S)``, from the index ranges alone.

    Queries are aligned to the end of the keys: query ``i`` sees key ``j`` when ``j <= i + S - L``.
    Only ``Bq * Bk`` booleans are made, never the whole ``(L, S)`` mask.

    Args:
        rows: the query indices of the tile, ``slice(start, stop)``; cols: the key indices.
        L: number of queries; S: number of keys.

    Returns:
        ``(Bq, Bk)`` bool, ``True`` = takes part.
    """
    i = torch.arange(rows.start, rows.stop, device=device)[:, None]  # (Bq, 1)
    j = torch.arange(cols.start, cols.stop, device=device)[None, :]  # (1, Bk)
    return j <= i + (S - L)  # (Bq, Bk)


def _tile_scores(
    qb: torch.Tensor,
    kb: torch.Tensor,
    mask: torch.Tensor | None,
    rows: slice,
    cols: slice,
    causal: bool,
    L: int,
    S: int,
) -> torch.Tensor:
    """Scaled and masked scores of one tile: ``qb (..., Bq, D)`` (already scaled) times ``kb (..., Bk, D)``.

    The mask tile is cut from the caller's mask (a view, no copy of the whole mask) and the causal
    tile is built from the index ranges; blocked scores are ``-inf``.
    """
    s = torch.matmul(qb, kb.transpose(-2, -1))  # (..., Bq, Bk)
    tile = _tile(mask, rows, cols)  # broadcastable to (..., Bq, Bk)
    if tile is not None:
        s = torch.where(tile, s, -math.inf) if tile.dtype == torch.bool else s + tile  # (..., Bq, Bk)
    if causal and cols.stop - 1 > rows.start + S - L:  # a tile crossing the diagonal
        s = torch.where(causal_tile_mask(rows, cols, L, S, device=s.device), s, -math.inf)  # (..., Bq, Bk)
    return s


def _flash_forward(q, k, v, mask, causal: bool, block_size: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward loop: ``(out (..., L, Dv), lse (..., L, 1))``, the output and each row's log-sum-exp.

    For each block of ``Bq`` queries the key blocks are visited in turn (FlashAttention-2's order,
    Dao 2023; FlashAttention-1's Algorithm 1 puts the key/value blocks in the outer loop). A row with
    no allowed key gets ``lse = +inf``, so that the backward's ``exp(s - lse)`` is 0 there, not NaN.
    """
    *batch, L, S = _check_qkv(q, k, v)
    Dv = v.shape[-1]
    out = q.new_empty((*batch, L, Dv))  # (..., L, Dv)
    lse = q.new_empty((*batch, L, 1))  # (..., L, 1)
    for q0 in range(0, L, block_size):
        rows = slice(q0, min(q0 + block_size, L))
        qb = q[..., rows, :] * scale  # (..., Bq, D)
        n = rows.stop - rows.start
        m = q.new_full((*batch, n, 1), -math.inf)  # (..., Bq, 1)
        l = q.new_zeros((*batch, n, 1))  # (..., Bq, 1)
        acc = q.new_zeros((*batch, n, Dv))  # (..., Bq, Dv)
        # Causal: query i (aligned to the end) sees keys j <= i + S - L; later blocks are skipped.
        last_key = rows.stop - 1 + S - L if causal else S - 1
        for k0 in range(0, min(S, last_key + 1), block_size):
            cols = slice(k0, min(k0 + block_size, S))
            s = _tile_scores(qb, k[..., cols, :], mask, rows, cols, causal, L, S)  # (..., Bq, Bk)
            m, l, acc = online_softmax_step(m, l, acc, s, v[..., cols, :])
        # A row that saw no allowed key has l = 0 and acc = 0: its output is 0, not 0 / 0.
        out[..., rows, :] = acc / torch.where(l == 0, torch.ones_like(l), l)  # (..., Bq, Dv)
        lse[..., rows, :] = torch.where(l == 0, math.inf, m + torch.log(l))  # (..., Bq, 1)
    return out, lse


def flash_backward_tile(
    qb: torch.Tensor,
    kb: torch.Tensor,
    vb: torch.Tensor,
    s: torch.Tensor,
    lse: torch.Tensor,
    dout: torch.Tensor,
    delta: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""One tile of FlashAttention's backward pass (Dao et al., 2022, Algorithm 4): recompute ``P``, then its gradients.

    :math:`P = \exp(S - \mathrm{lse})` is the tile of the softmax, recomputed from the scores and the saved
    log-sum-exp of each row (no running maximum needed). Then :math:`dV = P^\top dO`, :math:`dP = dO\,V^\top`,
    :math:`dS = P \circ (dP - D)` with :math:`D = \mathrm{rowsum}(dO \circ O)` (the softmax's Jacobian,
    without the ``(Bq, S)`` row of ``P``), :math:`dQ = \text{scale}\; dS\,K` and :math:`dK = \text{scale}\; dS^\top Q`.

    Args:
        qb: ``(..., Bq, D)`` queries (unscaled); kb: ``(..., Bk, D)``; vb: ``(..., Bk, Dv)``.
        s: ``(..., Bq, Bk)`` the tile's scaled, masked scores.
        lse: ``(..., Bq, 1)`` each row's log-sum-exp over *all* its keys (``+inf`` for a row with none).
        dout: ``(..., Bq, Dv)`` the gradient of the output rows; delta: ``(..., Bq, 1)`` their ``D``.
        scale: the score factor.

    Returns:
        This tile's contributions ``(dQ (..., Bq, D), dK (..., Bk, D), dV (..., Bk, Dv))``.
    """
    p = torch.exp(s - lse)  # (..., Bq, Bk)
    dv = torch.matmul(p.transpose(-2, -1), dout)  # (..., Bk, Dv)
    dp = torch.matmul(dout, vb.transpose(-2, -1))  # (..., Bq, Bk)
    ds = p * (dp - delta)  # (..., Bq, Bk)
    dq = torch.matmul(ds, kb) * scale  # (..., Bq, D)
    dk = torch.matmul(ds.transpose(-2, -1), qb) * scale  # (..., Bk, D)
    return dq, dk, dv


def _flash_backward(q, k, v, mask, causal, block_size, scale, out, lse, dout):
    """Gradients of ``q, k, v`` from the saved ``out`` and ``lse``, every ``P`` tile recomputed.

    Key/value blocks in the outer loop, query blocks inside, as Algorithm 4 of Dao et al. (2022):
    ``dK`` and ``dV`` of a key block are finished when its inner loop ends, ``dQ`` is accumulated.
    """
    *batch, L, S = _check_qkv(q, k, v)
    dq = q.new_zeros((*batch, L, q.shape[-1]))  # (..., L, D)
    dk = k.new_zeros((*batch, S, k.shape[-1]))  # (..., S, D)
    dv = v.new_zeros((*batch, S, v.shape[-1]))  # (..., S, Dv)
    delta = (dout * out).sum(dim=-1, keepdim=True)  # (..., L, 1)
    for k0 in range(0, S, block_size):
        cols = slice(k0, min(k0 + block_size, S))
        kb, vb = k[..., cols, :], v[..., cols, :]  # (..., Bk, D), (..., Bk, Dv)
        # Causal: the queries before k0 - (S - L) see none of these keys; start at their block.
        first = max(0, k0 - (S - L)) // block_size * block_size if causal else 0
        for q0 in range(first, L, block_size):
            rows = slice(q0, min(q0 + block_size, L))
            qb = q[..., rows, :]  # (..., Bq, D)
            s = _tile_scores(qb * scale, kb, mask, rows, cols, causal, L, S)  # (..., Bq, Bk)
            g_q, g_k, g_v = flash_backward_tile(
                qb, kb, vb, s, lse[..., rows, :], dout[..., rows, :], delta[..., rows, :], scale
            )
            dq[..., rows, :] += g_q
            dk[..., cols, :] += g_k
            dv[..., cols, :] += g_v
    return dq.sum_to_size(q.shape), dk.sum_to_size(k.shape), dv.sum_to_size(v.shape)


class FlashAttentionFunction(torch.autograd.Function):
    """Exact attention with FlashAttention's memory in training too (Dao et al., 2022).

    The forward saves only the inputs, the output ``O`` and each row's log-sum-exp (``O(L)``
    numbers); the backward recomputes every ``(Bq, Bk)`` tile of ``P`` from them (:func:`flash_backward_tile`).
    Rabe & Staats (2021, "Self-attention does not need O(n^2) memory") reached the same memory with
    checkpointed chunks; PyTorch's "memory-efficient" SDPA backend descends from their work. The mask
    gets no gradient (a float mask that requires one is refused by :func:`tiled_attention`); twice
    differentiating is not supported.
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, block_size, scale):
        out, lse = _flash_forward(q, k, v, mask, causal, block_size, scale)
        ctx.save_for_backward(q, k, v, mask, out, lse)
        ctx.causal, ctx.block_size, ctx.scale = causal, block_size, scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, mask, out, lse = ctx.saved_tensors
        dq, dk, dv = _flash_backward(q, k, v, mask, ctx.causal, ctx.block_size, ctx.scale, out, lse, dout)
        return dq, dk, dv, None, None, None, None


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_keep: torch.Tensor | None = None,
    *,
    causal: bool = False,
    block_size: int = 128,
    scale: float | None = None,
) -> torch.Tensor:
    """Exact attention, FlashAttention's way: query blocks times key blocks, online softmax; a recomputing backward.

    For each block of ``Bq`` queries the key blocks are visited in order and folded into a
    running state by :func:`online_softmax_step`; only one ``(Bq, Bk)`` tile of scores exists
    at a time, so the extra memory is ``O(Bq * Bk + L * Dv)`` instead of ``O(L * S)``. With
    ``causal`` the key blocks entirely after a query block are skipped and the diagonal tiles get
    their mask from the index ranges (:func:`causal_tile_mask`); a mask argument is cut into tiles,
    never copied whole. The backward (:class:`FlashAttentionFunction`) recomputes each tile of ``P``
    from the saved output and log-sum-exp, so training memory is ``O(L + S)`` as well.

    Args:
        q: ``(..., L, D)``; k: ``(..., S, D)``; v: ``(..., S, Dv)``.
        attn_keep: bool (``True`` = takes part) or float (added, no gradient) mask broadcastable to ``(..., L, S)``.
        causal: block keys after each query (queries aligned to the end of the keys, as
            :func:`attnlab.core.masks.causal_mask`).
        block_size: ``Bq = Bk``, a positive int; ``L`` and ``S`` need not be multiples of it.
        scale: score factor, default ``1 / sqrt(D)``.

    Returns:
        ``(..., L, Dv)``, equal to :func:`naive_attention` up to rounding; zero for fully masked rows.

    Raises:
        ValueError: ``block_size <= 0``, shapes that do not fit (named), a mask of the wrong shape,
            a float mask that requires a gradient.
        TypeError: non-float inputs, a non-int block size.
    """
    _, scale = _check_attention_args(q, k, v, attn_keep, scale)
    block_size = check_positive_int("block_size", block_size)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__} {causal!r}")
    if attn_keep is not None and attn_keep.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            "attn_keep is a float mask that requires a gradient; tiled_attention gives the mask none "
            "(its gradient would be a whole (L, S) matrix): detach it, or use naive_attention"
        )
    return FlashAttentionFunction.apply(q, k, v, attn_keep, causal, block_size, scale)  # (..., L, Dv)


# ----------------------------------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------------------------------


class _AllocationTracker(TorchDispatchMode):
    """Counts the bytes of every tensor storage created under it, and when each one is freed."""

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._live: dict[int, list] = {}  # storage address -> [bytes, number of live tensors on it]

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._live[key]

    def _track(self, t: torch.Tensor, inputs: set[int]) -> None:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key == 0 or (key in inputs and key not in self._live):
            return  # owns no memory, or a view / in-place result of memory that existed before
        if key in self._live:
            self._live[key][1] += 1  # a view of a storage already counted
        else:
            self._live[key] = [storage.nbytes(), 1]
            self.current += storage.nbytes()
            self.peak = max(self.peak, self.current)
        weakref.finalize(t, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor) and t.device.type == "cpu"
        }
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                self._track(t, inputs)
        return out


def peak_memory(fn: Callable, *args, **kwargs) -> int:
    """Peak bytes of CPU tensor memory that ``fn(*args, **kwargs)`` holds at once, its result included.

    Every tensor an operator creates while ``fn`` runs is counted until the last tensor using its
    storage is garbage; memory that existed before (the inputs) is not counted. Run under
    ``torch.no_grad()`` to measure a forward pass (autograd would keep intermediates alive).

    Returns:
        The peak in bytes (an ``int``).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    tracker = _AllocationTracker()
    with tracker:
        result = fn(*args, **kwargs)
    del result
    return tracker.peak


def training_step(
    fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, **kwargs
) -> None:
    """The attention part of one training step: ``fn(q, k, v, **kwargs).backward(dout)``, fresh gradients.

    ``q``, ``k``, ``v`` are leaves that require a gradient; their ``.grad`` is reset first, so that
    ``peak_memory(training_step, ...)`` counts the forward's saved tensors, the backward's and the
    gradients of one step.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.requires_grad:
            raise ValueError(f"{name} must require a gradient (a leaf with requires_grad=True) to be trained")
        t.grad = None
    fn(q, k, v, **kwargs).backward(dout)


def median_seconds(fn: Callable, *args, min_run_time: float = 0.2, **kwargs) -> float:
    """Median wall time of ``fn(*args, **kwargs)`` in seconds, by ``torch.utils.benchmark.Timer``.

    ``Timer.blocked_autorange`` repeats the call until ``min_run_time`` seconds have passed and
    reports the median over blocks; it keeps the current number of threads.
    """
    # Importing the benchmark module imports torch's C++-extension helper, which logs a warning
    # on a machine without CUDA; it has nothing to do with timing on the CPU.
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        from torch.utils import benchmark
    finally:
        quiet.setLevel(level)

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    timer = benchmark.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        num_threads=torch.get_num_threads(),
    )
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def fitted_exponent(x: Sequence[float], y: Sequence[float]) -> float:
    """The slope ``p`` of the least-squares line through ``(log x, log y)``: ``y ~ c * x**p``.

    Raises:
        ValueError: fewer than two points, lengths that differ, or a value that is not positive.
    """
    x, y = [float(a) for a in x], [float(b) for b in y]
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"need two or more (x, y) points of equal count, got {len(x)} x and {len(y)} y")
    if min(x) <= 0 or min(y) <= 0:
        raise ValueError("a log-log fit needs positive x and y")
    lx, ly = torch.tensor(x, dtype=torch.float64).log(), torch.tensor(y, dtype=torch.float64).log()  # (n,)
    lx, ly = lx - lx.mean(), ly - ly.mean()  # (n,)
    if float((lx * lx).sum()) == 0:
        raise ValueError("a log-log fit needs at least two different x")
    return float((lx * ly).sum() / (lx * lx).sum())


# ----------------------------------------------------------------------------------------------
# key/value caches
# ----------------------------------------------------------------------------------------------


def kv_cache_bytes(
    *, layers: int, kv_heads: int, head_dim: int, tokens: int, batch: int = 1, bytes_per: int = 4
) -> int:
    """Bytes of a key/value cache: ``2 * layers * kv_heads * head_dim * tokens * batch * bytes_per``.

    The 2 counts keys and values; each layer caches ``kv_heads`` heads of ``head_dim`` numbers per
    token. ``bytes_per`` is 4 for float32, 2 for float16/bfloat16.
    """
    for name, value in (
        ("layers", layers),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("batch", batch),
        ("bytes_per", bytes_per),
    ):
        check_positive_int(name, value)
    tokens = check_int("tokens", tokens, minimum=0)
    return 2 * layers * kv_heads * head_dim * tokens * batch * bytes_per


def tensor_bytes(tensors) -> int:
    """Total bytes of the tensors in ``tensors`` (a dict's values or any iterable of tensors)."""
    items = tensors.values() if isinstance(tensors, dict) else tensors
    total = 0
    for t in items:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor_bytes counts tensors, got a {type(t).__name__}")
        total += t.numel() * t.element_size()
    return total


# ----------------------------------------------------------------------------------------------
# sliding windows
# ----------------------------------------------------------------------------------------------


def sliding_window_mask(L: int, S: int | None = None, *, window: int, device=None) -> torch.Tensor:
    """Causal band: query ``i`` sees the ``window`` most recent keys ``i - window + 1 .. i``.

    Queries are aligned to the end of the keys, as in :func:`attnlab.core.masks.causal_mask`.

    Args:
        L: number of queries; S: number of keys (default ``L``).
        window: ``W >= 1``.

    Returns:
        ``(L, S)`` bool, ``True`` = takes part.
    """
    window = check_positive_int("window", window)
    keep = causal_mask(L, S, device=device)  # (L, S)
    S = keep.shape[1]
    return keep & ~torch.ones_like(keep).tril(diagonal=S - L - window)  # (L, S)


class RingKVCache:
    """A key/value cache of constant size ``W`` for sliding-window attention (a rolling buffer).

    Token ``t`` is written to slot ``t mod W``, over the token ``t - W``, which no later query of a
    window-``W`` model may see anyway. The slots are not in time order, which does not matter:
    attention is a weighted sum over keys and does not depend on their order (positions must be
    in the keys already, e.g. rotated by RoPE before they are written).

    Args:
        window: ``W >= 1``.

    Attributes:
        k, v: ``(B, H, W, D)`` buffers (``None`` before the first :meth:`append`).
        seen: number of tokens appended so far.
    """

    def __init__(self, window: int) -> None:
        self.window = check_positive_int("window", window)
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.seen = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write the keys and values of new tokens, ``k (B, H, n, D)``, ``v (B, H, n, Dv)``."""
        check_float_tensor("k", k, dims=4, shape_text="(B, H, n, D)")
        check_float_tensor("v", v, dims=4, shape_text="(B, H, n, Dv)")
        if k.shape[:3] != v.shape[:3]:
            raise ValueError(f"k and v must agree in (B, H, n), got {tuple(k.shape)} and {tuple(v.shape)}")
        if self.k is None:
            B, H, _, D = k.shape
            self.k = k.new_zeros(B, H, self.window, D)  # (B, H, W, D)
            self.v = v.new_zeros(B, H, self.window, v.shape[-1])  # (B, H, W, Dv)
        elif (k.shape[:2], k.shape[3], v.shape[3]) != (self.k.shape[:2], self.k.shape[3], self.v.shape[3]):
            raise ValueError(
                f"this cache holds (B, H, W, D) = {tuple(self.k.shape)} keys and {tuple(self.v.shape)} values; "
                f"got k {tuple(k.shape)}, v {tuple(v.shape)}"
            )
        for i in range(k.shape[2]):
            slot = (self.seen + i) % self.window
            self.k[:, :, slot] = k[:, :, i]
            self.v[:, :, slot] = v[:, :, i]
        self.seen += k.shape[2]

    def keys_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The filled slots: ``(B, H, min(seen, W), D)`` keys and ``(..., Dv)`` values."""
        if self.k is None:
            raise ValueError("the cache is empty: append() a token first")
        n = min(self.seen, self.window)
        return self.k[:, :, :n], self.v[:, :, :n]  # (B, H, n, D), (B, H, n, Dv)

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffers (constant once the first token is in)."""
        return 0 if self.k is None else tensor_bytes([self.k, self.v])


def receptive_field(num_layers: int, window: int, length: int) -> torch.Tensor:
    """Which input positions can reach each output position through a stack of windowed layers.

    One causal window-``W`` layer lets position ``i`` read ``i - W + 1 .. i``; stacking ``n`` of them
    composes the band with itself ``n`` times, so the reach grows by ``W - 1`` positions per layer.

    Args:
        num_layers: ``n >= 1``; window: ``W >= 1``; length: number of positions.

    Returns:
        ``(length, length)`` bool: ``[i, j]`` is True when input ``j`` influences output ``i``.
    """
    num_layers = check_positive_int("num_layers", num_layers)
    band = sliding_window_mask(check_positive_int("length", length), window=window).double()  # (N, N)
    reach = band.clone()  # (N, N)
    for _ in range(num_layers - 1):
        reach = (band @ reach).clamp(max=1.0)  # (N, N)
    return reach > 0  # (N, N)


# ----------------------------------------------------------------------------------------------
# the widget's arithmetic
# ----------------------------------------------------------------------------------------------


def memory_model(
    seq_len: int,
    block_size: int,
    num_kv_heads: int,
    *,
    num_heads: int = 32,
    head_dim: int = 128,
    layers: int = 32,
    batch: int = 1,
    bytes_per: int = 2,
) -> dict:
    """Bytes of the attention scores (naive vs tiled) and of the key/value cache, with the formulas.

    * naive: one layer's score matrix for all heads, ``B * H * N * N * bytes``;
    * tiled: one tile per head plus its running state, and the output with its log-sum-exp, which grow
      like ``N``: ``B * H * (Bq * Bk + Bq * (D + 2) + N * (D + 1)) * bytes`` (``Bq = Bk = min(block_size, N)``);
    * cache: :func:`kv_cache_bytes` for ``N`` tokens.

    The defaults describe a 7B-class decoder in float16 (32 layers, 32 heads of 128).

    Returns:
        ``{"naive": int, "tiled": int, "cache": int, "ratio": naive / tiled, "formulas": {...}}``
        where each formula is a line of text with the numbers filled in.

    Raises:
        ValueError: a size below 1, or ``num_heads`` not divisible by ``num_kv_heads``.
    """
    N = check_positive_int("seq_len", seq_len)
    Bq = min(check_positive_int("block_size", block_size), N)
    Hkv = check_positive_int("num_kv_heads", num_kv_heads)
    H = check_positive_int("num_heads", num_heads)
    if H % Hkv:
        raise ValueError(f"num_heads={H} is not divisible by num_kv_heads={Hkv}")
    D, B, nb = check_positive_int("head_dim", head_dim), check_positive_int("batch", batch), bytes_per
    naive = B * H * N * N * nb
    tiled = B * H * (Bq * Bq + Bq * (D + 2) + N * (D + 1)) * nb
    cache = kv_cache_bytes(layers=layers, kv_heads=Hkv, head_dim=D, tokens=N, batch=B, bytes_per=nb)
    return {
        "naive": naive,
        "tiled": tiled,
        "cache": cache,
        "ratio": naive / tiled,
        "formulas": {
            "naive": f"B·H·N²·bytes = {B}·{H}·{N}²·{nb} = {naive:,} B",
            "tiled": f"B·H·(Bq·Bk + Bq·(D+2) + N·(D+1))·bytes = {B}·{H}·({Bq}·{Bq} + {Bq}·{D + 2} + {N}·{D + 1})·{nb}"
            f" = {tiled:,} B",
            "cache": f"2·layers·Hkv·D·T·B·bytes = 2·{layers}·{Hkv}·{D}·{N}·{B}·{nb} = {cache:,} B",
        },
    }


# ----------------------------------------------------------------------------------------------
# PyTorch's fused backends
# ----------------------------------------------------------------------------------------------


def sdpa_backends(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> dict[str, torch.Tensor | str]:
    """Run ``F.scaled_dot_product_attention`` under each backend of ``torch.nn.attention.sdpa_kernel``.

    Args:
        q, k, v: as for ``F.scaled_dot_product_attention``; kwargs are passed on (``is_causal``, ...).

    Returns:
        ``{backend name: output tensor}`` for each backend that ran, or ``{name: "not available: ..."}``
        with PyTorch's reason (first line) for those that refused these inputs on this device.
    """
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    found: dict[str, torch.Tensor | str] = {}
    for backend in (
        SDPBackend.MATH,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.CUDNN_ATTENTION,
    ):
        # PyTorch explains a refusal in warnings before it raises; keep the first as the reason.
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(backend):
                    found[backend.name] = F.scaled_dot_product_attention(q, k, v, **kwargs)  # (..., L, Dv)
            except RuntimeError as err:
                reasons = [str(w.message) for w in said if "kernel not used because" not in str(w.message)]
                reason = (reasons[0] if reasons else str(err)).strip().splitlines()[0]
                reason = reason.split(" (Triggered internally")[0].split(". ")[0]  # its first sentence
                found[backend.name] = "not available: " + reason[:120]
    return found
