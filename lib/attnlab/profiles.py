"""Training profiles: ``cpu`` (small, step-budgeted, one thread) and ``gpu`` (full size), same code.

The profile is chosen from ``torch.cuda.is_available()`` and can be forced with the
environment variable ``ATTNLAB_PROFILE`` (``cpu`` or ``gpu``).
"""

from __future__ import annotations

import contextlib
import os

import torch

from .checks import check_positive_int

PROFILES = ("cpu", "gpu")
ENV_VAR = "ATTNLAB_PROFILE"


def get_profile() -> str:
    """Return the active profile name (``"cpu"`` or ``"gpu"``).

    ``ATTNLAB_PROFILE`` wins when set; otherwise ``"gpu"`` when CUDA is available.
    """
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced:
        if forced not in PROFILES:
            raise ValueError(f"{ENV_VAR}={forced!r} is not a profile; expected one of {PROFILES}")
        return forced
    return "gpu" if torch.cuda.is_available() else "cpu"


def get_device(profile: str | None = None) -> torch.device:
    """The device a profile trains on: CUDA for ``gpu`` (when present), else CPU."""
    profile = profile or get_profile()
    if profile == "gpu" and torch.cuda.is_available():
        return torch.device("cuda")
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
