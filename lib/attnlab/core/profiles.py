"""Training profiles: ``cpu`` (small, step-budgeted, one thread) and ``gpu`` (full size), same code.

The profile is chosen from ``torch.cuda.is_available()`` and can be forced with the
environment variable ``ATTNLAB_PROFILE`` (``cpu`` or ``gpu``). The ``gpu`` profile forced on a
machine without CUDA still works, on the CPU, after one :class:`ProfileWarning` per process (its
models are several times larger than the ``cpu`` ones: expect minutes where the lessons say seconds).

:func:`attnlab.training.estimate.estimate` sizes a model of a profile before it is trained.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch

from attnlab.core.checks import check_positive_int

PROFILES = ("cpu", "gpu")
ENV_VAR = "ATTNLAB_PROFILE"


class ProfileWarning(UserWarning):
    """The ``gpu`` profile is in use on a machine where PyTorch sees no CUDA device."""


_warned_no_cuda = False


def _warn_gpu_without_cuda() -> None:
    """Warn, once per process, that the ``gpu`` profile will run on the CPU."""
    global _warned_no_cuda
    if _warned_no_cuda or torch.cuda.is_available():
        return
    _warned_no_cuda = True
    warnings.warn(
        f"{ENV_VAR}=gpu but PyTorch sees no CUDA device: the gpu profile's models and budgets will run on the "
        f"CPU, many times slower than the cpu profile (set {ENV_VAR}=cpu, or unset it, for the course's CPU budgets)",
        ProfileWarning,
        stacklevel=3,
    )


def get_profile() -> str:
    """Return the active profile name (``"cpu"`` or ``"gpu"``).

    ``ATTNLAB_PROFILE`` wins when set; otherwise ``"gpu"`` when CUDA is available. Forcing ``gpu``
    without CUDA warns once per process (:class:`ProfileWarning`) and carries on.
    """
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced:
        if forced not in PROFILES:
            raise ValueError(f"{ENV_VAR}={forced!r} is not a profile; expected one of {PROFILES}")
        if forced == "gpu":
            _warn_gpu_without_cuda()
        return forced
    return "gpu" if torch.cuda.is_available() else "cpu"


def get_device(profile: str | None = None) -> torch.device:
    """The device a profile trains on: CUDA for ``gpu`` when present, else the CPU (with a one-time
    :class:`ProfileWarning` when ``gpu`` was asked for)."""
    profile = profile or get_profile()
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if profile == "gpu":
        if torch.cuda.is_available():
            return torch.device("cuda")
        _warn_gpu_without_cuda()
    return torch.device("cpu")


THREADS_VAR = "ATTNLAB_THREADS"


def train_threads(profile: str | None = None) -> int:
    """CPU threads the training loops use: 1 on the ``cpu`` profile unless ``ATTNLAB_THREADS`` says.

    The course's CPU models are small and run step by step, so each operation is tiny. Measured on
    the course's 2-core machine, one thread was as fast as two when the machine was idle and up to
    ten times faster when anything else was running (OpenMP threads spin-wait for each other on an
    oversubscribed core). The ``gpu`` profile keeps PyTorch's default.
    """
    env = os.environ.get(THREADS_VAR, "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"{THREADS_VAR}={env!r} must be a positive integer")
        return int(env)
    return 1 if (profile or get_profile()) == "cpu" else torch.get_num_threads()


@contextlib.contextmanager
def num_threads(n: int):
    """Run a block with ``torch.set_num_threads(n)``, restoring the previous setting after."""
    n = check_positive_int("n", n)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def use_course_threads(profile: str | None = None) -> int:
    """Set PyTorch's CPU thread count for the whole session to :func:`train_threads` and return it.

    Training already runs with that many threads; a lesson calls this in its first cell so that
    evaluation, decoding and every other cell follow the same policy. With two threads on a 2-core
    machine where another program keeps one core busy, the two threads wait for each other and a
    decoding pass that takes under a second on an idle machine took 50 s; with one thread it takes
    about twice its idle time. ``ATTNLAB_THREADS`` overrides it, as for training.
    """
    n = train_threads(profile)
    torch.set_num_threads(n)
    return n
