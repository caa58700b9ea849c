"""Tests of attnlab.core.attention: equal to PyTorch's attention, masks, fully masked rows, errors.

The largest absolute error of every comparison with PyTorch is recorded in ``ERRORS`` and
printed at the end of the module (visible with ``pytest -s``).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.attention import (
    MultiHeadAttention,
    copy_weights_from_nn_mha,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from attnlab.core.masks import causal_mask, padding_mask, to_nn_mha_mask

from .error_log import ErrorLog

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: {"atol": 2e-5, "rtol": 1e-4}, torch.float64: {"atol": 1e-10, "rtol": 1e-8}}
ERRORS = ErrorLog(TOL)
assert_close_logged = ERRORS.close


@pytest.fixture(scope="module", autouse=True)
def _print_max_errors():
    yield
    ERRORS.report("max abs error vs PyTorch")


def make_mask(kind: str, batch: tuple[int, ...], L: int, S: int, dtype: torch.dtype, gen: torch.Generator):
    """Course-convention masks of several kinds, never with a fully masked row."""
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(L, S)  # (L, S)
    allowed = torch.rand(*batch, L, S, generator=gen) > 0.4  # (..., L, S)
    allowed[..., 0] = True  # keep every row alive; fully masked rows have their own tests
    if kind == "bool":
        return allowed
    if kind == "float":
        bias = torch.randn(*batch, L, S, generator=gen, dtype=dtype)  # (..., L, S)
        return bias.masked_fill(~allowed, float("-inf"))
    if kind == "padding":
        lengths = torch.randint(1, S + 1, batch[:1], generator=gen)  # (B,)
        return padding_mask(lengths, S)[:, None, None, :]  # (B, 1, 1, S)
    raise ValueError(kind)


# ----------------------------------------------------------------------------------------------
# scaled dot-product attention
# ----------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1, 1, 4, 4), (2, 3, 5, 7, 8, 6), (3, 2, 6, 6, 16, 16)]  # B, H, L, S, E, Ev


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["none", "bool", "float", "padding", "causal"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("need_weights", [True, False])
def test_sdpa_matches_torch(shape, kind, dtype, need_weights):
    B, H, L, S, E, Ev = shape
    gen = torch.Generator().manual_seed(100 * SHAPES.index(shape) + len(kind))
    q = torch.randn(B, H, L, E, generator=gen, dtype=dtype)  # (B, H, L, E)
    k = torch.randn(B, H, S, E, generator=gen, dtype=dtype)  # (B, H, S, E)
    v = torch.randn(B, H, S, Ev, generator=gen, dtype=dtype)  # (B, H, S, Ev)
    mask = make_mask(kind, (B, H), L, S, dtype, gen)
    if kind == "causal" and L == S:
        ours, w = scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        ours, w = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    path = "weights" if need_weights else "fast"
    assert_close_logged(f"sdpa out, {path} path, {dtype}", ours, ref)
    assert ours.shape == (B, H, L, Ev)
    if need_weights:
        assert w.shape == (B, H, L, S)
        torch.testing.assert_close(w.sum(-1), torch.ones(B, H, L, dtype=dtype))
    else:
        assert w is None


@pytest.mark.numeric
def test_sdpa_weights_are_the_textbook_formula():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 5, generator=gen, dtype=torch.float64) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(5), dim=-1)  # (2, 4, 4)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, expected_w @ v)


@pytest.mark.numeric
def test_sdpa_scale_and_broadcast_mask():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 4, 8, generator=gen)  # (B, H, L, E)
    k = torch.randn(2, 3, 6, 8, generator=gen)  # (B, H, S, E)
    v = torch.randn(2, 3, 6, 8, generator=gen)  # (B, H, S, E)
    mask = torch.rand(4, 6, generator=gen) > 0.3  # (L, S) shared by the batch
    mask[:, 0] = True
    for need_weights in (True, False):
        ours, _ = scaled_dot_product_attention(q, k, v, mask, scale=0.3, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
        assert_close_logged("sdpa out, scale=0.3, torch.float32", ours, ref)


@pytest.mark.numeric
@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_with_cache_shape_aligns_to_the_end(need_weights):
    """L < S (new queries after a cache): query i sees keys 0 .. i + S - L."""
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 8, generator=gen)  # (B, L, E)
    k = torch.randn(2, 5, 8, generator=gen)  # (B, S, E)
    v = torch.randn(2, 5, 4, generator=gen)  # (B, S, Ev)
    ours, _ = scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=need_weights)
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=expected)
    torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_dtype", ["bool", "float"])
def test_sdpa_fully_masked_rows_are_zero_without_nan(dtype, need_weights, mask_dtype):
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(2, 4, 8, generator=gen, dtype=dtype, requires_grad=True)  # (B, L, E)
    k = torch.randn(2, 5, 8, generator=gen, dtype=dtype, requires_grad=True)  # (B, S, E)
    v = torch.randn(2, 5, 3, generator=gen, dtype=dtype, requires_grad=True)  # (B, S, Ev)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)  # (B, L, S)
    mask[0, 1] = False  # one dead query row
    mask[1] = False  # a whole dead batch element
    mask[0, 2, 3:] = False  # an ordinary partly masked row
    if mask_dtype == "float":
        mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
    out, w = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    assert not out.isnan().any()
    assert (out[0, 1] == 0).all() and (out[1] == 0).all()
    assert out[0, 0].abs().sum() > 0
    if need_weights:
        assert (w[0, 1] == 0).all() and (w[1] == 0).all()
        torch.testing.assert_close(w[0, [0, 2, 3]].sum(-1), torch.ones(3, dtype=dtype))
    (out**2).sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[0, 1] == 0).all() and (q.grad[1] == 0).all()
    assert (k.grad[1] == 0).all() and (v.grad[1] == 0).all()


@pytest.mark.numeric
def test_sdpa_both_paths_agree_on_fully_masked_rows_and_grads():
    gen = torch.Generator().manual_seed(5)
    base = [torch.randn(3, 6, 4, generator=gen, dtype=torch.float64) for _ in range(3)]
    mask = torch.rand(3, 6, 6, generator=gen) > 0.5  # (B, L, S), some rows dead by chance
    mask[0, 0] = False
    results = []
    for need_weights in (True, False):
        q, k, v = (t.clone().requires_grad_() for t in base)
        out, _ = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
        out.sin().sum().backward()
        results.append((out, q.grad, k.grad, v.grad))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.numeric
@pytest.mark.parametrize("need_weights", [True, False])
def test_sdpa_gradcheck(need_weights):
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[1, 0, 1], [1, 1, 0], [0, 0, 0]], dtype=torch.bool)  # last row dead
    fn = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)[0]
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_sdpa_errors_name_the_shapes():
    q = torch.randn(2, 4, 8)
    k = torch.randn(2, 5, 8)
    v = torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"q and k .*feature size.*\(2, 4, 8\).*\(2, 5, 6\)"):
        scaled_dot_product_attention(q, torch.randn(2, 5, 6), v)
    with pytest.raises(ValueError, match=r"k and v .*length S.*\(2, 5, 8\).*S=5.*\(2, 6, 3\).*S=6"):
        scaled_dot_product_attention(q, k, torch.randn(2, 6, 3))
    with pytest.raises(ValueError, match=r"mask has shape \(4, 6\).*does not broadcast.*\(2, 4, 5\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 6, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be bool.*or float.*torch.int64"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"q must be a floating-point tensor, got dtype torch.int64"):
        scaled_dot_product_attention(torch.ones(2, 4, 8, dtype=torch.long), k, v)
    with pytest.raises(TypeError, match=r"share one dtype"):
        scaled_dot_product_attention(q, k, v.double())


# ----------------------------------------------------------------------------------------------
# heads
# ----------------------------------------------------------------------------------------------


def test_split_merge_heads_roundtrip():
    x = torch.arange(2 * 3 * 12, dtype=torch.float32).reshape(2, 3, 12)  # (B, L, E)
    h = split_heads(x, 4)  # (B, H, L, D)
    assert h.shape == (2, 4, 3, 3)
    torch.testing.assert_close(h[:, 1], x[..., 3:6])  # head 1 owns features 3..5
    torch.testing.assert_close(merge_heads(h), x)
    with pytest.raises(ValueError, match=r"feature size 12 .*not divisible by num_heads=5"):
        split_heads(x, 5)
    with pytest.raises(ValueError, match="num_heads must be >= 1, got 0"):
        split_heads(x, 0)  # not a ZeroDivisionError
    with pytest.raises(ValueError, match=r"x must be \(\.\.\., H, L, D\), got shape \(3, 12\)"):
        merge_heads(x[0])


# ----------------------------------------------------------------------------------------------
# multi-head attention vs nn.MultiheadAttention
# ----------------------------------------------------------------------------------------------


def _pair(E, H, dtype, kdim=None, vdim=None, bias=True, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(E, H, batch_first=True, kdim=kdim, vdim=vdim, bias=bias).to(dtype).eval()
    if bias:  # PyTorch initialises biases to zero; make them matter
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
            theirs.out_proj.bias.normal_()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    return ours, theirs


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("E,H", [(8, 1), (12, 3), (16, 4)])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_self_attention_matches_nn_mha(dtype, E, H, padding, causal, need_weights):
    ours, theirs = _pair(E, H, dtype)
    B, L = 3, 6
    x = torch.randn(B, L, E, dtype=dtype)  # (B, L, E)
    kpm = padding_mask(torch.tensor([6, 4, 1]), L) if padding else None  # (B, S) True = real
    am = causal_mask(L) if causal else None  # (L, S) True = attend
    ref, ref_w = theirs(
        x, x, x, key_padding_mask=to_nn_mha_mask(kpm), attn_mask=to_nn_mha_mask(am), need_weights=True
    )
    out, w = ours(x, x, x, key_keep=kpm, is_causal=causal, need_weights=need_weights)
    path = "weights" if need_weights else "fast"
    assert_close_logged(f"mha self out, {path} path, {dtype}", out, ref)
    if need_weights:
        assert_close_logged(f"mha self attn weights, {dtype}", w, ref_w)
        _, w_heads = ours(x, x, x, key_keep=kpm, is_causal=causal, average_attn_weights=False)
        _, ref_heads = theirs(
            x,
            x,
            x,
            key_padding_mask=to_nn_mha_mask(kpm),
            attn_mask=to_nn_mha_mask(am),
            average_attn_weights=False,
        )
        assert w_heads.shape == (B, H, L, L)
        assert_close_logged(f"mha self attn weights, {dtype}", w_heads, ref_heads)
    else:
        assert w is None


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kdim,vdim", [(None, None), (5, 7)])
def test_mha_cross_attention_matches_nn_mha(dtype, need_weights, kdim, vdim):
    E, H, B, L, S = 12, 4, 2, 3, 5
    ours, theirs = _pair(E, H, dtype, kdim=kdim, vdim=vdim)
    query = torch.randn(B, L, E, dtype=dtype)  # (B, L, E)
    key = torch.randn(B, S, kdim or E, dtype=dtype)  # (B, S, Ek)
    value = torch.randn(B, S, vdim or E, dtype=dtype)  # (B, S, Ev)
    kpm = padding_mask(torch.tensor([5, 2]), S)  # (B, S)
    am = torch.rand(L, S) > 0.3  # (L, S)
    am[:, 0] = True
    ref, ref_w = theirs(query, key, value, key_padding_mask=~kpm, attn_mask=~am)
    out, w = ours(query, key, value, key_keep=kpm, attn_keep=am, need_weights=need_weights)
    assert_close_logged(f"mha cross out, {'weights' if need_weights else 'fast'} path, {dtype}", out, ref)
    if need_weights:
        assert_close_logged(f"mha cross attn weights, {dtype}", w, ref_w)


@pytest.mark.numeric
def test_mha_float_masks_and_per_sample_masks_match_nn_mha():
    E, H, B, L = 8, 2, 2, 4
    ours, theirs = _pair(E, H, torch.float64)
    x = torch.randn(B, L, E, dtype=torch.float64)  # (B, L, E)
    bias = torch.randn(B, H, L, L, dtype=torch.float64)  # (B, H, L, S) additive
    ref, _ = theirs(x, x, x, attn_mask=bias.reshape(B * H, L, L))  # PyTorch's 3-D layout (B*H, L, S)
    for need_weights in (True, False):
        out, _ = ours(x, x, x, attn_keep=bias, need_weights=need_weights)
        assert_close_logged("mha out, float (B,H,L,S) mask, torch.float64", out, ref)


@pytest.mark.numeric
def test_mha_no_bias_and_copy_function():
    ours, theirs = _pair(8, 2, torch.float32, bias=False)
    assert ours.q_proj.bias is None
    fresh = copy_weights_from_nn_mha(MultiHeadAttention(8, 2, bias=False), theirs).eval()
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(fresh(x, x, x)[0], theirs(x, x, x)[0])
    with pytest.raises(ValueError, match=r"bias mismatch"):
        MultiHeadAttention(8, 2).load_from_torch(theirs)
    with pytest.raises(ValueError, match=r"shape mismatch.*\(8, 2, 8, 8\).*\(8, 4, 8, 8\)"):
        MultiHeadAttention(8, 4, bias=False).load_from_torch(theirs)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_fully_masked_rows(need_weights):
    """A batch element whose keys are all padding: zero weights, output = out_proj bias, no NaN."""
    ours, _ = _pair(8, 2, torch.float32)
    query = torch.randn(2, 3, 8, requires_grad=True)  # (B, L, E)
    memory = torch.randn(2, 4, 8, requires_grad=True)  # (B, S, E)
    kpm = padding_mask(torch.tensor([4, 0]), 4)  # (B, S): element 1 has no real key
    out, w = ours(query, memory, memory, key_keep=kpm, need_weights=need_weights)
    assert not out.isnan().any()
    torch.testing.assert_close(out[1], ours.out_proj.bias.expand(3, 8))
    if need_weights:
        assert (w[1] == 0).all()
    out.sum().backward()
    for t in (query, memory, *ours.parameters()):
        assert torch.isfinite(t.grad).all()
    assert (memory.grad[1] == 0).all()


@pytest.mark.numeric
def test_mha_paths_agree_with_dead_rows():
    ours, _ = _pair(12, 3, torch.float64)
    x = torch.randn(3, 5, 12, dtype=torch.float64)  # (B, L, E)
    am = torch.rand(3, 1, 5, 5) > 0.6  # (B, 1, L, S): some rows dead
    am[0, 0, 2] = False
    a, _ = ours(x, x, x, attn_keep=am, need_weights=True)
    b, _ = ours(x, x, x, attn_keep=am, need_weights=False)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_gradients_flow(need_weights):
    ours, _ = _pair(8, 2, torch.float32)
    x = torch.randn(2, 5, 8, requires_grad=True)
    out, _ = ours(x, x, x, is_causal=True, need_weights=need_weights)
    out.pow(2).sum().backward()
    assert x.grad.abs().sum() > 0
    for name, p in ours.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_mha_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 6, 8)
    mha.train()
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x, need_weights=False)
    assert not torch.allclose(a, b)  # different random dropout patterns
    mha.eval()
    c, _ = mha(x, x, x)
    d, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(c, d)


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_leakage(need_weights):
    """Changing a future token leaves earlier outputs unchanged under a causal mask only."""
    ours, _ = _pair(16, 4, torch.float64)
    x = torch.randn(1, 7, 16, dtype=torch.float64)  # (B, L, E)
    x2 = x.clone()
    x2[0, 4] += 3.0  # change token 4
    with_mask = [ours(t, t, t, is_causal=True, need_weights=need_weights)[0] for t in (x, x2)]
    torch.testing.assert_close(with_mask[0][:, :4], with_mask[1][:, :4])  # the past does not move
    assert not torch.allclose(with_mask[0][:, 4:], with_mask[1][:, 4:])
    without = [ours(t, t, t, need_weights=need_weights)[0] for t in (x, x2)]
    moved = (without[0] - without[1]).abs().amax(-1)[0]  # (L,)
    assert (moved[:4] > 1e-6).all()  # every earlier position sees the change


@pytest.mark.numeric
@pytest.mark.parametrize("need_weights", [True, False])
def test_kv_cache_incremental_decoding_matches_full_causal(need_weights):
    ours, _ = _pair(12, 3, torch.float64)
    x = torch.randn(2, 6, 12, dtype=torch.float64)  # (B, L, E)
    full, _ = ours(x, x, x, is_causal=True, need_weights=need_weights)
    cache: dict[str, torch.Tensor] = {}
    steps = []
    for t in range(6):
        xt = x[:, t : t + 1]  # (B, 1, E): one new token
        out_t, w_t = ours(xt, xt, xt, is_causal=True, need_weights=need_weights, cache=cache)
        steps.append(out_t)
        if need_weights:
            assert w_t.shape == (2, 1, t + 1)
    assert cache["k"].shape == (2, 3, 6, 4)
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    # a prefix in one call, then the rest one by one
    cache = {}
    first, _ = ours(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
    rest = [ours(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in (4, 5)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full)


def test_mha_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"embed_dim=10 is not divisible by num_heads=3"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"batch-first only"):
        MultiHeadAttention(8, 2, batch_first=False)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(
        ValueError, match=r"key and value must have the same length S.*\(2, 5, 8\).*\(2, 4, 8\)"
    ):
        mha(x, x, torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"query must have shape \(B, length, 8\), got \(2, 5, 6\)"):
        mha(torch.randn(2, 5, 6), x, x)
    with pytest.raises(ValueError, match=r"attn_keep has shape \(5, 4\).*does not broadcast.*\(2, 2, 5, 5\)"):
        mha(x, x, x, attn_keep=torch.ones(5, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"3-D masks are ambiguous.*\(2, 2, 5, 5\)"):
        mha(x, x, x, attn_keep=torch.ones(4, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"attn_keep must be bool.*torch.int64"):
        mha(x, x, x, attn_keep=torch.ones(5, 5, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"key_keep has shape \(2, 4\), expected \(B, S\) = \(2, 5\)"
    ):
        mha(x, x, x, key_keep=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"key_keep must be bool.*torch.int32"):
        mha(x, x, x, key_keep=torch.ones(2, 5, dtype=torch.int32))
    with pytest.raises(TypeError, match=r"query must be a floating-point tensor"):
        mha(x.long(), x, x)


def test_pytorch_mask_names_raise_a_type_error_that_explains():
    """Code ported from nn.MultiheadAttention fails loudly instead of silently inverting its masks."""
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    pad = torch.zeros(2, 5, dtype=torch.bool)  # PyTorch convention: True = padding; here none
    with pytest.raises(TypeError, match=r"forward\(\) got key_padding_mask=.*True means \*blocked\*.*pass key_keep="):
        mha(x, x, x, key_padding_mask=pad)
    with pytest.raises(TypeError, match=r"got attn_mask=.*True = takes part.*pass attn_keep="):
        mha(x, x, x, attn_mask=torch.zeros(5, 5, dtype=torch.bool))
    # the same mask under our name means the opposite: all keys blocked, every row fully masked
    out, w = mha(x, x, x, key_keep=pad)
    assert (w == 0).all()
    torch.testing.assert_close(out, mha.out_proj.bias.expand(2, 5, 8))


# ----------------------------------------------------------------------------------------------
# NaN policy: NaN in, NaN out, on both paths
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal"])
def test_nan_query_row_is_nan_on_both_paths(mask_kind):
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(2, 4, 8, generator=gen)  # (B, L, E)
    k = torch.randn(2, 4, 8, generator=gen)  # (B, S, E)
    v = torch.randn(2, 4, 3, generator=gen)  # (B, S, Ev)
    q[0, 1] = math.nan  # one NaN query row
    q[0, 3] = math.nan  # a NaN query row that is also fully masked (bool / float)
    keep = torch.ones(2, 4, 4, dtype=torch.bool)  # (B, L, S)
    keep[0, 3] = False
    keep[1, 2] = False  # a clean fully masked row
    mask = {"none": None, "bool": keep, "float": torch.zeros(2, 4, 4).masked_fill(~keep, -math.inf)}.get(mask_kind)
    causal = mask_kind == "causal"
    outs = [
        scaled_dot_product_attention(q, k, v, mask, is_causal=causal, need_weights=nw)[0] for nw in (True, False)
    ]
    for out in outs:
        assert out[0, 1].isnan().all() and out[0, 3].isnan().all()
        assert not out[0, [0, 2]].isnan().any() and not out[1].isnan().any()
        if mask is not None:
            assert (out[1, 2] == 0).all()  # a clean fully masked row is still zero
    torch.testing.assert_close(outs[0], outs[1], equal_nan=True)


def test_nan_policy_in_multi_head_attention():
    """A NaN decoder position gives a NaN output row (not zeros) on both paths; the other rows are clean."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    query[1, 2] = math.nan
    keep = padding_mask(torch.tensor([4, 0]), 4)  # (B, S): batch element 1 has no real key at all
    for need_weights in (True, False):
        out, _ = mha(query, memory, memory, key_keep=keep, need_weights=need_weights)
        assert out[1, 2].isnan().all(), need_weights
        assert not out[0].isnan().any() and not out[1, :2].isnan().any()
        torch.testing.assert_close(out[1, :2], mha.out_proj.bias.expand(2, 8))


# ----------------------------------------------------------------------------------------------
# argument checks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_p_is_checked_the_same_way_on_both_paths(need_weights):
    q = torch.randn(2, 3, 4)
    for p in (1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
            scaled_dot_product_attention(q, q, q, dropout_p=p, need_weights=need_weights)
    with pytest.raises(TypeError, match="dropout_p must be a float"):
        scaled_dot_product_attention(q, q, q, dropout_p="0.1", need_weights=need_weights)
    mha = MultiHeadAttention(4, 2).train()
    mha.dropout = 1.0  # e.g. set by hand after construction
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\), got 1.0"):
        mha(x, x, x, need_weights=need_weights)


def test_scale_is_checked():
    q = torch.randn(2, 3, 4)
    with pytest.raises(TypeError, match="scale must be a real number or None, got str"):
        scaled_dot_product_attention(q, q, q, scale="0.5")
    with pytest.raises(ValueError, match="scale must be finite, got inf"):
        scaled_dot_product_attention(q, q, q, scale=math.inf)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((0, 2), {}, ValueError, "embed_dim must be >= 1, got 0"),
        ((8, 0), {}, ValueError, "num_heads must be >= 1, got 0"),
        ((8, -2), {}, ValueError, "num_heads must be >= 1, got -2"),
        (("8", 2), {}, TypeError, "embed_dim must be an int, got str"),
        ((8, 2), {"kdim": 0}, ValueError, "kdim must be >= 1, got 0"),
        ((8, 2), {"vdim": -1}, ValueError, "vdim must be >= 1, got -1"),
        ((8, 2), {"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
    ],
)
def test_mha_constructor_checks_name_the_argument(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention(*args, **kwargs)


def test_float_masks_with_inf_or_nan_are_refused():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    bias = torch.zeros(5, 5)
    bias[1, 2] = math.inf
    with pytest.raises(ValueError, match=r"attn_keep is a float mask holding \+inf"):
        mha(x, x, x, attn_keep=bias)
    with pytest.raises(ValueError, match="key_keep is a float mask holding NaN"):
        mha(x, x, x, key_keep=torch.full((2, 5), math.nan))


# ----------------------------------------------------------------------------------------------
# keys/values projected once (kv=) and the cache
# ----------------------------------------------------------------------------------------------


@pytest.mark.numeric
@pytest.mark.parametrize("need_weights", [True, False])
def test_precomputed_kv_gives_the_same_result(need_weights):
    ours, _ = _pair(12, 3, torch.float64, kdim=5, vdim=7)
    query = torch.randn(2, 4, 12, dtype=torch.float64)  # (B, L, E)
    key, value = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 6, 7, dtype=torch.float64)
    keep = padding_mask(torch.tensor([6, 3]), 6)  # (B, S)
    expected, w = ours(query, key, value, key_keep=keep, need_weights=need_weights)
    k, v = ours.project_kv(key, value)  # (B, H, S, D) each
    assert k.shape == v.shape == (2, 3, 6, 4)
    got, w_kv = ours(query, kv=(k, v), key_keep=keep, need_weights=need_weights)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    if need_weights:
        torch.testing.assert_close(w_kv, w, atol=0, rtol=0)


def test_kv_argument_errors():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    k, v = mha.project_kv(x, x)  # (2, 2, 5, 4) each
    with pytest.raises(ValueError, match="give either key and value or kv"):
        mha(x, x, x, kv=(k, v))
    with pytest.raises(ValueError, match=r"give key and value, or kv=\(k, v\)"):
        mha(x)
    with pytest.raises(ValueError, match="exclude each other"):
        mha(x, kv=(k, v), cache={})
    with pytest.raises(ValueError, match=r"kv\[0\] \(keys\) must be \(B, H, S, D\) = \(2, 2, S, 4\).*\(2, 4, 5, 2\)"):
        mha(x, kv=(k.reshape(2, 4, 5, 2), v))
    with pytest.raises(ValueError, match=r"kv\[1\] \(values\) must be \(B, H, S, D\) = \(3, 2, S, 4\)"):
        mha(torch.randn(3, 5, 8), kv=(torch.randn(3, 2, 5, 4), v))
    with pytest.raises(TypeError, match=r"kv must be a pair \(k, v\)"):
        mha(x, kv=k)
    with pytest.raises(ValueError, match="key and value must have the same batch size B and length S"):
        mha.project_kv(x, x[:, :3])


def test_a_cache_from_another_batch_size_is_refused():
    mha = MultiHeadAttention(8, 2)
    cache: dict[str, torch.Tensor] = {}
    x2, x3 = torch.randn(2, 1, 8), torch.randn(3, 1, 8)
    mha(x2, x2, x2, cache=cache)
    with pytest.raises(ValueError, match=r"cache\['k'\] must be \(B, H, S, D\) = \(3, 2, S, 4\).*another batch"):
        mha(x3, x3, x3, cache=cache)
    assert cache["k"].shape == (2, 2, 1, 4)  # the refused call changed nothing
    with pytest.raises(ValueError, match=r"cache\['k'\] is torch.float64 on cpu but the query is torch.float32"):
        mha(x2, x2, x2, cache={"k": cache["k"].double(), "v": cache["v"].double()})
    with pytest.raises(ValueError, match="cache must hold both 'k' and 'v' or neither"):
        mha(x2, x2, x2, cache={"k": cache["k"]})


# ----------------------------------------------------------------------------------------------
# grouped-query and multi-query attention (num_kv_heads)
# ----------------------------------------------------------------------------------------------


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_matches_sdpa_enable_gqa(dtype, num_kv_heads, need_weights, causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads).to(dtype).eval()
    x = torch.randn(2, 6, 16, dtype=dtype)
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])  # (B, S) key padding
    ours, _ = mha(x, x, x, key_keep=keep, is_causal=causal, need_weights=need_weights)
    q = split_heads(mha.q_proj(x), 4)  # (B, H, L, D)
    k = split_heads(mha.k_proj(x), num_kv_heads)  # (B, Hkv, S, D)
    v = split_heads(mha.v_proj(x), num_kv_heads)  # (B, Hkv, S, D)
    mask = keep[:, None, None, :] & (causal_mask(6) if causal else True)  # (B, 1, L, S)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # (B, H, L, D)
    ref = mha.out_proj(merge_heads(ref))  # (B, L, E)
    assert_close_logged(f"gqa Hkv={num_kv_heads} vs SDPA enable_gqa, {dtype}", ours, ref)


def test_gqa_parameters_and_cache_are_smaller():
    mha = MultiHeadAttention(16, 4, num_kv_heads=1)
    assert mha.k_proj.weight.shape == mha.v_proj.weight.shape == (4, 16)
    assert mha.q_proj.weight.shape == mha.out_proj.weight.shape == (16, 16)
    default = MultiHeadAttention(16, 4)
    assert default.num_kv_heads == 4 and default.k_proj.weight.shape == (16, 16)
    cache: dict[str, torch.Tensor] = {}
    x = torch.randn(2, 3, 16)
    mha(x, x, x, is_causal=True, cache=cache)
    assert cache["k"].shape == (2, 1, 3, 4)
    with pytest.raises(ValueError, match=r"cache\['k'\] must be \(B, Hkv, S, D\) = \(2, 1, S, 4\)"):
        mha(x, x, x, cache={"k": torch.zeros(2, 4, 3, 4), "v": torch.zeros(2, 4, 3, 4)})


@pytest.mark.numeric
def test_gqa_with_a_cache_equals_full_causal():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2).eval()
    x = torch.randn(2, 5, 16)
    full, _ = mha(x, x, x, is_causal=True)
    cache: dict[str, torch.Tensor] = {}
    steps = [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(5)]
    assert_close_logged("gqa incremental vs full, torch.float32", torch.cat(steps, dim=1), full)


def test_gqa_errors():
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by num_kv_heads=3"):
        MultiHeadAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be >= 1, got 0"):
        MultiHeadAttention(16, 4, num_kv_heads=0)
    with pytest.raises(ValueError, match="nn.MultiheadAttention has one key/value head per query head"):
        MultiHeadAttention(16, 4, num_kv_heads=2).load_from_torch(nn.MultiheadAttention(16, 4, batch_first=True))
