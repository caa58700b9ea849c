"""The course mask convention and the NaN-free masked softmax."""

import pytest
import torch

from attnlab.masks import (
    as_additive,
    causal_mask,
    check_mask,
    combine_masks,
    masked_softmax,
    padding_mask,
    to_nn_mha_mask,
)


def test_padding_and_causal_masks():
    assert padding_mask(torch.tensor([2, 0, 3])).tolist() == [
        [True, True, False],
        [False, False, False],
        [True, True, True],
    ]
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # queries aligned to the end of a longer key sequence (cache)
    assert causal_mask(1, 4).tolist() == [[True, True, True, True]]
    with pytest.raises(ValueError, match=r"shape \(B,\)"):
        padding_mask(torch.tensor([[1]]))
    with pytest.raises(ValueError, match="max_len=2"):
        padding_mask(torch.tensor([3]), max_len=2)


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


def test_combine_and_convert():
    pad = padding_mask(torch.tensor([2, 3]))[:, None, :]  # (B, 1, S)
    both = combine_masks(pad, causal_mask(3), None)  # (B, L, S)
    assert both.shape == (2, 3, 3) and both[0, 2].tolist() == [True, True, False]
    mixed = combine_masks(pad, torch.zeros(3, 3))
    assert mixed.dtype == torch.float32 and torch.isneginf(mixed[0, :, 2]).all()
    assert combine_masks(None, None) is None
    assert to_nn_mha_mask(torch.tensor([True, False])).tolist() == [False, True]


def test_bad_masks_are_refused():
    with pytest.raises(ValueError, match="does not broadcast"):
        check_mask(torch.ones(3, 5, dtype=torch.bool), (2, 3, 4))
    with pytest.raises(TypeError, match="must be bool"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long))
