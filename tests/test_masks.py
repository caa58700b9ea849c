"""The course mask convention, the masked softmax, its NaN policy and the refused PyTorch names."""

import math

import pytest
import torch

from attnlab.core.masks import (
    as_additive,
    causal_mask,
    check_mask,
    combine_masks,
    masked_softmax,
    padding_mask,
    refuse_torch_mask_names,
    to_nn_mha_mask,
)


def test_padding_and_causal_masks():
    assert padding_mask(torch.tensor([2, 0, 3])).tolist() == [
        [True, True, False],
        [False, False, False],
        [True, True, True],
    ]
    assert padding_mask(torch.tensor([1]), max_len=3).tolist() == [[True, False, False]]
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # queries aligned to the end of a longer key sequence (cache)
    assert causal_mask(1, 4).tolist() == [[True, True, True, True]]
    assert causal_mask(2, 3).tolist() == [[True, True, False], [True, True, True]]


def test_bad_lengths_and_sizes_are_refused():
    with pytest.raises(ValueError, match=r"lengths must be \(B,\), got shape \(1, 1\)"):
        padding_mask(torch.tensor([[1]]))
    with pytest.raises(ValueError, match="max_len=2 is shorter than the longest length 3"):
        padding_mask(torch.tensor([3]), max_len=2)
    with pytest.raises(TypeError, match="lengths must be an integer tensor, got dtype torch.float32"):
        padding_mask(torch.tensor([2.0]))
    with pytest.raises(ValueError, match=r"lengths must be non-negative, got \[2, -1\]"):
        padding_mask(torch.tensor([2, -1]))
    with pytest.raises(ValueError, match="L must be >= 0, got -1"):
        causal_mask(-1)
    with pytest.raises(TypeError, match="S must be an int, got float 2.5"):
        causal_mask(2, 2.5)


@pytest.mark.numeric
def test_masked_softmax_matches_plain_softmax_on_allowed_keys():
    s = torch.randn(2, 3, 4)
    m = torch.tensor([True, True, False, True])
    w = masked_softmax(s, m)
    ref = torch.softmax(s[..., [0, 1, 3]], -1)
    torch.testing.assert_close(w[..., [0, 1, 3]], ref)
    assert (w[..., 2] == 0).all()
    # the float form of the same mask gives the same weights
    torch.testing.assert_close(masked_softmax(s, as_additive(m, s.dtype)), w)


def test_fully_masked_rows_are_zero_and_nan_free_in_grads():
    s = torch.randn(2, 3, requires_grad=True)
    m = torch.tensor([[True, False, True], [False, False, False]])
    w = masked_softmax(s, m)
    assert (w[1] == 0).all() and torch.isfinite(w).all()
    (w * torch.randn(2, 3)).sum().backward()
    assert torch.isfinite(s.grad).all() and (s.grad[1] == 0).all()


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_nan_policy_nan_scores_stay_nan_even_where_blocked(mask_kind):
    """NaN in, NaN out: a row with a NaN score is NaN, whether the NaN is allowed, blocked or the row dead."""
    s = torch.randn(4, 3)
    s[0, 0] = math.nan  # at an allowed key
    s[1, 2] = math.nan  # at a blocked key
    s[2] = math.nan  # a fully masked row of NaN (a NaN query at a padding position)
    keep = torch.tensor([[True, True, False], [True, True, False], [False, False, False], [True, True, False]])
    mask = keep if mask_kind == "bool" else as_additive(keep, s.dtype)
    w = masked_softmax(s, mask)
    assert w[:3].isnan().all()
    assert not w[3].isnan().any() and w[3, 2] == 0  # the clean row is untouched


def test_combine_and_convert():
    pad = padding_mask(torch.tensor([2, 3]))[:, None, :]  # (B, 1, S)
    both = combine_masks(pad, causal_mask(3), None)  # (B, L, S)
    assert both.shape == (2, 3, 3) and both[0, 2].tolist() == [True, True, False]
    mixed = combine_masks(pad, torch.zeros(3, 3))
    assert mixed.dtype == torch.float32 and torch.isneginf(mixed[0, :, 2]).all()
    assert combine_masks(None, None) is None
    assert to_nn_mha_mask(torch.tensor([True, False])).tolist() == [False, True]
    # its own inverse, so it also turns a PyTorch mask into a course mask
    m = torch.rand(3, 4) > 0.5
    assert torch.equal(to_nn_mha_mask(to_nn_mha_mask(m)), m)


def test_bad_masks_are_refused():
    with pytest.raises(ValueError, match="does not broadcast"):
        check_mask(torch.ones(3, 5, dtype=torch.bool), (2, 3, 4))
    with pytest.raises(TypeError, match="must be bool"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"mask is a float mask holding \+inf"):
        masked_softmax(torch.randn(2, 3), torch.tensor([0.0, math.inf, 0.0]))
    with pytest.raises(ValueError, match="mask is a float mask holding NaN"):
        check_mask(torch.tensor([0.0, math.nan, -math.inf]), (2, 3))
    check_mask(torch.tensor([0.5, -math.inf, -2.0]), (2, 3))  # biases and -inf are fine
    with pytest.raises(TypeError, match="scores must be a floating-point tensor, got dtype torch.int64"):
        masked_softmax(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"mask 1 must be bool .*torch.int64"):
        combine_masks(torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"mask must be bool .*torch.uint8"):
        to_nn_mha_mask(torch.ones(3, dtype=torch.uint8))  # ~ on integers would silently give -2, -1, ...
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        as_additive(torch.ones(3, dtype=torch.bool), torch.long)


def test_refused_torch_names_explain_the_convention():
    @refuse_torch_mask_names(key_padding_mask="key_keep", tgt_mask=None)
    def attend(x, *, key_keep=None):
        return key_keep

    assert attend(1, key_keep="ok") == "ok"
    with pytest.raises(TypeError, match=r"attend\(\) got key_padding_mask=.*True means \*blocked\*.*pass key_keep="):
        attend(1, key_padding_mask=torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match="got tgt_mask=.*this function has no such argument"):
        attend(1, tgt_mask=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'other'"):
        attend(1, other=2)  # any other wrong name is Python's own error
