"""Tests of attnlab.core.linear_attention: the three forms are equal; the feature map; errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.core.linear_attention import FORMS, elu_feature_map, linear_attention
from attnlab.core.masks import causal_mask

TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-12, "rtol": 0.0}}


def qkv(dtype, L=13, D=4, Dv=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 3, L, n, generator=g, dtype=dtype) for n in (D, D, Dv))


def by_hand(q, k, v, causal):
    """The definition, one query at a time: phi(q_i) . phi(k_j) weights, normalised."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    w = fq @ fk.transpose(-2, -1)  # (..., L, L)
    if causal:
        w = w.masked_fill(~causal_mask(q.shape[-2]), 0.0)
    return (w / w.sum(-1, keepdim=True)) @ v


@pytest.mark.numeric
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("form", FORMS)
def test_causal_forms_equal_the_definition(dtype, form):
    q, k, v = qkv(dtype)
    torch.testing.assert_close(linear_attention(q, k, v, form=form, eps=0.0), by_hand(q, k, v, True), **TOL[dtype])


@pytest.mark.numeric
@pytest.mark.parametrize("chunk", [1, 4, 5, 13, 64])
def test_chunked_form_equals_the_definition_for_every_chunk_size(chunk):
    """Chunks that divide L = 13 or not, one position per chunk, one chunk for all."""
    q, k, v = qkv(torch.float64)
    got = linear_attention(q, k, v, form="chunked", chunk=chunk, eps=0.0)
    torch.testing.assert_close(got, by_hand(q, k, v, True), **TOL[torch.float64])


@pytest.mark.numeric
@pytest.mark.parametrize("form", ["quadratic", "parallel", "chunked"])
def test_non_causal_forms_equal_the_definition(form):
    q, k, v = qkv(torch.float64)
    got = linear_attention(q, k, v, causal=False, form=form, eps=0.0)
    torch.testing.assert_close(got, by_hand(q, k, v, False), **TOL[torch.float64])


@pytest.mark.numeric
def test_gradients_of_parallel_and_recurrent_agree():
    grads = []
    for form in ("parallel", "recurrent"):
        q, k, v = (t.requires_grad_(True) for t in qkv(torch.float64, L=7))
        linear_attention(q, k, v, form=form).pow(2).sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


@pytest.mark.numeric
def test_feature_map_is_positive_and_elu_plus_one():
    x = torch.linspace(-20, 5, 101, dtype=torch.float64)
    phi = elu_feature_map(x)
    assert (phi > 0).all()
    torch.testing.assert_close(phi[x > 0], x[x > 0] + 1)
    torch.testing.assert_close(phi[x <= 0], torch.exp(x[x <= 0]))


def test_errors():
    q, k, v = qkv(torch.float32)
    with pytest.raises(ValueError, match="form must be one of 'quadratic', 'parallel', 'recurrent', 'chunked', got 'fast'"):
        linear_attention(q, k, v, form="fast")
    with pytest.raises(ValueError, match="recurrent' is causal by nature"):
        linear_attention(q, k, v, causal=False, form="recurrent")
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        linear_attention(q, k, v, form="chunked", chunk=0)
    with pytest.raises(ValueError, match=r"need q \(..., L, D\), k \(..., L, D\)"):
        linear_attention(q, k[..., :5, :], v)
    with pytest.raises(TypeError, match="floating-point"):
        linear_attention(q.long(), k, v)
