"""Tests of attnlab.core.scale: tiled (online-softmax) attention equals PyTorch, memory, caches, windows.

The largest absolute error of each comparison is printed at the end (``pytest -s``).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

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
    assert r["tiled"] == 32 * (128 * 128 + 128 * 130) * 2
    assert r["cache"] == scale.kv_cache_bytes(layers=32, kv_heads=8, head_dim=128, tokens=4096, bytes_per=2)
    assert r["ratio"] == pytest.approx(r["naive"] / r["tiled"])
    assert f"{r['cache']:,}" in r["formulas"]["cache"]
    small = scale.memory_model(64, 128, 32)  # a block longer than the sequence is cut to it
    assert small["tiled"] == 32 * (64 * 64 + 64 * 130) * 2
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
