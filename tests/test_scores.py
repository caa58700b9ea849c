"""Score functions: each kind against a hand computation, attend(), local windows, bad input.

The one home of the :class:`attnlab.core.scores.AttentionScore` tests (the model-level Luong tests
live in ``test_luong.py``).
"""

import math

import pytest
import torch

from attnlab.core.scores import SCORE_KINDS, AttentionScore, LocalPosition, attend, local_window_mask


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


def test_general_by_hand_with_different_query_and_key_sizes():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3), torch.randn(2, 4, 5)  # Q = 3, K = 5
    score = AttentionScore("general", 3, 5)
    W = score.W.weight  # (Q, K)
    expected = torch.stack([torch.stack([q[b] @ W @ k[b, j] for j in range(4)]) for b in range(2)])
    torch.testing.assert_close(score(q, k), expected)
    # precomputed keys give the same scores
    torch.testing.assert_close(score(q, k, score.prepare(k)), expected)


def test_concat_is_bahdanau_additive_by_hand_with_different_sizes():
    torch.manual_seed(0)
    q, k = torch.randn(3, 4), torch.randn(3, 5, 6)  # Q = 4, K = 6
    score = AttentionScore("additive", 4, 6, attn_dim=7)
    assert score.kind == "concat" and score.v.in_features == 7
    # v^T tanh(W [q; h_j] + b) with W = [W_q | W_h]
    W = torch.cat([score.W_q.weight, score.W_h.weight], dim=1)  # (A, Q+K)
    b, v = score.W_h.bias, score.v.weight.squeeze(0)
    expected = torch.stack(
        [torch.stack([v @ torch.tanh(W @ torch.cat([q[i], k[i, j]]) + b) for j in range(5)]) for i in range(3)]
    )
    torch.testing.assert_close(score(q, k), expected)
    # precomputed keys give the same scores (the enc_att trick)
    torch.testing.assert_close(score(q, k, score.prepare(k)), expected)
    assert AttentionScore("concat", 4, 6).v.in_features == 6  # attn_dim defaults to key_dim


def test_location_ignores_keys_and_truncates(qk):
    q, k = qk
    score = AttentionScore("location", 4, 4, max_len=8)
    out = score(q, k)
    torch.testing.assert_close(out, score.W(q)[:, :5])
    torch.testing.assert_close(score(q, torch.zeros_like(k)), out)
    with pytest.raises(ValueError, match="max_len=8, got S=9"):
        score(q, torch.randn(3, 9, 4))


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_every_kind_shapes_and_gradients(kind, qk):
    q, k = qk
    q = q.clone().requires_grad_()
    s = AttentionScore(kind, 4, 4)(q, k)
    assert s.shape == (3, 5)
    ctx, w = attend(s, k, torch.ones(3, 5, dtype=torch.bool))
    ctx.sum().backward()
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0
    torch.testing.assert_close(w.sum(-1), torch.ones(3))


def test_attend_masks_padding_exactly():
    scores = torch.randn(2, 4)
    values = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    ctx, w = attend(scores, values, mask)
    assert (w[0, 2:] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2))
    torch.testing.assert_close(ctx[0], w[0, :2] @ values[0, :2])


def test_attend_checks_values_against_scores():
    scores, values = torch.randn(2, 4), torch.randn(2, 4, 3)
    with pytest.raises(ValueError, match=r"values must be \(B, S, K\) with the scores' \(B, S\) = \(2, 4\).*\(2, 5, 3\)"):
        attend(scores, torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match=r"values must be \(B, S, K\), got shape \(2, 4\)"):
        attend(scores, torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"scores must be \(B, S\), got shape \(2, 1, 4\)"):
        attend(scores[:, None], values)
    with pytest.raises(TypeError, match=r"values \(torch.float64\) and scores \(torch.float32\) must share one dtype"):
        attend(scores, values.double())
    with pytest.raises(TypeError, match="scores must be a floating-point tensor, got dtype torch.int64"):
        attend(scores.long(), values)
    with pytest.raises(ValueError, match=r"mask has shape \(2, 3\), which does not broadcast"):
        attend(scores, values, torch.ones(2, 3, dtype=torch.bool))


@pytest.mark.parametrize("kind", ["dot", "scaled_dot"])
def test_parameter_free_scores_refuse_mismatched_sizes(kind):
    with pytest.raises(ValueError, match=rf"the '{kind}' score needs query_dim == key_dim, got query_dim=4, key_dim=6"):
        AttentionScore(kind, 4, 6)


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_wrong_query_or_key_width_at_call_time(kind):
    score = AttentionScore(kind, 4, 4)
    with pytest.raises(ValueError, match=r"query must be \(B, Q=4\), got \(2, 6\)"):
        score(torch.randn(2, 6), torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"keys must be \(B=2, S, K=4\) to match the query, got \(2, 3, 6\)"):
        score(torch.randn(2, 4), torch.randn(2, 3, 6))
    with pytest.raises(TypeError, match="query must be a floating-point tensor"):
        score(torch.ones(2, 4, dtype=torch.long), torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"prepared must be \(B, S, \*\) = \(2, 3, \*\)"):
        score(torch.randn(2, 4), torch.randn(2, 3, 4), torch.randn(2, 2, 4))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(kind="cosine", query_dim=4, key_dim=4), ValueError, "not a score"),
        (dict(kind="general", query_dim=0, key_dim=4), ValueError, "query_dim must be >= 1, got 0"),
        (dict(kind="general", query_dim=4, key_dim=-2), ValueError, "key_dim must be >= 1, got -2"),
        (dict(kind="concat", query_dim=4, key_dim=4, attn_dim=0), ValueError, "attn_dim must be >= 1, got 0"),
        (dict(kind="location", query_dim=4, key_dim=4, max_len=0), ValueError, "max_len must be >= 1, got 0"),
        (dict(kind="general", query_dim=4.0, key_dim=4), TypeError, "query_dim must be an int, got float"),
    ],
)
def test_bad_sizes_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        AttentionScore(**kwargs)


def test_local_window_mask():
    m = local_window_mask(torch.tensor([0.0, 4.0, 2.5]), S=6, D=1)
    assert m.tolist() == [
        [True, True, False, False, False, False],
        [False, False, False, True, True, True],
        [False, False, True, True, False, False],
    ]
    with pytest.raises(ValueError, match="D must be >= 0, got -1"):
        local_window_mask(torch.tensor([1.0]), 4, -1)
    with pytest.raises(ValueError, match=r"center must be \(B,\), got shape \(1, 1\)"):
        local_window_mask(torch.tensor([[1.0]]), 4, 1)


def test_local_position_is_inside_the_sentence():
    torch.manual_seed(0)
    pos = LocalPosition(4, 8)(torch.randn(5, 4) * 10, torch.tensor([1, 3, 7, 9, 2]))
    assert (pos >= 0).all() and (pos <= torch.tensor([0, 2, 6, 8, 1])).all()
    with pytest.raises(ValueError, match="hidden must be >= 1, got 0"):
        LocalPosition(4, 0)
    with pytest.raises(ValueError, match=r"src_lengths must be \(B=5,\) like the query, got \(4,\)"):
        LocalPosition(4, 8)(torch.randn(5, 4), torch.tensor([1, 3, 7, 9]))
    with pytest.raises(ValueError, match=r"query must be \(B, Q=4\), got \(5, 3\)"):
        LocalPosition(4, 8)(torch.randn(5, 3), torch.tensor([1, 3, 7, 9, 2]))
