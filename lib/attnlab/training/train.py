"""Training toolkit: everything goes through a fastai ``Learner``.

What the course adds to fastai is small and lives here:

* :class:`MaskedCrossEntropy` -- :func:`attnlab.models.losses.masked_cross_entropy` (cross-entropy
  that ignores ``<pad>`` targets, optional label smoothing) as fastai's loss;
* :func:`token_accuracy` -- share of non-pad target tokens predicted right (a fastai metric);
* :class:`Budget` -- a callback that stops training cleanly after N optimiser steps (or N
  seconds) **and** drives fastai's one-cycle schedule by that budget instead of by epochs, so a
  lesson that trains for 1,000 steps gets a full warm-up and annealing inside those steps;
* :class:`TokenCounter` -- counts target tokens seen, for tokens/second;
* :class:`LossCurve` -- every N steps, the mean training loss, the validation loss and the
  learning rate (what a learner plots after training);
* :class:`StepProgress` -- a progress bar in the budget's own unit (steps of the total);
* :class:`GumbelAnnealing` -- lowers a Gumbel-softmax model's temperature from its config's
  ``temperature`` to ``temperature_final`` over the budget (added by :func:`fit_budget` itself);
* :class:`CoveragePhase` -- switches a ``coverage_loss_from`` model's coverage on for the budget's
  final phase (See et al. 2017); :class:`FertilityTrace` -- records a fertility model's predicted
  ``Phi`` over training (both added by :func:`fit_budget` itself);
* :func:`fit_budget` -- builds the Learner (masked loss, metric, gradient clipping, one-cycle)
  and trains to a step (or time) budget, returning the learner and a :class:`TrainStats`;
* the command line that trains any course model is :func:`attnlab.training.cli.main`
  (``python -m attnlab.training PRESET ...``; it calls :func:`attnlab.training.experiments.run`, the
  lessons' own code path).

Several processes
-----------------
Started by a launcher that sets ``WORLD_SIZE`` > 1 (``accelerate launch --num_processes N -m
attnlab.training.train ...``, or ``torchrun``), :func:`fit_budget` trains data-parallel through fastai's own
distributed support: it enters ``Learner.distrib_ctx``, which wraps the model in PyTorch's
``DistributedDataParallel`` through an Accelerate ``Accelerator`` (gradients averaged over the
processes after every backward pass) and every loader in fastai's ``DistributedDL``. Nothing of
the course launches processes or reduces gradients by hand.

* **Batches.** ``DistributedDL`` takes the index order of the course's seeded, length-bucketed
  ``SortedDL`` (the same on every process: it depends only on the seed and the epoch), pads it to
  a multiple of the number of processes and gives process ``r`` the ``r``-th contiguous slice,
  which the inner loader cuts into batches of ``bs``. So ``bs`` is the batch **per process**, the
  processes see disjoint examples, and one optimiser step uses ``bs * world_size`` examples (the
  global batch). To keep a preset's global batch on N processes, pass ``bs = preset bs / N``.
* **Budget.** A step budget counts optimiser steps, and every process makes the same number
  (each epoch gives every process the same number of batches). A time budget is refused: the
  processes would stop after different numbers of steps and wait for each other forever.
* **One writer.** Only rank 0 shows progress, evaluates, prints and writes files.
* **Loss.** Each process's loss is the mean over its own target tokens and DDP averages the
  processes' gradients, so a step weights each process's batch equally rather than each token:
  the same as one process on the global batch up to that weighting (a test measures the gap).
  The recorded training loss (:class:`LossCurve`, the recorder) is the mean over the processes.

Two fastai 2.8.12 details are handled here: ``DistributedDL`` broadcasts the index order as a
CUDA tensor (right for NCCL, impossible under the gloo backend of a CPU run) built from Python
lists (over a gigabyte per process for WMT's 36M pairs), so the loaders are wrapped beforehand by a
subclass that computes the same shards from one tensor broadcast on the backend's device; and on a
machine without a GPU the ``Accelerator`` is created with ``cpu=True`` (else Accelerate finds no
accelerator and silently trains each process alone).

With ``ATTNLAB_TRACE_DIR`` set, every process appends one JSON line per training step to
``$ATTNLAB_TRACE_DIR/trace-rank<r>.jsonl`` (:class:`BatchTrace`): the step, the dataset indices of
its batch, its loss and target tokens, and a sha256 of the weights after the step. The
distributed test reads them; they also answer "did the processes really stay in step?" on a
cluster.

Shape legend
------------
B  batch size
T  target length
V  target vocabulary size
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import numbers
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import fastai.callback.schedule  # noqa: F401  (patches Learner.fit_one_cycle)
import numpy as np
import torch
from fastai.callback.core import Callback, CancelFitException
from fastai.callback.training import GradientClip
from fastai.learner import Learner
from fastai.torch_core import num_distrib, rank_distrib, set_seed, to_detach

from attnlab.core.checks import check_positive_int, check_probability
from attnlab.data.vocab import PAD
from attnlab.models.losses import _check_logits, masked_cross_entropy
from attnlab.models.variants import annealed_temperature

__all__ = [
    "MaskedCrossEntropy",
    "token_accuracy",
    "Budget",
    "target_count",
    "TokenCounter",
    "AuxLoss",
    "GumbelAnnealing",
    "CoveragePhase",
    "FertilityTrace",
    "WeightSnapshots",
    "LossCurve",
    "StepProgress",
    "curve_every_for",
    "TrainStats",
    "fit_budget",
    "set_seed",
    "world_size",
    "rank",
    "is_main_process",
    "process_device",
    "main_process_first",
    "unwrap_model",
    "BatchTrace",
    "TRACE_VAR",
]

TRACE_VAR = "ATTNLAB_TRACE_DIR"


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


def target_count(target: torch.Tensor) -> int:
    """How many targets a batch holds: the non-pad tokens of ``(B, T)`` ids, every label of ``(B,)`` classes.

    A class label has no padding (class 0 is a class, not ``PAD``), so a 1-D target counts all
    its entries; what :class:`TokenCounter` and :class:`LossCurve` weight by.
    """
    if target.dim() == 1:
        return int(target.numel())
    return int((target != PAD).sum())


class TokenCounter(Callback):
    """Count the targets (non-pad tokens, or class labels: :func:`target_count`) and batches seen in training."""

    order = 49  # before Budget (50): the batch that ends the budget raises in Budget.after_batch

    def before_fit(self):
        self.tokens, self.batches = 0, 0

    def after_batch(self):
        if self.training:
            self.tokens += target_count(self.yb[0])
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
            state = unwrap_model(self.learn.model).state_dict()  # the module's own names, not DDP's "module."
            self.weights[self.steps_done] = {k: v.detach().cpu().clone() for k, v in state.items()}


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
        # fastai's to_detach gathers over the processes of a distributed run: the mean over all of them
        self._losses.append(float(to_detach(self.learn.loss.detach())))
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
        # The bare module on the whole validation set: in a distributed run every process computes
        # the same figure, and no collective call can leave the processes out of step.
        model = unwrap_model(self.learn.model)
        was_training = model.training
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        py_state, np_state = random.getstate(), np.random.get_state()
        total, tokens = 0.0, 0
        try:
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                model.eval()
                for *inputs, tgt_out in _unwrap_loader(self.learn.dls.valid):  # src, tgt_in (and gold attention)
                    n = target_count(tgt_out)
                    total += float(self.learn.loss_func(model(*inputs), tgt_out)) * n
                    tokens += n
        finally:
            model.train(was_training)
            random.setstate(py_state)
            np.random.set_state(np_state)
        return total / max(tokens, 1)


def curve_every_for(steps: int | None, points: int = 20) -> int:
    """Steps between two :class:`LossCurve` points so that a run of ``steps`` has about ``points``.

    Each point costs a pass over the whole validation split (about as much time as 20 training steps
    of the course's RNNs), so points are never closer than 50 steps unless the run would then get fewer
    than 4: a 1,000-step run gets 20 points (every 50), a 200-step run 4 (every 50), a 20-step run 4 (every 5).

    Args:
        steps: the step budget (None for a time budget: every 50 steps).
        points: the number of points wanted, an int >= 1.

    Returns:
        An int >= 1.
    """
    check_positive_int("points", points)
    if steps is None:
        return 50
    steps = check_positive_int("steps", steps)
    return max(1, steps // points, min(50, steps // 4))


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
    fertility_trace: list[dict] = field(default_factory=list)  # FertilityTrace points; empty without fertility

    def to_dict(self) -> dict:
        return asdict(self)


class AuxLoss(Callback):
    """Adds the model's ``aux_loss`` (e.g. a coverage or alignment loss left by its forward) to the
    training loss before the backward pass; does nothing for a model that leaves none."""

    order = 1

    def after_loss(self):
        aux = getattr(unwrap_model(self.learn.model), "aux_loss", None)  # DDP does not forward attributes
        if self.training and aux is not None:
            self.learn.loss_grad = self.learn.loss_grad + aux
            self.learn.loss = self.learn.loss_grad.clone()


class GumbelAnnealing(Callback):
    """Before every training batch, set ``model.temperature`` by the exponential schedule of the budget.

    ``tau = max(final, start exp(-r step))`` with ``start = config.temperature``, ``final =
    config.temperature_final`` and ``r`` such that the budget's last step trains at ``final``
    (:func:`attnlab.models.variants.annealed_temperature`; Jang et al. 2017). A time budget uses the
    share of its time spent instead of the step. The temperature is a plain attribute of the
    model, not a weight: checkpoints do not hold it, and a loaded model starts at ``start``
    again (eval mode takes the argmax and never reads it). :func:`fit_budget` adds this callback
    when the model's config sets ``temperature_final``.

    Args:
        budget: the run's :class:`Budget`.
    """

    order = 52  # any order: it reads Budget.done, which changes only after a batch

    def __init__(self, budget: Budget):
        self.budget = budget

    def before_batch(self):
        if not self.training:
            return
        model = unwrap_model(self.learn.model)
        c, b = model.config, self.budget
        if b.steps is not None:
            step, total = b.done, b.steps
        else:  # a time budget: the share of it used, as the step of a two-step schedule
            step, total = min(b._used(), 1.0), 2
        model.temperature = annealed_temperature(step, total, start=c.temperature, final=c.temperature_final)


class CoveragePhase(Callback):
    """Before every training batch, switch coverage on once ``config.coverage_loss_from`` of the budget is used.

    See et al. (2017) train without coverage and add the coverage vector and loss for a short final
    phase; ``model.coverage_phase`` (read by :class:`attnlab.models.rnn.Seq2SeqRNN`) is ``False``
    before it. After training it is left ``True`` (the trained model has its coverage). Added by
    :func:`fit_budget` when the model's config sets ``coverage_loss_from``.

    Args:
        budget: the run's :class:`Budget`.
    """

    order = 52

    def __init__(self, budget: Budget):
        self.budget = budget

    def before_batch(self):
        if self.training:
            model = unwrap_model(self.learn.model)
            model.coverage_phase = self.budget._used() >= model.config.coverage_loss_from

    def after_fit(self):
        unwrap_model(self.learn.model).coverage_phase = True


class FertilityTrace(Callback):
    """Every ``every`` training steps, quantiles of the fertility ``Phi`` predicted for the batch's real words.

    Points ``{"step", "p10", "median", "p90"}`` in :attr:`points` (what lesson 07 plots to diagnose
    a collapsing fertility). Added by :func:`fit_budget` when the model's config sets ``fertility``.

    Args:
        every: steps between points (>= 1).
    """

    order = 48  # before Budget (50), whose after_batch ends the fit at the budget's last step

    def __init__(self, every: int):
        self.every = check_positive_int("every", every)
        self.points: list[dict] = []

    def before_fit(self):
        self.points, self.steps_done = [], 0

    def after_batch(self):
        if not self.training:
            return
        self.steps_done += 1
        phi = getattr(unwrap_model(self.learn.model), "last_fertility", None)
        if phi is None or (self.steps_done % self.every and self.steps_done != 1):
            return
        q = torch.quantile(phi.float(), torch.tensor([0.1, 0.5, 0.9], device=phi.device)).tolist()
        point = {"step": self.steps_done, "p10": round(q[0], 4), "median": round(q[1], 4), "p90": round(q[2], 4)}
        self.points.append(point)


def world_size() -> int:
    """The number of training processes: ``WORLD_SIZE`` as the launcher set it (fastai reads the same), else 1.

    Raises:
        ValueError: ``WORLD_SIZE`` is not an integer.
    """
    try:
        return max(num_distrib(), 1)
    except ValueError:
        value = os.environ.get("WORLD_SIZE")
        raise ValueError(f"WORLD_SIZE={value!r} must be an integer (set by the launcher)") from None


def rank() -> int:
    """This process's rank (``RANK``, 0 without a launcher).

    Raises:
        ValueError: ``RANK`` is not an integer.
    """
    try:
        return rank_distrib()
    except ValueError:
        raise ValueError(f"RANK={os.environ.get('RANK')!r} must be an integer (set by the launcher)") from None


def is_main_process() -> bool:
    """True on rank 0, the one process of a distributed run that prints and writes files."""
    return rank() == 0


def process_device(device: str | torch.device) -> torch.device:
    """Where this process trains: ``device``, or its own GPU ``cuda:<LOCAL_RANK>`` in a distributed CUDA run."""
    device = torch.device(device)
    if device.type == "cuda" and world_size() > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The course model inside a ``DistributedDataParallel`` / ``DataParallel`` wrapper (or ``model`` itself)."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    while isinstance(model, (DistributedDataParallel, DataParallel)):
        model = model.module
    return model


def _unwrap_loader(dl):
    """The loader inside fastai's ``DistributedDL`` (or ``dl`` itself)."""
    from fastai.distributed import DistributedDL

    return dl.dl if isinstance(dl, DistributedDL) else dl


@functools.cache
def _distributed_dl():
    """fastai's ``DistributedDL`` made to work under gloo, and remembering what it served; built on first use."""
    import torch.distributed as dist
    from fastai.distributed import DistributedDL

    class CourseDistributedDL(DistributedDL):
        """``DistributedDL`` whose index broadcast uses the backend's device, which keeps the order
        in one tensor, and which keeps the indices this process was given in ``served`` (read by
        :class:`BatchTrace`).

        fastai 2.8.12 moves the index list to CUDA before broadcasting it (NCCL only takes CUDA
        tensors); gloo, the backend of a CPU run, takes CPU tensors. A test checks that the shards
        are fastai's own.
        """

        def get_idxs(self):
            # fastai's DistributedDL.get_idxs (rank 0's order broadcast to all, padded to a multiple
            # of the world size by repeating its start, rank r taking the r-th contiguous slice),
            # with the order kept in one int64 tensor instead of Python lists (WMT has 36M pairs)
            # and broadcast on the backend's device.
            idxs = torch.from_numpy(np.asarray(self.dl.get_idxs(), dtype=np.int64))  # (n,)
            device = "cuda" if dist.get_backend() == "nccl" else "cpu"
            idxs = idxs.to(device)
            dist.broadcast(idxs, 0)
            idxs = idxs.cpu()
            self.n = len(idxs)
            self.n_padded = math.ceil(self.n / self.world_size) * self.world_size
            if self.n_padded > self.n:
                idxs = torch.cat([idxs, idxs.repeat(self.n_padded // self.n)[: self.n_padded - self.n]])  # (n_padded,)
            per = self.n_padded // self.world_size
            self.served = idxs[self.rank * per : (self.rank + 1) * per].numpy()  # (n_padded / world_size,)
            return self.served

    return CourseDistributedDL


@contextlib.contextmanager
def main_process_first(*, cpu: bool):
    """Run the block on rank 0 first and on the other processes after it (one process: just run it).

    For files that every process reads and one must write, such as a prepared corpus: rank 0
    builds them, the others find them built. Uses Accelerate's ``PartialState`` (which sets up the
    process group) with the same ``cpu`` flag :func:`fit_budget` gives fastai's ``distrib_ctx``.

    Args:
        cpu: the processes train on the CPU (gloo backend).
    """
    if world_size() <= 1:
        yield
        return
    from accelerate import PartialState

    with PartialState(cpu=cpu).main_process_first():
        yield


def _weights_sha256(model: torch.nn.Module) -> str:
    """sha256 of the names and exact bytes of ``model``'s state dict (equal iff the weights are bit-identical)."""
    h = hashlib.sha256()
    for name, value in unwrap_model(model).state_dict().items():
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class BatchTrace(Callback):
    """Append one JSON line per training step to ``<folder>/trace-rank<r>.jsonl``.

    A line is ``{"rank", "step", "ids", "loss", "tokens", "weights_sha256"}``: the dataset indices of
    the batch (in a distributed run; ``null`` otherwise, where the loader does not say), this
    process's loss and non-pad target tokens, and :func:`_weights_sha256` after the optimiser step.
    A first line, step 0, has only the hash of the weights training starts from.
    :func:`fit_budget` adds it when ``ATTNLAB_TRACE_DIR`` names a folder. Each process writes its own
    file, rewritten at the start of every fit.

    Args:
        folder: where the files go (created if missing).
    """

    order = 46  # before LossCurve (47) and Budget (50): the step that ends the budget is traced

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / f"trace-rank{rank()}.jsonl"

    def before_fit(self):
        # After DistributedTrainer (order 11) wrapped the model, so step 0 is the weights every process starts from.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self.steps_done = 0
        self._write(ids=None, loss=None, tokens=None)

    def after_batch(self):
        if not self.training:
            return
        self.steps_done += 1
        served, bs = getattr(self.learn.dl, "served", None), self.learn.dl.bs
        ids = None if served is None else [int(i) for i in served[self.learn.iter * bs : (self.learn.iter + 1) * bs]]
        self._write(ids=ids, loss=float(self.learn.loss.detach()), tokens=target_count(self.yb[0]))

    def _write(self, **fields):
        line = {"rank": rank(), "step": self.steps_done, **fields, "weights_sha256": _weights_sha256(self.learn.model)}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


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
    loss_func: Callable | None = None,
    metrics: Sequence[Callable] | None = None,
) -> tuple[Learner, TrainStats]:
    """Train ``model`` on ``dls`` with fastai's one-cycle policy for ``steps`` steps (or ``seconds``).

    Args:
        model: called as ``model(src, tgt_in)`` and returning ``(B, T, V)`` logits (with
            ``loss_func``: whatever that loss takes, e.g. ``(B, K)`` class logits of ``model(images)``).
        dls: fastai ``DataLoaders`` yielding ``(src, tgt_in, tgt_out)`` with ``n_inp == 2`` (with
            ``loss_func``: its inputs then its target, e.g. ``(images, labels)``).
        steps: budget of optimiser steps (reproducible: the course's default).
        seconds: training-time budget instead (validation excluded); give exactly one of the two.
        lr: peak learning rate of the one-cycle schedule.
        wd: weight decay.
        clip: gradient-norm clipping threshold.
        label_smoothing: see :func:`masked_cross_entropy` (the default loss; give a ``loss_func``
            its own smoothing instead).
        pct_start: warm-up share of the budget.
        max_epochs: upper bound on epochs (the budget ends training first unless it is very long).
        progress: show a progress bar of the budget (:class:`StepProgress`); fastai's epoch bars
            and epoch table are never shown, since a step budget ends inside an epoch.
        loss_every: record a :class:`LossCurve` point every this many steps (``stats.loss_curve``).
        profile: recorded in the stats.
        cbs: extra fastai callbacks (:class:`GumbelAnnealing` is added by itself when the model's
            ``config.temperature_final`` is set, :class:`CoveragePhase` with ``coverage_loss_from``,
            :class:`FertilityTrace` -- every ``loss_every`` steps, else 50 -- with ``fertility``).
        loss_func: the learner's loss ``loss_func(output, target)``; default
            :class:`MaskedCrossEntropy` of ``label_smoothing``. Targets are counted by
            :func:`target_count` (a 1-D target is one class label per example).
        metrics: the learner's metrics; default ``[token_accuracy]``.

    In a process started by a distributed launcher (:func:`world_size` > 1) the learner trains
    inside fastai's ``Learner.distrib_ctx``: ``model`` must already be on this process's device
    (:func:`process_device`), ``dls`` yields this process's batches of ``bs`` (the global batch is
    ``bs * world_size``), only rank 0 shows progress, and the returned learner keeps the
    ``DistributedDL``-wrapped loaders. See the module docstring.

    Returns:
        ``(learner, stats)``; in a distributed run ``stats.steps`` counts optimiser steps (the same
        on every process), ``stats.tokens`` and ``stats.tokens_per_second`` all processes' target
        tokens, ``stats.seconds`` and ``stats.final_loss`` (the recorder's smoothed loss, a mean over
        the processes) are this process's.

    Raises:
        ValueError: a time budget (``seconds``) in a distributed run; ``label_smoothing`` with a ``loss_func``.
    """
    check_positive_int("max_epochs", max_epochs)
    label_smoothing = check_probability("label_smoothing", label_smoothing)
    if loss_func is None:
        loss_func = MaskedCrossEntropy(label_smoothing)
    elif label_smoothing:
        raise ValueError(
            f"label_smoothing={label_smoothing} configures the default loss; with loss_func={loss_func!r} "
            "give the smoothing to the loss itself"
        )
    if not callable(loss_func):
        raise TypeError(f"loss_func must be callable (output, target) -> loss, got {type(loss_func).__name__}")
    metrics = [token_accuracy] if metrics is None else list(metrics)
    budget, counter = Budget(seconds, steps=steps), TokenCounter()
    processes = world_size()
    if processes > 1:
        if seconds is not None:
            raise ValueError(
                f"seconds={seconds!r}: a time budget cannot be shared by {processes} processes (each would stop "
                "after a different number of steps and the others would wait for it forever); give steps"
            )
        shard = _distributed_dl()
        dls = type(dls)(*[shard(dl) for dl in dls.loaders], path=dls.path, device=dls.device)
    curve = LossCurve(loss_every) if loss_every is not None else None
    trace = BatchTrace(os.environ[TRACE_VAR]) if os.environ.get(TRACE_VAR) else None
    show = StepProgress(budget) if progress and is_main_process() else None
    config = getattr(unwrap_model(model), "config", None)
    anneal = GumbelAnnealing(budget) if getattr(config, "temperature_final", None) is not None else None
    phase = CoveragePhase(budget) if getattr(config, "coverage_loss_from", 0) else None
    phi = FertilityTrace(loss_every or 50) if getattr(config, "fertility", 0) else None
    extra = [c for c in (curve, trace, show, anneal, phase, phi) if c is not None]
    learn = Learner(
        dls,
        model,
        loss_func=loss_func,
        metrics=metrics,
        cbs=[GradientClip(clip), budget, counter, AuxLoss(), *extra, *cbs],
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(learn.no_bar())
        stack.enter_context(learn.no_logging())
        if processes > 1:
            import fastai.distributed  # noqa: F401  (patches Learner.distrib_ctx)

            # Without cpu=True, Accelerate finds no GPU and sets up no process group at all.
            on_cpu = next(model.parameters()).device.type == "cpu"
            stack.enter_context(learn.distrib_ctx(**({"cpu": True} if on_cpu else {})))
        learn.fit_one_cycle(max_epochs, lr, wd=wd, pct_start=pct_start)
    spent = budget.elapsed
    final = float(learn.recorder.losses[-1]) if learn.recorder.losses else float("nan")
    tokens = counter.tokens
    if processes > 1:  # fastai's gather gives the mean over the processes (on the backend's device)
        mine = torch.tensor(float(tokens), device=next(model.parameters()).device)
        tokens = round(float(to_detach(mine)) * processes)
    stats = TrainStats(
        seconds=round(spent, 2),
        steps=counter.batches,
        tokens=tokens,
        tokens_per_second=round(tokens / max(spent, 1e-9), 1),
        final_loss=round(final, 4),
        profile=profile,
        loss_curve=curve.points if curve is not None else [],
        fertility_trace=phi.points if phi is not None else [],
    )
    return learn, stats
