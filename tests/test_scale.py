"""Tests of attnlab.core.scale: tiled (online-softmax) attention equals PyTorch, memory, caches, windows.

The largest absolute error of each comparison is printed at the end (``pytest -s``).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.core import scale
from attnlab.core.masks import causal_mask
from attnlab.models.transformer import Transformer, TransformerConfig

from .error_log import ErrorLog

# The targets: float32 rounding (1e-5) and 1e-12 in float64.
TOL = {torch.float32: {"atol": 1e-5, "rtol": 0.0}, torch.float64: {"atol": 1e-12, "rtol": 0.0}}
ERRORS = ErrorLog(TOL)
close = ERRORS.close


@pytest.fixture(scope="module", autouse=True)
def _print_max_errors():
    yield
    ERRORS.report("max abs error")


def qkv(dtype, B=2, H=3, L=37, S=45, D=8, Dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, H, L, D, generator=g, dtype=dtype),
        torch.randn(B, H, S, D, generator=g, dtype=dtype),
        torch.randn(B, H, S, Dv, generator=g, dtype=dtype),
    )


# ----------------------------------------------------------------------------------------------
# tiled attention
# ----------------------------------------------------------------------------------------------


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", ["none", "bool", "padding"])
@pytest.mark.parametrize("block_size", [1, 8, 16, 64])
def test_tiled_equals_sdpa(dtype, causal, mask, block_size):
    """L = 37, S = 45: neither is a multiple of the block sizes 8 and 16 (64 > both: one block)."""
    q, k, v = qkv(dtype)
    g = torch.Generator().manual_seed(1)
    keep = None
    if mask == "bool":
        keep = torch.rand(2, 1, 37, 45, generator=g) > 0.3  # (B, 1, L, S)
    elif mask == "padding":
        keep = (torch.arange(45) < torch.tensor([45, 30])[:, None])[:, None, None, :]  # (B, 1, 1, S)
    ref_mask = keep
    if causal:
        ref_mask = causal_mask(37, 45) if keep is None else causal_mask(37, 45) & keep
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)
    got = scale.tiled_attention(q, k, v, keep, causal=causal, block_size=block_size)
    close(f"tiled vs SDPA, {dtype}", got, ref)
    close(f"naive vs SDPA, {dtype}", scale.naive_attention(q, k, v, keep, causal=causal), ref)


@pytest.mark.numeric
def test_tiled_float_mask_and_scale():
    q, k, v = qkv(torch.float64)
    bias = torch.randn(3, 37, 45, dtype=torch.float64)  # (H, L, S)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3)
    close("tiled vs SDPA, float mask", scale.tiled_attention(q, k, v, bias, block_size=7, scale=0.3), ref)


@pytest.mark.numeric
def test_tiled_fully_masked_rows_are_zero_without_nan():
    q, k, v = qkv(torch.float64, L=10, S=12)
    keep = torch.ones(10, 12, dtype=torch.bool)
    keep[3] = False
    q.requires_grad_(True)
    out = scale.tiled_attention(q, k, v, keep, block_size=4)
    assert torch.equal(out[:, :, 3], torch.zeros_like(out[:, :, 3]))
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    ref = scale.naive_attention(q, k, v, keep)
    close("tiled vs naive, fully masked rows", out, ref)


@pytest.mark.numeric
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_gradients_equal_sdpa(causal):
    q, k, v = (t.requires_grad_(True) for t in qkv(torch.float64, L=19, S=19))
    keep = torch.rand(19, 19, generator=torch.Generator().manual_seed(2)) > 0.2
    keep.fill_diagonal_(True)
    mask = keep & causal_mask(19) if causal else keep
    grads = []
    for fn in (
        lambda: scale.tiled_attention(q, k, v, keep, causal=causal, block_size=5),
        lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    ):
        out = fn()
        grads.append(torch.autograd.grad((out * torch.arange(6.0, dtype=out.dtype)).sum(), (q, k, v)))
    for name, a, b in zip("qkv", *grads, strict=True):
        close(f"tiled grad d{name} vs SDPA, float64", a, b)


@pytest.mark.numeric
def test_tiled_gradcheck():
    q, k, v = (t.requires_grad_(True) for t in qkv(torch.float64, B=1, H=1, L=5, S=7, D=3, Dv=2))
    assert torch.autograd.gradcheck(lambda a, b, c: scale.tiled_attention(a, b, c, causal=True, block_size=3), (q, k, v))


def _grads(fn, q, k, v, dout):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    return torch.autograd.grad(fn(q, k, v), (q, k, v), dout)


@pytest.mark.numeric
@settings(max_examples=25, deadline=None)
@given(
    block_size=st.integers(1, 24),
    L=st.integers(1, 23),
    S=st.integers(1, 23),
    causal=st.booleans(),
    mask=st.sampled_from(["none", "bool", "float", "padding"]),
    seed=st.integers(0, 2**16),
)
def test_flash_backward_equals_sdpa_gradients_float64(block_size, L, S, causal, mask, seed):
    """The recomputing backward (FlashAttentionFunction) against autograd through SDPA, to 1e-10 in float64."""
    q, k, v = qkv(torch.float64, B=2, H=2, L=L, S=S, D=5, Dv=3, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    keep = torch.rand(2, 1, L, S, generator=g) > 0.3  # (B, 1, L, S)
    keep[..., :, :1] = True  # every row keeps a key: SDPA gives NaN on fully masked rows, we give 0
    attn = {
        "none": None,
        "bool": keep,
        "float": torch.randn(L, S, generator=g, dtype=torch.float64),
        "padding": keep[:, :, :1, :],  # (B, 1, 1, S)
    }[mask]
    if causal:
        keep_c = causal_mask(L, S)
        keep_c[:, :1] = True  # the first key for every query (SDPA would NaN on a dead row)
        attn = keep_c if attn is None else (keep_c & attn if attn.dtype == torch.bool else attn.masked_fill(~keep_c, -math.inf))
    dout = torch.randn(2, 2, L, 3, generator=g, dtype=torch.float64)
    ours = _grads(lambda a, b, c: scale.tiled_attention(a, b, c, attn, block_size=block_size), q, k, v, dout)
    ref = _grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=attn), q, k, v, dout)
    for name, a, b in zip("qkv", ours, ref, strict=True):
        err = float((a - b).abs().max())
        assert err <= 1e-10, f"d{name}: max |flash backward - SDPA| = {err:.1e} > 1e-10 (block {block_size})"


@pytest.mark.numeric
@pytest.mark.parametrize("block_size", [1, 4, 64])
def test_flash_backward_causal_equals_sdpa(block_size):
    """The causal path (skipped tiles in the backward's loops too), L != S."""
    q, k, v = qkv(torch.float64, L=13, S=21)
    dout = torch.randn(2, 3, 13, 6, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ours = _grads(lambda a, b, c: scale.tiled_attention(a, b, c, causal=True, block_size=block_size), q, k, v, dout)
    ref = _grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=causal_mask(13, 21)), q, k, v, dout)
    for name, a, b in zip("qkv", ours, ref, strict=True):
        close(f"flash backward causal d{name}, float64", a, b)


@pytest.mark.numeric
def test_flash_backward_broadcast_batch_dims_sum_the_gradient():
    """k and v shared by all heads (H = 1 broadcast): their gradient sums over the heads, as autograd's does."""
    q, k, v = qkv(torch.float64, L=9, S=11)
    k, v = k[:, :1], v[:, :1]  # (B, 1, S, D)
    dout = torch.randn(2, 3, 9, 6, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    ours = _grads(lambda a, b, c: scale.tiled_attention(a, b, c, block_size=4), q, k, v, dout)
    ref = _grads(lambda a, b, c: scale.naive_attention(a, b, c), q, k, v, dout)
    for name, a, b in zip("qkv", ours, ref, strict=True):
        assert a.shape == b.shape
        close(f"flash backward broadcast d{name}, float64", a, b)


@pytest.mark.numeric
def test_flash_backward_tile_is_the_softmax_gradient_of_one_tile():
    """With one tile covering everything, flash_backward_tile gives autograd's gradients."""
    q, k, v = qkv(torch.float64, B=1, H=1, L=6, S=7)
    dout = torch.randn(1, 1, 6, 6, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    sc = 0.4
    s = q @ k.transpose(-2, -1) * sc  # (1, 1, L, S)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)  # (1, 1, L, 1)
    out = torch.softmax(s, -1) @ v  # (1, 1, L, Dv)
    delta = (dout * out).sum(-1, keepdim=True)  # (1, 1, L, 1)
    got = scale.flash_backward_tile(q, k, v, s, lse, dout, delta, sc)
    ref = _grads(lambda a, b, c: scale.naive_attention(a, b, c, scale=sc), q, k, v, dout)
    for name, a, b in zip("qkv", got, ref, strict=True):
        close(f"flash_backward_tile d{name}, float64", a, b)


def test_tiled_refuses_a_float_mask_that_requires_grad():
    q, k, v = qkv(torch.float32, L=4, S=4)
    bias = torch.zeros(4, 4, requires_grad=True)
    with pytest.raises(ValueError, match="attn_keep is a float mask that requires a gradient"):
        scale.tiled_attention(q, k, v, bias)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 30), S=st.integers(1, 30), r0=st.integers(0, 29), c0=st.integers(0, 29), n=st.integers(1, 9))
def test_causal_tile_mask_is_the_tile_of_the_causal_mask(L, S, r0, c0, n):
    rows, cols = slice(min(r0, L - 1), min(r0 + n, L)), slice(min(c0, S - 1), min(c0 + n, S))
    assert torch.equal(scale.causal_tile_mask(rows, cols, L, S), causal_mask(L, S)[rows, cols])


@pytest.mark.numeric
@pytest.mark.parametrize("mask", ["causal", "full bool", "float"])
def test_tiled_causal_and_masked_paths_keep_the_memory_linear(mask):
    """No full (L, S) causal mask and no additive copy of the caller's mask: far below naive, and ~N^1."""
    peaks = {}
    for n in (512, 1024):
        x = torch.randn(1, 1, n, 16)
        keep = torch.rand(n, n, generator=torch.Generator().manual_seed(0)) > 0.1
        kw = {"causal": {"causal": True}, "full bool": {"attn_keep": keep}, "float": {"attn_keep": keep.float()}}[mask]
        with torch.no_grad():
            naive = scale.peak_memory(scale.naive_attention, x, x, x, **kw)
            peaks[n] = scale.peak_memory(scale.tiled_attention, x, x, x, block_size=64, **kw)
        assert naive >= n * n * 4
    assert peaks[1024] < 1024 * 1024 * 4 / 20
    assert peaks[1024] / peaks[512] < 2.5  # naive's grows 4x


def test_flash_training_memory_is_far_below_naive():
    """Forward + backward: autograd through naive keeps P (N^2); FlashAttentionFunction keeps O and the lse."""
    n = 1024
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 16, generator=g).requires_grad_() for _ in range(3))
    dout = torch.randn(1, 1, n, 16, generator=g)

    def train(fn, **kw):
        fn(q, k, v, **kw).backward(dout)

    naive = scale.peak_memory(train, scale.naive_attention, causal=True)
    tiled = scale.peak_memory(train, scale.tiled_attention, causal=True, block_size=64)
    assert naive >= n * n * 4
    assert tiled * 10 < naive  # the target at N = 4096 already holds at 1024
    assert tiled < 8 * n * 16 * 4  # O(N d): q, k, v gradients, output, lse and a tile, no N x N
    assert q.grad is not None and bool(q.grad.isfinite().all())


@pytest.mark.numeric
def test_online_softmax_step_two_blocks_is_the_softmax():
    g = torch.Generator().manual_seed(3)
    s, v = torch.randn(4, 10, generator=g, dtype=torch.float64), torch.randn(10, 3, generator=g, dtype=torch.float64)
    m = torch.full((4, 1), -math.inf, dtype=torch.float64)
    l, acc = torch.zeros(4, 1, dtype=torch.float64), torch.zeros(4, 3, dtype=torch.float64)
    for cols in (slice(0, 6), slice(6, 10)):
        m, l, acc = scale.online_softmax_step(m, l, acc, s[:, cols], v[cols])
    close("online softmax, two blocks", acc / l, torch.softmax(s, -1) @ v)
    close("online softmax max", m, s.amax(-1, keepdim=True))


def test_tiled_errors():
    q, k, v = qkv(torch.float32, L=4, S=4)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        scale.tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="block_size must be >= 1, got -3"):
        scale.tiled_attention(q, k, v, block_size=-3)
    with pytest.raises(TypeError, match="block_size must be an int"):
        scale.tiled_attention(q, k, v, block_size=2.5)
    with pytest.raises(ValueError, match="q and k must have the same feature size E"):
        scale.tiled_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="scale must be finite, got inf"):
        scale.tiled_attention(q, k, v, scale=float("inf"))
    with pytest.raises(ValueError, match="attn_keep has shape"):
        scale.tiled_attention(q, k, v, torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="floating-point"):
        scale.tiled_attention(q.long(), k, v)
    with pytest.raises(TypeError, match="causal must be a bool"):
        scale.tiled_attention(q, k, v, causal=1)


# ----------------------------------------------------------------------------------------------
# memory and timing helpers
# ----------------------------------------------------------------------------------------------


def test_peak_memory_counts_allocations_and_frees():
    assert scale.peak_memory(lambda: torch.empty(1000)) == 4000

    def two_then_one():
        a = torch.zeros(1000)  # 4000 B
        b = torch.zeros(500)  # 2000 B: 6000 B at once
        del a, b
        return torch.zeros(250)  # 1000 B

    assert scale.peak_memory(two_then_one) == 6000
    x = torch.randn(100)
    assert scale.peak_memory(lambda: x.view(10, 10)) == 0  # a view allocates nothing


def test_tiled_peak_memory_is_far_below_naive():
    n = 1024
    x = torch.randn(1, 1, n, 16)
    with torch.no_grad():
        naive = scale.peak_memory(scale.naive_attention, x, x, x)
        tiled = scale.peak_memory(scale.tiled_attention, x, x, x, block_size=64)
    assert naive >= n * n * 4  # at least the score matrix
    assert tiled < n * n * 4 / 20


def test_fitted_exponent():
    assert scale.fitted_exponent([1, 2, 4, 8], [3, 12, 48, 192]) == pytest.approx(2.0)
    assert scale.fitted_exponent([10, 100], [5, 50]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        scale.fitted_exponent([1, 2], [0, 1])
    with pytest.raises(ValueError, match="two or more"):
        scale.fitted_exponent([1], [1])


def test_median_seconds_runs_the_function():
    calls = []
    t = scale.median_seconds(lambda: calls.append(1), min_run_time=0.01)
    assert t > 0 and len(calls) > 1


# ----------------------------------------------------------------------------------------------
# key/value caches
# ----------------------------------------------------------------------------------------------


def test_kv_cache_bytes_published_model():
    """A 70B-class model: 80 layers, 8 KV heads of 128, 4096 tokens, fp16."""
    assert scale.kv_cache_bytes(layers=80, kv_heads=8, head_dim=128, tokens=4096, bytes_per=2) == 1_342_177_280
    assert scale.kv_cache_bytes(layers=80, kv_heads=64, head_dim=128, tokens=4096, bytes_per=2) == 10_737_418_240
    with pytest.raises(ValueError, match="kv_heads must be >= 1, got 0"):
        scale.kv_cache_bytes(layers=1, kv_heads=0, head_dim=1, tokens=1)


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_kv_cache_bytes_equal_the_real_cache(num_kv_heads):
    cfg = TransformerConfig(20, 20, d_model=16, num_heads=4, num_decoder_layers=3, num_kv_heads=num_kv_heads)
    model = Transformer(cfg).eval()
    src = torch.randint(4, 20, (5, 9))
    with torch.no_grad():
        memory = model.encode(src)
        state = model.init_state(memory)
        for t in range(7):
            _, state, _ = model.step(memory, state, torch.full((5,), 1), t)
    h_kv = num_kv_heads or 4
    expected = scale.kv_cache_bytes(layers=3, kv_heads=h_kv, head_dim=4, tokens=7, batch=5, bytes_per=4)
    assert scale.tensor_bytes(state) == expected
    assert state["self_k0"].shape == (5, h_kv, 7, 4)


def test_tensor_bytes_refuses_non_tensors():
    with pytest.raises(TypeError, match="counts tensors, got a list"):
        scale.tensor_bytes({"k": [1, 2]})


# ----------------------------------------------------------------------------------------------
# sliding window
# ----------------------------------------------------------------------------------------------


def test_sliding_window_mask_band():
    m = scale.sliding_window_mask(5, window=2)
    expected = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(m, expected)
    # two queries at the end of five keys (positions 3 and 4), window 3
    assert torch.equal(scale.sliding_window_mask(2, 5, window=3), torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]).bool())
    assert torch.equal(scale.sliding_window_mask(6, window=100), causal_mask(6))
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        scale.sliding_window_mask(4, window=0)
    with pytest.raises(ValueError, match="window must be >= 1, got -1"):
        scale.RingKVCache(-1)


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("window", [1, 3, 8])
def test_ring_cache_equals_banded_full_attention(dtype, window):
    q, k, v = qkv(dtype, L=13, S=13)
    full = scale.naive_attention(q, k, v, scale.sliding_window_mask(13, window=window))  # (B, H, N, Dv)
    cache = scale.RingKVCache(window)
    sizes, outs = set(), []
    for t in range(13):
        cache.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
        sizes.add(cache.nbytes)
        kc, vc = cache.keys_values()
        outs.append(scale.naive_attention(q[:, :, t : t + 1], kc, vc))  # (B, H, 1, Dv)
    close(f"ring cache vs banded, {dtype}", torch.cat(outs, dim=2), full)
    assert sizes == {2 * 3 * window * (8 + 6) * q.element_size()}  # keys (B, H, W, D) and values (B, H, W, Dv)
    assert cache.k.shape == (2, 3, window, 8)  # constant size, whatever the length


def test_ring_cache_errors():
    cache = scale.RingKVCache(2)
    with pytest.raises(ValueError, match="the cache is empty"):
        cache.keys_values()
    cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    with pytest.raises(ValueError, match=r"this cache holds \(B, H, W, D\) = \(1, 2, 2, 4\)"):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))


def test_receptive_field_grows_by_window_minus_one_per_layer():
    for layers in (1, 2, 3):
        reach = scale.receptive_field(layers, 4, 30)
        assert int(reach[-1].sum()) == layers * 3 + 1
        assert torch.equal(reach, reach.tril())  # still causal


# ----------------------------------------------------------------------------------------------
# the widget's arithmetic and the backends
# ----------------------------------------------------------------------------------------------


def test_memory_model():
    r = scale.memory_model(4096, 128, 8, num_heads=32, head_dim=128, layers=32, bytes_per=2)
    assert r["naive"] == 32 * 4096 * 4096 * 2
    assert r["tiled"] == 32 * (128 * 128 + 128 * 130 + 4096 * 129) * 2  # tile, state, output and lse
    assert r["cache"] == scale.kv_cache_bytes(layers=32, kv_heads=8, head_dim=128, tokens=4096, bytes_per=2)
    assert r["ratio"] == pytest.approx(r["naive"] / r["tiled"])
    assert f"{r['cache']:,}" in r["formulas"]["cache"]
    small = scale.memory_model(64, 128, 32)  # a block longer than the sequence is cut to it
    assert small["tiled"] == 32 * (64 * 64 + 64 * 130 + 64 * 129) * 2
    with pytest.raises(ValueError, match="num_heads=32 is not divisible by num_kv_heads=5"):
        scale.memory_model(64, 16, 5)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        scale.memory_model(64, 0, 8)


@pytest.mark.numeric
def test_sdpa_backends_math_runs_and_agrees():
    q, k, v = qkv(torch.float32, L=9, S=9, Dv=8)
    found = scale.sdpa_backends(q, k, v, is_causal=True)
    assert set(found) == {"MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"}
    ref = scale.tiled_attention(q, k, v, causal=True, block_size=4)
    for out in found.values():
        if isinstance(out, torch.Tensor):
            torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        else:
            assert out.startswith("not available: ")
    assert isinstance(found["MATH"], torch.Tensor)
