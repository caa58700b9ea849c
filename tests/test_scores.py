"""Score functions: each kind against a hand computation, local windows, bad input."""

import math

import pytest
import torch

from attnlab.scores import SCORE_KINDS, AttentionScore, LocalPosition, attend, local_window_mask


@pytest.fixture
def qk():
    torch.manual_seed(0)
    return torch.randn(3, 4), torch.randn(3, 5, 4)  # (B, Q), (B, S, K)


def test_dot_and_scaled_dot_by_hand(qk):
    q, k = qk
    dot = AttentionScore("dot", 4, 4)(q, k)
    expected = torch.stack([k[b] @ q[b] for b in range(3)])  # (B, S)
    torch.testing.assert_close(dot, expected)
    torch.testing.assert_close(AttentionScore("scaled_dot", 4, 4)(q, k), expected / math.sqrt(4))


def test_general_by_hand(qk):
    q, k = qk
    score = AttentionScore("general", 4, 4)
    W = score.W.weight  # (Q, K)
    expected = torch.stack([torch.stack([q[b] @ W @ k[b, j] for j in range(5)]) for b in range(3)])
    torch.testing.assert_close(score(q, k), expected)


def test_concat_is_bahdanau_additive_by_hand(qk):
    q, k = qk
    score = AttentionScore("additive", 4, 4, attn_dim=6)
    assert score.kind == "concat"
    # v^T tanh(W [q; h_j] + b) with W = [W_q | W_h]
    W = torch.cat([score.W_q.weight, score.W_h.weight], dim=1)  # (A, Q+K)
    b, v = score.W_h.bias, score.v.weight.squeeze(0)
    expected = torch.stack(
        [torch.stack([v @ torch.tanh(W @ torch.cat([q[i], k[i, j]]) + b) for j in range(5)]) for i in range(3)]
    )
    torch.testing.assert_close(score(q, k), expected)
    # precomputed keys give the same scores (the enc_att trick)
    torch.testing.assert_close(score(q, k, score.prepare(k)), expected)


def test_location_ignores_keys_and_truncates(qk):
    q, k = qk
    score = AttentionScore("location", 4, 4, max_len=8)
    out = score(q, k)
    torch.testing.assert_close(out, score.W(q)[:, :5])
    torch.testing.assert_close(score(q, torch.zeros_like(k)), out)
    with pytest.raises(ValueError, match="max_len=8"):
        score(q, torch.randn(3, 9, 4))


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_every_kind_shapes_and_gradients(kind, qk):
    q, k = qk
    q = q.clone().requires_grad_()
    s = AttentionScore(kind, 4, 4)(q, k)
    assert s.shape == (3, 5)
    ctx, w = attend(s, k, torch.ones(3, 5, dtype=torch.bool))
    ctx.sum().backward()
    assert torch.isfinite(q.grad).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(3))


def test_attend_masks_padding_exactly():
    scores = torch.randn(2, 4)
    values = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    ctx, w = attend(scores, values, mask)
    assert (w[0, 2:] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2))
    torch.testing.assert_close(ctx[0], w[0, :2] @ values[0, :2])


def test_mismatched_sizes_give_clear_errors(qk):
    q, k = qk
    with pytest.raises(ValueError, match="query_dim == key_dim"):
        AttentionScore("dot", 4, 6)
    with pytest.raises(ValueError, match=r"query must be \(B, Q=4\)"):
        AttentionScore("general", 4, 4)(torch.randn(3, 5), k)
    with pytest.raises(ValueError, match=r"keys must be \(B=3, S, K=4\)"):
        AttentionScore("concat", 4, 4)(q, torch.randn(3, 5, 7))
    with pytest.raises(ValueError, match="not a score"):
        AttentionScore("cosine", 4, 4)


def test_local_window_mask():
    m = local_window_mask(torch.tensor([0.0, 4.0, 2.5]), S=6, D=1)
    assert m.tolist() == [
        [True, True, False, False, False, False],
        [False, False, False, True, True, True],
        [False, False, True, True, False, False],
    ]
    with pytest.raises(ValueError, match="D must be >= 0"):
        local_window_mask(torch.tensor([1.0]), 4, -1)


def test_local_position_is_inside_the_sentence():
    torch.manual_seed(0)
    pos = LocalPosition(4, 8)(torch.randn(5, 4) * 10, torch.tensor([1, 3, 7, 9, 2]))
    assert (pos >= 0).all() and (pos <= torch.tensor([0, 2, 6, 8, 1])).all()
