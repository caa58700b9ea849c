"""Equality checks that remember their largest error, printed at the end of a test module (``-s``).

Each module makes one :class:`ErrorLog` with its tolerances and a module fixture that calls
:meth:`ErrorLog.report`; the figures are what a closing note quotes as "equal to PyTorch within ...".
"""

from __future__ import annotations

import torch


class ErrorLog:
    """``assert_close`` with a tolerance per dtype, keeping the max absolute error of each comparison."""

    def __init__(self, tolerances: dict[torch.dtype, dict[str, float]]) -> None:
        self.tolerances = tolerances
        self.max_errors: dict[str, float] = {}

    def close(self, key: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
        err = (actual.detach() - expected.detach()).abs().max().item() if actual.numel() else 0.0
        self.max_errors[key] = max(self.max_errors.get(key, 0.0), err)
        torch.testing.assert_close(actual, expected, **self.tolerances[actual.dtype])

    def report(self, title: str) -> None:
        print(f"\n{title}:")
        for key, err in sorted(self.max_errors.items()):
            print(f"  {key:50s} {err:.3e}")
