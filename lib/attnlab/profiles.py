"""Training profiles: ``cpu`` (small, time-budgeted) and ``gpu`` (full size), same code.

The profile is chosen from ``torch.cuda.is_available()`` and can be forced with the
environment variable ``ATTNLAB_PROFILE`` (``cpu`` or ``gpu``).
"""

from __future__ import annotations

import os

import torch

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
