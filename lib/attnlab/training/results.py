"""Where trained models and their results live, and the one way to read and write results files.

Two places, the same layout:

* **shipped** (committed, written by ``python -m attnlab.training.experiments NAME --ship`` and
  ``scripts/compare_luong.py``): ``data/checkpoints/<name>.safetensors|.json`` and
  ``data/results/<name>.json``;
* **live runs** (the learner's own, never committed): the same below ``data/runs/``, so that
  running a lesson or ``make test`` never rewrites the shipped figures.

``data/`` is the repository's folder unless ``ATTNLAB_DATA_DIR`` names another. This module knows
names, not what they mean (a model trained on English->Korean is called ``<name>_ko``: see
:func:`attnlab.training.experiments.result_name`); the ``data/`` folder itself is
:func:`attnlab.data.paths.data_dir`.

Lookups that accept either place go through :func:`sources`, which owns the order: the shipped
file first, else the learner's run (``prefer_live=True`` reverses it, for a lesson that wants to
show the learner's own model when there is one). Each result a lookup returns says which it was.

Every results file is written once, completely, by :func:`write_result` (through a temporary file,
so a reader never sees half of one); nothing rewrites a file another step wrote.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch

from attnlab.data.paths import data_dir, read_json_object

__all__ = [
    "SHIPPED",
    "LIVE",
    "ResultsError",
    "data_dir",
    "checkpoint_path",
    "results_path",
    "comparison_path",
    "write_comparison",
    "read_comparison",
    "sources",
    "read_result",
    "find_result",
    "read_json_object",
    "write_result",
    "json_ready",
    "load_all_results",
    "provenance",
    "load_average",
]

SHIPPED, LIVE = "shipped", "live run"


class ResultsError(ValueError):
    """A results file exists but is not a JSON object."""


def _root(shipped: bool) -> Path:
    return data_dir() if shipped else data_dir() / "runs"


def checkpoint_path(name: str, *, shipped: bool) -> Path:
    """Base path (no suffix) of the checkpoint called ``name``, shipped or live."""
    return _root(shipped) / "checkpoints" / name


def results_path(name: str, *, shipped: bool) -> Path:
    """Path of the results file of ``name``, shipped or live."""
    return _root(shipped) / "results" / f"{name}.json"


def sources(*, prefer_live: bool = False) -> tuple[tuple[bool, str], ...]:
    """``((shipped, label), ...)`` in lookup order: shipped then live, or live first with ``prefer_live``."""
    order = ((True, SHIPPED), (False, LIVE))
    return order[::-1] if prefer_live else order


def read_result(name: str, *, shipped: bool = True) -> dict:
    """The results dict of ``name`` from one place (shipped by default).

    Raises:
        FileNotFoundError: no such file.
        ResultsError: the file is not a JSON object (the message names it).
    """
    path = results_path(name, shipped=shipped)
    if not path.exists():
        raise FileNotFoundError(f"no results for {name!r} at {path}")
    return _read(path)


def _read(path: Path) -> dict:
    return read_json_object(path, ResultsError)


def find_result(name: str, *, prefer_live: bool = False) -> tuple[dict, str]:
    """The results of ``name`` from the first place that has them (see :func:`sources`).

    Returns:
        ``(results, source)`` with ``source`` :data:`SHIPPED` or :data:`LIVE`.

    Raises:
        FileNotFoundError: neither place has them (the message names both paths).
    """
    tried = []
    for shipped, label in sources(prefer_live=prefer_live):
        path = results_path(name, shipped=shipped)
        if path.exists():
            return _read(path), label
        tried.append(str(path))
    raise FileNotFoundError(f"no results for {name!r}; looked at {', '.join(tried)}")


def json_ready(value):
    """``value`` with every NaN or infinite float replaced by ``None`` (JSON has no NaN; ``null`` is "no value")."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def write_result(name: str, res: dict, *, shipped: bool) -> Path:
    """Write the results file of ``name`` atomically; return its path.

    Raises:
        ValueError: ``res`` holds a NaN or infinity (pass it through :func:`json_ready` first).
    """
    return _write_json(results_path(name, shipped=shipped), res)


def _write_json(path: Path, obj: dict) -> Path:
    text = json.dumps(obj, indent=1, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def comparison_path(name: str, *, shipped: bool = True) -> Path:
    """Path of a comparison summary (several models and seeds in one file), e.g. ``luong_ko``.

    Summaries live one folder below the results files, so that :func:`load_all_results` (one
    model per file) never mistakes one for a model's results.
    """
    return _root(shipped) / "results" / "comparisons" / f"{name}.json"


def write_comparison(name: str, summary: dict, *, shipped: bool = True) -> Path:
    """Write a comparison summary atomically (see :func:`comparison_path`); return its path."""
    return _write_json(comparison_path(name, shipped=shipped), summary)


def read_comparison(name: str, *, shipped: bool = True) -> dict:
    """Read a comparison summary written by :func:`write_comparison`.

    Raises:
        FileNotFoundError: there is none (run ``scripts/compare_luong.py``).
        ResultsError: the file is not a JSON object.
    """
    path = comparison_path(name, shipped=shipped)
    if not path.exists():
        raise FileNotFoundError(f"no comparison {name!r} at {path}; run scripts/compare_luong.py")
    return _read(path)


def load_all_results(*, shipped: bool = True, order: tuple[str, ...] = ()) -> dict[str, dict]:
    """``{name: results}`` of every results file in one place: names in ``order`` first, the rest sorted."""
    folder = results_path("x", shipped=shipped).parent
    found = {p.stem: _read(p) for p in sorted(folder.glob("*.json"))}
    names = [n for n in order if n in found] + sorted(n for n in found if n not in order)
    return {n: found[n] for n in names}


def provenance(*, produced_by: str, profile: str, threads: int, load_before: float | None) -> dict:
    """The fields that say how a result came about, recorded in every results file.

    Args:
        produced_by: the command that produced it.
        profile: ``cpu`` or ``gpu``.
        threads: CPU threads PyTorch used while training and evaluating.
        load_before: 1-minute load average before training (a time budget buys fewer steps on a
            busy machine, so the load before and after is part of the record).

    Returns:
        ``produced_by``, ``profile``, ``torch_threads``, ``cpu_count``, ``load_average``
        (``{"before", "after"}``), ``torch_version`` and ``date``.
    """
    after = load_average()
    return {
        "profile": profile,
        "torch_threads": threads,
        "cpu_count": os.cpu_count(),
        "load_average": {"before": _round(load_before), "after": _round(after)},
        "torch_version": torch.__version__,
        "produced_by": produced_by,
        "date": time.strftime("%Y-%m-%d"),
    }


def load_average() -> float | None:
    """The 1-minute load average (``None`` where the platform has none, e.g. Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)
