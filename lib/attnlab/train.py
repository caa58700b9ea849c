"""Training toolkit: everything goes through a fastai ``Learner``.

What the course adds to fastai is small and lives here:

* :func:`masked_cross_entropy` -- cross-entropy that ignores ``<pad>`` targets (optional label
  smoothing);
* :func:`token_accuracy` -- share of non-pad target tokens predicted right (a fastai metric);
* :class:`Budget` -- a callback that stops training cleanly after N optimiser steps (or N
  seconds) **and** drives fastai's one-cycle schedule by that budget instead of by epochs, so a
  lesson that trains for 1,000 steps gets a full warm-up and annealing inside those steps;
* :class:`TokenCounter` -- counts target tokens seen, for tokens/second;
* :class:`LossCurve` -- every N steps, the mean training loss, the validation loss and the
  learning rate (what a learner plots after training);
* :class:`StepProgress` -- a progress bar in the budget's own unit (steps of the total);
* :func:`fit_budget` -- builds the Learner (masked loss, metric, gradient clipping, one-cycle)
  and trains to a step (or time) budget, returning the learner and a :class:`TrainStats`.

Shape legend
------------
B  batch size
T  target length
V  target vocabulary size
"""

from __future__ import annotations

import math
import numbers
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import fastai.callback.schedule  # noqa: F401  (patches Learner.fit_one_cycle)
import numpy as np
import torch
import torch.nn.functional as F
from fastai.callback.core import Callback, CancelFitException
from fastai.callback.training import GradientClip
from fastai.learner import Learner
from fastai.torch_core import set_seed

from .checks import check_float_tensor, check_positive_int, check_probability, check_token_ids
from .vocab import PAD

__all__ = [
    "masked_cross_entropy",
    "MaskedCrossEntropy",
    "token_accuracy",
    "Budget",
    "TokenCounter",
    "AuxLoss",
    "WeightSnapshots",
    "LossCurve",
    "StepProgress",
    "curve_every_for",
    "smoothed_loss_floor",
    "TrainStats",
    "fit_budget",
    "set_seed",
]


def _check_logits(logits: torch.Tensor, target: torch.Tensor) -> None:
    """``logits (B, T, V)`` floats and ``target (B, T)`` integer ids in ``[0, V)`` on the same device."""
    check_float_tensor("logits", logits, dims=3, shape_text="(B, T, V)")
    check_token_ids("target", target, device=logits.device, min_length=None)
    if target.shape != logits.shape[:2]:
        raise ValueError(
            f"target must be (B, T) = {tuple(logits.shape[:2])} to match logits {tuple(logits.shape)}, "
            f"got shape {tuple(target.shape)}"
        )
    check_token_ids("target", target, vocab_size=logits.shape[2], min_length=None)


def masked_cross_entropy(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over non-pad target tokens.

    Args:
        logits: ``(B, T, V)`` floats.
        target: ``(B, T)`` integer ids in ``[0, V)``, ``PAD`` where there is no token.
        label_smoothing: fraction in ``[0, 1)`` of probability mass spread over the vocabulary.

    Returns:
        Scalar loss (NaN when every target is ``PAD``: there is nothing to average).

    Raises:
        TypeError: non-float logits, non-integer target, ``label_smoothing`` not a number.
        ValueError: wrong shapes, target ids outside the vocabulary or on another device,
            ``label_smoothing`` outside ``[0, 1)``.
    """
    label_smoothing = check_probability("label_smoothing", label_smoothing)
    _check_logits(logits, target)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), target.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


def smoothed_loss_floor(vocab_size: int, label_smoothing: float) -> float:
    """The lowest value :func:`masked_cross_entropy` can reach with label smoothing: a perfect model's loss.

    The smoothed target puts ``1 - e + e / V`` on the right word and ``e / V`` on each other word;
    the cross-entropy of any prediction against it is at least the target's own entropy, reached
    when the prediction equals the target. With ``e = 0`` that is 0.

    Args:
        vocab_size: ``V``, an int >= 2.
        label_smoothing: ``e`` in ``[0, 1)``.

    Returns:
        The entropy of the smoothed target, in nats.
    """
    v = check_positive_int("vocab_size", vocab_size)
    if v < 2:
        raise ValueError(f"vocab_size must be >= 2, got {v}")
    e = check_probability("label_smoothing", label_smoothing)
    right, other = 1 - e + e / v, e / v
    return -(right * math.log(right)) - ((v - 1) * other * math.log(other) if e > 0 else 0.0)


class MaskedCrossEntropy:
    """Picklable loss object for fastai (``Learner(loss_func=MaskedCrossEntropy(0.1))``)."""

    def __init__(self, label_smoothing: float = 0.0):
        self.label_smoothing = check_probability("label_smoothing", label_smoothing)

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return masked_cross_entropy(logits, target, self.label_smoothing)

    def __repr__(self) -> str:
        return f"MaskedCrossEntropy(label_smoothing={self.label_smoothing})"


def token_accuracy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Share of non-pad target positions where ``argmax(logits)`` is the target.

    Args:
        logits: ``(B, T, V)`` floats; target: ``(B, T)`` integer ids in ``[0, V)``.

    Returns:
        Scalar tensor in ``[0, 1]`` (0 when every target is ``PAD``).
    """
    _check_logits(logits, target)
    keep = target != PAD  # (B, T)
    correct = (logits.argmax(-1) == target) & keep  # (B, T)
    return correct.sum().float() / keep.sum().clamp(min=1).float()


class Budget(Callback):
    """Stop training after ``steps`` optimiser steps or ``seconds`` of training, and schedule by it.

    Exactly one of the two is given. A **step** budget is what the course uses: the same code on
    the same data gives the same run on any machine, however busy. A **time** budget buys fewer
    steps on a slower or busier machine; it is kept for quick experiments.

    Validation time is not counted. With ``schedule=True`` the learner's ``pct_train`` (what
    fastai's ``ParamScheduler`` reads) is set before every batch to the share of the budget used
    (``steps_done / steps`` or ``elapsed / seconds``), so ``fit_one_cycle`` completes its whole
    cycle -- warm-up and annealing -- within the budget, whatever the number of epochs.

    Args:
        seconds: a training-time budget, a finite number > 0.
        steps: a budget of optimiser steps, an int >= 1.
        schedule: drive ``pct_train`` by the budget.
        clock: the time source, in seconds (tests pass a fake one).
    """

    order = 50  # after TrainEvalCallback (-10) updates pct_train, before ParamScheduler (60) reads it

    def __init__(
        self,
        seconds: float | None = None,
        *,
        steps: int | None = None,
        schedule: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ):
        if (seconds is None) == (steps is None):
            raise ValueError(f"give exactly one of seconds and steps, got seconds={seconds!r}, steps={steps!r}")
        if seconds is not None:
            if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
                raise TypeError(f"seconds must be a number, got {type(seconds).__name__} {seconds!r}")
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"seconds must be positive and finite, got {seconds}")
            seconds = float(seconds)
        else:
            steps = check_positive_int("steps", steps)
        self.seconds, self.steps, self.schedule, self.clock = seconds, steps, schedule, clock

    def before_fit(self):
        self.elapsed, self.done, self.stopped_early = 0.0, 0, False

    def before_train(self):
        self._t0 = self.clock()

    def after_train(self):
        self.elapsed += self.clock() - self._t0

    def _used(self) -> float:
        """Share of the budget used so far (may exceed 1 by the last step)."""
        if self.steps is not None:
            return self.done / self.steps
        return (self.elapsed + self.clock() - self._t0) / self.seconds

    def before_batch(self):
        if self.training and self.schedule:
            self.learn.pct_train = min(self._used(), 1.0)

    def after_batch(self):
        if not self.training:
            return
        self.done += 1
        if self._used() >= 1.0:
            self.elapsed += self.clock() - self._t0
            self._t0 = self.clock()
            self.stopped_early = True
            raise CancelFitException()


class TokenCounter(Callback):
    """Count non-pad target tokens and batches seen in training."""

    order = 49  # before Budget (50): the batch that ends the budget raises in Budget.after_batch

    def before_fit(self):
        self.tokens, self.batches = 0, 0

    def after_batch(self):
        if self.training:
            self.tokens += int((self.yb[0] != PAD).sum())
            self.batches += 1


class WeightSnapshots(Callback):
    """Copy the model's weights every ``every`` training steps (for learning curves).

    The copies live on the CPU in ``weights`` (``{step: state_dict}``); a run of 1,000 steps of a
    150k-parameter model with ``every=100`` keeps 10 copies, about 6 MB.

    Args:
        every: steps between two copies, an int >= 1.
    """

    order = 48  # before Budget (50), so the step that ends the budget is copied too

    def __init__(self, every: int):
        self.every = check_positive_int("every", every)

    def before_fit(self):
        self.weights, self.steps_done = {}, 0

    def after_batch(self):
        if not self.training:
            return
        self.steps_done += 1
        if self.steps_done % self.every == 0:
            self.weights[self.steps_done] = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}


class LossCurve(Callback):
    """Every ``every`` training steps, record the training loss, the validation loss and the learning rate.

    A point is ``{"step", "train_loss", "valid_loss", "lr"}``: ``train_loss`` is the mean loss of
    the ``every`` steps since the previous point, ``valid_loss`` the token-weighted loss on the
    whole validation loader (the learner's own loss function, so label smoothing included), ``lr``
    the learning rate of the last of those steps. The step that ends training always gets a point.

    Measuring changes nothing in training: the model is put back in training mode and the random
    states (PyTorch, NumPy, Python) are restored after each validation pass, so a run with the
    curve is the same run, batch for batch, as one without (a test checks the weights).

    Args:
        every: steps between two points, an int >= 1.
    """

    order = 47  # before WeightSnapshots (48) and Budget (50): the step that ends the budget is seen

    def __init__(self, every: int):
        self.every = check_positive_int("every", every)

    def before_fit(self):
        self.points, self.steps_done, self._losses = [], 0, []

    def after_batch(self):
        if not self.training:
            return
        self.steps_done += 1
        self._losses.append(float(self.learn.loss.detach()))
        if self.steps_done % self.every == 0:
            self._record()

    def after_fit(self):
        if self._losses:  # the budget ended between two points
            self._record()

    def _record(self):
        lr = float(self.learn.opt.hypers[-1]["lr"])
        self.points.append(
            {
                "step": self.steps_done,
                "train_loss": round(sum(self._losses) / len(self._losses), 4),
                "valid_loss": round(self._valid_loss(), 4),
                "lr": float(f"{lr:.4g}"),
            }
        )
        self._losses = []

    def _valid_loss(self) -> float:
        model, was_training = self.learn.model, self.learn.model.training
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        py_state, np_state = random.getstate(), np.random.get_state()
        total, tokens = 0.0, 0
        try:
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                model.eval()
                for *inputs, tgt_out in self.learn.dls.valid:  # inputs: src, tgt_in (and a gold attention)
                    n = int((tgt_out != PAD).sum())
                    total += float(self.learn.loss_func(model(*inputs), tgt_out)) * n
                    tokens += n
        finally:
            model.train(was_training)
            random.setstate(py_state)
            np.random.set_state(np_state)
        return total / max(tokens, 1)


def curve_every_for(steps: int | None, points: int = 20) -> int:
    """Steps between two :class:`LossCurve` points so that a run of ``steps`` has about ``points``.

    Args:
        steps: the step budget (None for a time budget: every 50 steps).
        points: the number of points wanted, an int >= 1.

    Returns:
        An int >= 1.
    """
    check_positive_int("points", points)
    if steps is None:
        return 50
    return max(1, check_positive_int("steps", steps) // points)


class StepProgress(Callback):
    """A progress bar in the unit of the budget: ``steps done / steps`` (or percent of a time budget).

    fastai's own bars count epochs and the batches of an epoch, which a step budget cuts short (the
    epoch bar stays at 0 %, the batch bar shows the ETA of an epoch that never ends); this bar
    counts what the budget counts and shows the running training loss.

    Args:
        budget: the run's :class:`Budget`.
    """

    order = 51  # after Budget (50) has counted the step

    def __init__(self, budget: Budget):
        self.budget = budget

    def before_fit(self):
        from fastprogress.fastprogress import progress_bar

        total = self.budget.steps if self.budget.steps is not None else 100
        self.pbar = progress_bar(range(total), leave=True)
        self.pbar.update(0)

    def after_batch(self):
        if not self.training:
            return
        b = self.budget
        done = b.done if b.steps is not None else min(100, int(100 * b._used()))
        self.pbar.comment = f"train loss {float(self.learn.smooth_loss):.3f}"
        self.pbar.update(done)

    def after_cancel_fit(self):
        # Budget ends the fit with CancelFitException after the last step's after_batch; the bar
        # was updated for that step only if this callback ran first, so finish it here.
        total = self.pbar.total
        if self.pbar.last_v is not None:
            self.pbar.update(total)


@dataclass
class TrainStats:
    """What a training run measured: seconds, steps, target tokens seen and their rate, the loss curve."""

    seconds: float
    steps: int
    tokens: int
    tokens_per_second: float
    final_loss: float
    profile: str = "cpu"
    loss_curve: list[dict] = field(default_factory=list)  # LossCurve points; empty without loss_every

    def to_dict(self) -> dict:
        return asdict(self)


class AuxLoss(Callback):
    """Adds the model's ``aux_loss`` (e.g. a coverage or alignment loss left by its forward) to the
    training loss before the backward pass; does nothing for a model that leaves none."""

    order = 1

    def after_loss(self):
        aux = getattr(self.learn.model, "aux_loss", None)
        if self.training and aux is not None:
            self.learn.loss_grad = self.learn.loss_grad + aux
            self.learn.loss = self.learn.loss_grad.clone()


def fit_budget(
    model: torch.nn.Module,
    dls,
    *,
    steps: int | None = None,
    seconds: float | None = None,
    lr: float = 3e-3,
    wd: float = 0.0,
    clip: float = 1.0,
    label_smoothing: float = 0.0,
    pct_start: float = 0.25,
    max_epochs: int = 1000,
    progress: bool = True,
    loss_every: int | None = None,
    profile: str = "cpu",
    cbs=(),
) -> tuple[Learner, TrainStats]:
    """Train ``model`` on ``dls`` with fastai's one-cycle policy for ``steps`` steps (or ``seconds``).

    Args:
        model: called as ``model(src, tgt_in)`` and returning ``(B, T, V)`` logits.
        dls: fastai ``DataLoaders`` yielding ``(src, tgt_in, tgt_out)`` with ``n_inp == 2``.
        steps: budget of optimiser steps (reproducible: the course's default).
        seconds: training-time budget instead (validation excluded); give exactly one of the two.
        lr: peak learning rate of the one-cycle schedule.
        wd: weight decay.
        clip: gradient-norm clipping threshold.
        label_smoothing: see :func:`masked_cross_entropy`.
        pct_start: warm-up share of the budget.
        max_epochs: upper bound on epochs (the budget ends training first unless it is very long).
        progress: show a progress bar of the budget (:class:`StepProgress`); fastai's epoch bars
            and epoch table are never shown, since a step budget ends inside an epoch.
        loss_every: record a :class:`LossCurve` point every this many steps (``stats.loss_curve``).
        profile: recorded in the stats.
        cbs: extra fastai callbacks.

    Returns:
        ``(learner, stats)``.
    """
    check_positive_int("max_epochs", max_epochs)
    budget, counter = Budget(seconds, steps=steps), TokenCounter()
    curve = LossCurve(loss_every) if loss_every is not None else None
    extra = [c for c in (curve, StepProgress(budget) if progress else None) if c is not None]
    learn = Learner(
        dls,
        model,
        loss_func=MaskedCrossEntropy(label_smoothing),
        metrics=[token_accuracy],
        cbs=[GradientClip(clip), budget, counter, AuxLoss(), *extra, *cbs],
    )
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
        loss_curve=curve.points if curve is not None else [],
    )
    return learn, stats
