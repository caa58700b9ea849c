"""The fastai training toolkit: loss, metric, time budget, and a model that learns to copy."""

import time

import pytest
import torch
from fastai.learner import Learner

from attnlab.data import PAD
from attnlab.evaluate import evaluate_model
from attnlab.train import TimeBudget, masked_cross_entropy, token_accuracy


def test_masked_cross_entropy_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, PAD], [3, PAD, PAD]])
    manual = torch.stack(
        [-torch.log_softmax(logits[b, t], -1)[target[b, t]] for b, t in [(0, 0), (0, 1), (1, 0)]]
    ).mean()
    torch.testing.assert_close(masked_cross_entropy(logits, target), manual)
    # changing logits at padded positions changes nothing
    other = logits.clone()
    other[0, 2] += 100
    torch.testing.assert_close(masked_cross_entropy(other, target), manual)


def test_token_accuracy_ignores_padding():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 1] = logits[0, 1, 0] = logits[0, 2, 3] = 1
    target = torch.tensor([[1, 2, PAD]])
    assert token_accuracy(logits, target).item() == 0.5


def test_loss_shape_errors():
    with pytest.raises(ValueError, match=r"expected logits \(B, T, V\)"):
        masked_cross_entropy(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_time_budget_stops_cleanly_and_schedules_by_time(copy_trained):
    *_, learn, stats = copy_trained
    assert isinstance(learn, Learner)
    assert 9.5 <= stats.seconds <= 13, stats
    budget = next(cb for cb in learn.cbs if isinstance(cb, TimeBudget))
    assert budget.stopped_early
    # one-cycle went through warm-up and annealing inside the budget
    lrs = learn.recorder.lrs
    peak = max(range(len(lrs)), key=lrs.__getitem__)
    assert 0.1 * len(lrs) < peak < 0.45 * len(lrs)
    assert lrs[-1] < 0.05 * lrs[peak]
    assert stats.tokens > 0 and stats.tokens_per_second > 0


def test_tiny_model_learns_the_copy_task(copy_trained):
    model, splits, src_vocab, tgt_vocab, _, _ = copy_trained
    res = evaluate_model(model, splits.test, src_vocab, tgt_vocab)
    assert res["exact_match"] >= 0.9, res
    assert res["bleu"] >= 90, res
    # attention learns the diagonal: the gold alignment of copying
    assert res["align_all"] >= 0.45, res  # chance is about 0.2 (sentences of 3-7 tokens + <eos>)


def test_time_budget_rejects_nonsense():
    with pytest.raises(ValueError, match="seconds must be positive"):
        TimeBudget(0)


def test_budget_is_wall_clock_not_epochs():
    cb = TimeBudget(0.05, schedule=False)
    cb.elapsed, cb._t0 = 0.0, time.perf_counter()
    time.sleep(0.06)
    assert cb._now() >= 0.05
