"""Training toolkit: everything goes through a fastai ``Learner``.

What the course adds to fastai is small and lives here:

* :func:`masked_cross_entropy` -- cross-entropy that ignores ``<pad>`` targets (optional label
  smoothing);
* :func:`token_accuracy` -- share of non-pad target tokens predicted right (a fastai metric);
* :class:`TimeBudget` -- a callback that stops training cleanly after N seconds **and** drives
  fastai's one-cycle schedule by elapsed time instead of by iterations, so a CPU lesson that
  trains "for 120 s" still gets a full warm-up and annealing inside those 120 s;
* :class:`TokenCounter` -- counts target tokens seen, for tokens/second;
* :func:`fit_budget` -- builds the Learner (masked loss, metric, gradient clipping, one-cycle)
  and trains to a time budget, returning the learner and a :class:`TrainStats`.

Shape legend
------------
B  batch size
T  target length
V  target vocabulary size
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import fastai.callback.schedule  # noqa: F401  (patches Learner.fit_one_cycle)
import torch
import torch.nn.functional as F
from fastai.callback.core import Callback, CancelFitException
from fastai.callback.training import GradientClip
from fastai.learner import Learner
from fastai.torch_core import set_seed

from .data import PAD

__all__ = [
    "masked_cross_entropy",
    "MaskedCrossEntropy",
    "token_accuracy",
    "TimeBudget",
    "TokenCounter",
    "TrainStats",
    "fit_budget",
    "set_seed",
]


def _check_logits(logits: torch.Tensor, target: torch.Tensor) -> None:
    if logits.dim() != 3 or target.dim() != 2 or logits.shape[:2] != target.shape:
        raise ValueError(
            f"expected logits (B, T, V) and target (B, T) with the same B, T; "
            f"got logits {tuple(logits.shape)} and target {tuple(target.shape)}"
        )


def masked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over non-pad target tokens.

    Args:
        logits: ``(B, T, V)``.
        target: ``(B, T)`` ids, ``PAD`` where there is no token.
        label_smoothing: fraction of probability mass spread over the vocabulary.

    Returns:
        Scalar loss.
    """
    _check_logits(logits, target)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), target.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


class MaskedCrossEntropy:
    """Picklable loss object for fastai (``Learner(loss_func=MaskedCrossEntropy(0.1))``)."""

    def __init__(self, label_smoothing: float = 0.0):
        self.label_smoothing = label_smoothing

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return masked_cross_entropy(logits, target, self.label_smoothing)

    def __repr__(self) -> str:
        return f"MaskedCrossEntropy(label_smoothing={self.label_smoothing})"


def token_accuracy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Share of non-pad target positions where ``argmax(logits)`` is the target.

    Args:
        logits: ``(B, T, V)``; target: ``(B, T)``.

    Returns:
        Scalar tensor in ``[0, 1]``.
    """
    _check_logits(logits, target)
    keep = target != PAD  # (B, T)
    correct = (logits.argmax(-1) == target) & keep  # (B, T)
    return correct.sum().float() / keep.sum().clamp(min=1).float()


class TimeBudget(Callback):
    """Stop training after ``seconds`` of training time; optionally schedule by elapsed time.

    Validation time is not counted. With ``schedule=True`` the learner's ``pct_train`` (what
    fastai's ``ParamScheduler`` reads) is set to ``elapsed / seconds`` before every batch, so
    ``fit_one_cycle`` completes its whole cycle within the budget.
    """

    order = 50  # after TrainEvalCallback (-10) updates pct_train, before ParamScheduler (60) reads it

    def __init__(self, seconds: float, schedule: bool = True):
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        self.seconds, self.schedule = float(seconds), schedule

    def before_fit(self):
        self.elapsed, self.stopped_early = 0.0, False

    def before_train(self):
        self._t0 = time.perf_counter()

    def after_train(self):
        self.elapsed += time.perf_counter() - self._t0

    def _now(self) -> float:
        return self.elapsed + time.perf_counter() - self._t0

    def before_batch(self):
        if self.training and self.schedule:
            self.learn.pct_train = min(self._now() / self.seconds, 1.0)

    def after_batch(self):
        if self.training and self._now() >= self.seconds:
            self.elapsed += time.perf_counter() - self._t0
            self._t0 = time.perf_counter()
            self.stopped_early = True
            raise CancelFitException()


class TokenCounter(Callback):
    """Count non-pad target tokens and batches seen in training."""

    order = 51

    def before_fit(self):
        self.tokens, self.batches = 0, 0

    def after_batch(self):
        if self.training:
            self.tokens += int((self.yb[0] != PAD).sum())
            self.batches += 1


@dataclass
class TrainStats:
    """What a training run measured: seconds, steps, target tokens seen and their rate."""

    seconds: float
    steps: int
    tokens: int
    tokens_per_second: float
    final_loss: float
    profile: str = "cpu"

    def to_dict(self) -> dict:
        return asdict(self)


def fit_budget(
    model: torch.nn.Module,
    dls,
    *,
    seconds: float,
    lr: float = 3e-3,
    wd: float = 0.0,
    clip: float = 1.0,
    label_smoothing: float = 0.0,
    pct_start: float = 0.25,
    max_epochs: int = 1000,
    progress: bool = True,
    profile: str = "cpu",
    cbs=(),
) -> tuple[Learner, TrainStats]:
    """Train ``model`` on ``dls`` with fastai's one-cycle policy for ``seconds`` of training.

    Args:
        model: called as ``model(src, tgt_in)`` and returning ``(B, T, V)`` logits.
        dls: fastai ``DataLoaders`` yielding ``(src, tgt_in, tgt_out)`` with ``n_inp == 2``.
        seconds: training-time budget (validation excluded).
        lr: peak learning rate of the one-cycle schedule.
        wd: weight decay.
        clip: gradient-norm clipping threshold.
        label_smoothing: see :func:`masked_cross_entropy`.
        pct_start: warm-up share of the budget.
        max_epochs: upper bound on epochs (the budget usually ends training first).
        progress: show fastai's progress bars and epoch table.
        profile: recorded in the stats.
        cbs: extra fastai callbacks.

    Returns:
        ``(learner, stats)``.
    """
    budget, counter = TimeBudget(seconds), TokenCounter()
    learn = Learner(
        dls,
        model,
        loss_func=MaskedCrossEntropy(label_smoothing),
        metrics=[token_accuracy],
        cbs=[GradientClip(clip), budget, counter, *cbs],
    )
    if progress:
        learn.fit_one_cycle(max_epochs, lr, wd=wd, pct_start=pct_start)
    else:
        with learn.no_bar(), learn.no_logging():
            learn.fit_one_cycle(max_epochs, lr, wd=wd, pct_start=pct_start)
    spent = budget.elapsed
    final = float(learn.recorder.losses[-1]) if learn.recorder.losses else float("nan")
    stats = TrainStats(
        seconds=round(spent, 2),
        steps=counter.batches,
        tokens=counter.tokens,
        tokens_per_second=round(counter.tokens / max(spent, 1e-9), 1),
        final_loss=round(final, 4),
        profile=profile,
    )
    return learn, stats
