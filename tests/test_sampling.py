"""Sampling decoders: top-k 1 = greedy, top-p 1 = plain sampling, renormalised, the nucleus, errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data.vocab import EOS, PAD
from attnlab.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from attnlab.models.decoding import greedy_decode
from attnlab.models.sampling import check_sampling, next_token_probs, sample_decode, sample_next

LOGITS = st.lists(st.floats(min_value=-8, max_value=8), min_size=2, max_size=12)


@settings(max_examples=50, deadline=None)
@given(z=LOGITS, t=st.floats(min_value=0.1, max_value=5), k=st.integers(1, 12), p=st.floats(0.01, 1.0))
def test_probabilities_renormalised(z, t, k, p):
    probs = next_token_probs(torch.tensor(z), t, k, p)
    assert abs(float(probs.sum()) - 1) < 1e-5
    assert int((probs > 0).sum()) <= k
    # the most likely token kept is a largest logit; logits that differ by less than float32 resolution at the
    # temperature are a tie (hypothesis found [-5.8e-28, 0.0]: top-1 keeps either)
    logits = torch.tensor(z)
    assert logits[probs.argmax()] >= logits.max() - 1e-6 * max(1.0, float(logits.abs().max()))


@pytest.mark.numeric
def test_top_p_one_is_plain_sampling_and_temperature_divides():
    z = torch.randn(4, 9)
    torch.testing.assert_close(next_token_probs(z, 1.0, None, 1.0), torch.softmax(z, -1))
    torch.testing.assert_close(next_token_probs(z, 2.0), torch.softmax(z / 2, -1))


def test_top_k_one_is_greedy():
    z = torch.randn(16, 30)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        assert torch.equal(sample_next(z, 1.7, 1, generator=gen), z.argmax(-1))


def test_nucleus_is_the_smallest_set_reaching_p():
    z = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    assert next_token_probs(z, top_p=0.5).tolist() == [1.0, 0.0, 0.0, 0.0]
    kept = next_token_probs(z, top_p=0.7)  # 0.5 < 0.7: the second token is needed, the third is not
    torch.testing.assert_close(kept, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    kept = next_token_probs(z, top_p=0.9)
    assert (kept > 0).tolist() == [True, True, True, False]


def test_top_k_keeps_k_and_renormalises():
    z = torch.tensor([0.4, 0.3, 0.2, 0.1]).log()
    torch.testing.assert_close(next_token_probs(z, top_k=2), torch.tensor([4 / 7, 3 / 7, 0.0, 0.0]))


def test_draws_follow_the_distribution():
    z = torch.tensor([[0.6, 0.3, 0.1]]).log().expand(4000, 3)
    gen = torch.Generator().manual_seed(0)
    counts = torch.bincount(sample_next(z, generator=gen), minlength=3) / 4000
    assert abs(float(counts[0]) - 0.6) < 0.03 and abs(float(counts[2]) - 0.1) < 0.02


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(temperature=0.0), "temperature must be > 0"),
        (dict(temperature=-1.0), "temperature must be > 0"),
        (dict(temperature=math.inf), "temperature"),
        (dict(top_k=0), "top_k must be >= 1"),
        (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p must be in \(0, 1\]"),
    ],
)
def test_bad_knobs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_sampling(**kwargs)
    with pytest.raises(ValueError, match=match):
        next_token_probs(torch.zeros(3), **kwargs)


def test_bad_knob_types():
    with pytest.raises(TypeError, match="top_k"):
        check_sampling(top_k=2.5)
    with pytest.raises(TypeError, match="temperature"):
        check_sampling(temperature="hot")


def _model():
    torch.manual_seed(0)
    return DecoderOnly(DecoderOnlyConfig(20, 23, d_model=32, num_heads=4, num_layers=2, dim_feedforward=48)).eval()


def test_sample_decode_top_k_one_equals_greedy():
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, PAD]])
    greedy = greedy_decode(model, src, max_len=10).tokens
    sampled = sample_decode(model, src, temperature=3.0, top_k=1, max_len=10, seed=4)
    assert torch.equal(sampled, greedy[:, : sampled.shape[1]])


def test_sample_decode_seeded_and_padded_after_eos():
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, PAD]])
    a = sample_decode(model, src, temperature=2.0, max_len=15, seed=1)
    assert torch.equal(a, sample_decode(model, src, temperature=2.0, max_len=15, seed=1))
    for row in a.tolist():
        if EOS in row:
            assert all(tok == PAD for tok in row[row.index(EOS) + 1 :])
