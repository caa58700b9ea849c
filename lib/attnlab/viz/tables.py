"""Plain-text tables the lessons print: metrics by source length, mean ± sd over seeds, claims and verdicts.

Each function only formats what it is given (numbers already computed by the lesson) and returns the
text, one table a string, so that a lesson cell reads ``print(bucket_table(...))``. The one exception is
:func:`course_table`, a ``pandas.DataFrame`` that the notebook displays as HTML.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import pandas as pd

from attnlab.core.checks import check_int
from attnlab.data.corpus import BUCKET_NAMES
from attnlab.training.report import format_cell

__all__ = [
    "bucket_table",
    "bucket_table_by_pair",
    "mean_sd_table",
    "checkpoint_table",
    "claims_table",
    "tier_text",
    "side_by_side",
    "course_table",
]


def _check_mapping(name: str, value, *, nonempty: bool = True) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping, got {type(value).__name__}")
    if nonempty and not value:
        raise ValueError(f"{name} is empty: nothing to tabulate")


def _by_bucket(name: str, run: Mapping) -> Mapping:
    by = run.get("by_bucket") if isinstance(run, Mapping) else None
    if not by:
        raise ValueError(f"{name} has no 'by_bucket' entry (a data/results file has one)")
    return by


def bucket_table(runs: Mapping[str, Mapping], metric: str = "bleu", *, overall_note: str = "") -> str:
    """One row per source-length bucket and an ``overall`` row, one column per run.

    Args:
        runs: ``{column label: results dict}`` (the ``data/results`` format: ``by_bucket`` and the overall metric).
        metric: the figure to show (``"bleu"``, ``"exact_match"`` ...), one decimal.
        overall_note: text appended to the ``overall`` row (a paper's figures, say).

    Each column is one character wider than its label and at least 8 wide; the first column is 8 wide.
    """
    _check_mapping("runs", runs)
    widths = {label: max(8, len(label) + 1) for label in runs}
    lines = [f"{'bucket':>8s} " + " ".join(f"{label:>{widths[label]}s}" for label in runs)]
    for b in BUCKET_NAMES:
        values = [f"{_by_bucket(repr(k), r)[b][metric]:{widths[k]}.1f}" for k, r in runs.items()]
        lines.append(f"{b:>8s} " + " ".join(values))
    lines.append(f"{'overall':>8s} " + " ".join(f"{r[metric]:{widths[k]}.1f}" for k, r in runs.items()) + overall_note)
    return "\n".join(lines)


def bucket_table_by_pair(by_pair: Mapping[str, Mapping[str, Mapping]], columns: Mapping[str, str], *,
                         metric: str = "bleu", title: str = "BLEU by source length") -> str:
    """Runs of several language pairs side by side: a pair's title spans its columns (10 characters each).

    Args:
        by_pair: ``{pair title: {run name: results dict}}``.
        columns: ``{run name: column label}``, the runs shown for every pair, in this order.
        metric: the figure in each bucket, one decimal.
        title: the first header line's first cell (21 characters wide).
    """
    _check_mapping("by_pair", by_pair)
    _check_mapping("columns", columns)
    for pair, runs in by_pair.items():
        missing = [n for n in columns if n not in runs]
        if missing:
            raise ValueError(f"by_pair[{pair!r}] lacks the runs {missing}")
    span = 10 * len(columns)
    lines = [f"{title:21s}" + "".join(f"{pair:>{span}s}" for pair in by_pair),
             f"{'bucket':>21s}" + "".join(f"{label:>10s}" for label in columns.values()) * len(by_pair)]
    for b in BUCKET_NAMES:
        lines.append(f"{b:>21s}" + "".join(f"{_by_bucket(n, runs[n])[b][metric]:10.1f}"
                                           for runs in by_pair.values() for n in columns))
    return "\n".join(lines)


def _mean_sd(mean, sd, digits: int, percent: bool = False) -> str:
    """'mean ± sd' right-aligned in 15 characters; a single run (sd None) keeps its mean in the same place.

    With ``percent``, a share is shown as a percentage and its sd in percentage points: ``98.2% ± 0.7``."""
    blank = " " * (digits + 5)  # the width of " ± sd"
    if percent:
        mean, sd = (None if x is None else 100 * x for x in (mean, sd))
    sign = "%" if percent else ""
    spread = blank if sd is None else f" ± {sd:.{digits}f}"
    text = "-" + blank if mean is None else f"{mean:.{digits}f}{sign}" + spread
    return f"{text:>15s}"


def mean_sd_table(rows: Mapping[str, Mapping], columns: Mapping[str, tuple[str, int]], *,
                  names: Sequence[str] | None = None, short: Callable[[str], str] = str,
                  paper: Mapping[str, str] | None = None,
                  singles: Mapping[str, tuple[Mapping, int]] | None = None,
                  percent: Collection[str] = ()) -> str:
    """Mean ± sd over seeds per model, then single runs (marked ``*``) for comparison.

    Args:
        rows: ``{model: {"mean": {figure: value}, "sd": {figure: value}, "params": int}}`` (a comparison summary).
        columns: ``{figure: (column label, digits)}``; a missing figure shows as ``-``.
        names: the models to show, in order (default: all of ``rows``).
        short: the row label of a model name.
        paper: when given, a last column with a paper's figure per model (``-`` where it has none).
        singles: ``{row label: (figures, params)}`` of single runs, shown without sd below the rest.
        percent: figures that are shares (0-1), shown as percentages with ``digits`` decimals and their sd
            in percentage points (``98.2% ± 0.7``), so that prose quoting "98.2%" quotes the output.
    """
    _check_mapping("rows", rows)
    _check_mapping("columns", columns)
    names = list(rows) if names is None else list(names)
    missing = [n for n in names if n not in rows]
    if missing:
        raise ValueError(f"names {missing} are not in rows ({sorted(rows)})")
    unknown = sorted(set(percent) - set(columns))
    if unknown:
        raise ValueError(f"percent names figures {unknown} that are not columns ({list(columns)})")
    head = f"{'variant':15s}" + "".join(f"{label:>15s}" for label, _ in columns.values()) + f"{'params':>8s}"
    lines = [head + (f"{'paper':>7s}" if paper is not None else ""), "-" * (len(head) + 7 * (paper is not None))]
    for name in names:
        s = rows[name]
        line = "".join(_mean_sd(s["mean"].get(f), s["sd"].get(f), d, f in percent) for f, (_, d) in columns.items())
        last = f"{paper.get(name, '-'):>7s}" if paper is not None else ""
        lines.append(f"{short(name):15s}{line}{s['params']:8d}{last}")
    for label, (figs, params) in (singles or {}).items():
        lines.append(f"{label + ' *':15s}" + "".join(_mean_sd(figs.get(f), None, d, f in percent)
                                                      for f, (_, d) in columns.items())
                     + f"{params:8d}")
    return "\n".join(lines)


def checkpoint_table(curves: Mapping[str, Mapping[str, Mapping]], steps: Sequence[int], *, key: str = "bleu",
                     short: Callable[[str], str] = str) -> str:
    """A figure at a few optimiser steps, per model (rows) and pair (columns): ``18.5 /  87.8 /  95.8``.

    Args:
        curves: ``{pair title: {model: curve}}``, a curve being ``{"step": [...], key: [...]}`` as in a summary.
        steps: the steps to show; each must be one of every curve's steps.
        key: the curve's figure.
        short: the row label of a model name.
    """
    _check_mapping("curves", curves)
    if not steps:
        raise ValueError("steps is empty: name at least one optimiser step")
    steps = [check_int("steps[i]", s, minimum=0) for s in steps]
    models = list(next(iter(curves.values())))
    lines = [f"{'variant':13s}" + "".join(f"{title:>24s}" for title in curves)]
    for name in models:
        cells = []
        for title, by_model in curves.items():
            c = by_model[name]
            absent = [s for s in steps if s not in c["step"]]
            if absent:
                raise ValueError(f"curves[{title!r}][{name!r}] has no point at steps {absent}")
            cells.append(" / ".join(f"{c[key][c['step'].index(s)]:5.1f}" for s in steps))
        lines.append(f"{short(name):13s}" + "".join(f"{x:>24s}" for x in cells))
    return "\n".join(lines)


def claims_table(rows: Sequence[tuple[str, str, Sequence[str]]], headers: Sequence[str], *,
                 title: str = "claim") -> str:
    """A paper's claims, its own figures, and one verdict per judged column.

    Args:
        rows: ``(claim, the paper's figures, verdicts)``, one verdict per header.
        headers: the judged columns (``"fr BLEU"`` ...), 13 characters wide.
        title: the heading of the claims' column (39 characters wide).
    """
    headers = list(headers)
    if not headers:
        raise ValueError("headers is empty: judge the claims on at least one column")
    lines = [f"{title:39s} {'paper':>15s}" + "".join(f"{h:>13s}" for h in headers)]
    for claim, numbers, verdicts in rows:
        if len(verdicts) != len(headers):
            raise ValueError(f"claim {claim!r} has {len(verdicts)} verdicts for {len(headers)} headers")
        lines.append(f"{claim:39s} {numbers:>15s}" + "".join(f"{v:>13s}" for v in verdicts))
    return "\n".join(lines)


def tier_text(label: str, level: Sequence[str], behind: Sequence[str], means: Mapping[str, float], *,
              digits: int = 2, short: Callable[[str], str] = str) -> str:
    """Two lines: the best model and those level with it, then those behind it with their means.

    Args:
        label: the figure's name (9 characters wide).
        level: the best model first, then those level with it.
        behind: the models behind the best (no second line when empty).
        means: ``{model: mean}``, for the models behind.
        digits: decimals of the means.
        short: the label of a model name.
    """
    if not level:
        raise ValueError("level is empty: it starts with the best model")
    digits = check_int("digits", digits, minimum=0)
    tied = ", ".join(map(short, level[1:])) or "none"
    text = f"  {label:9s} best: {short(level[0])}; level with it: {tied}"
    if behind:
        text += f"\n  {'':9s} behind: " + ", ".join(f"{short(n)} {means[n]:.{digits}f}" for n in behind)
    return text


def side_by_side(rows: Mapping[str, tuple], headers: tuple[str, str], *, digits: int = 4, width: int = 26,
                 label_width: int = 14) -> str:
    """Two vectors per row, each printed as a rounded list: ``weights  [0.003, 0.9667]   [0.0028, 0.968]``.

    Args:
        rows: ``{label: (left, right)}``; each a tensor or array with ``tolist()``, or a sequence of numbers.
        headers: the two columns' titles.
        digits: decimals kept by ``round``.
        width, label_width: the columns' widths.
    """
    _check_mapping("rows", rows)
    if len(headers) != 2:
        raise ValueError(f"headers must name 2 columns, got {len(headers)}")
    digits = check_int("digits", digits, minimum=0)

    def rounded(t) -> str:
        values = t.tolist() if hasattr(t, "tolist") else list(t)
        return str([round(x, digits) for x in values])

    lines = [f"{'':{label_width}s} {headers[0]:>{width}s}   {headers[1]:>{width}s}"]
    for label, pair in rows.items():
        if len(pair) != 2:
            raise ValueError(f"rows[{label!r}] must be (left, right), got {len(pair)} values")
        lines.append(f"{label:{label_width}s} {rounded(pair[0]):>{width}s}   {rounded(pair[1]):>{width}s}")
    return "\n".join(lines)


def course_table(rows: Mapping[str, Mapping]) -> pd.DataFrame:
    """The course's models side by side: overall BLEU, chrF, exact match, AER, BLEU by length, budget, size.

    Args:
        rows: ``{row label: results dict}`` (the ``data/results`` format). chrF and AER columns appear only
            where some model records them; an older file without ``budget`` shows its time budget.

    Returns:
        A DataFrame of strings, one row per model.
    """
    _check_mapping("rows", rows)
    table = pd.DataFrame(
        {
            label: {
                "BLEU": format_cell(r["bleu"], ".1f"),
                "chrF": format_cell(r.get("chrf"), ".1f"),
                "EM": format_cell(r["exact_match"], ".2f"),
                "AER": format_cell(r.get("aer"), ".2f"),
                **{f"BLEU {b}": format_cell(_by_bucket(label, r)[b]["bleu"], ".1f") for b in BUCKET_NAMES},
                "EM 31-40": format_cell(r["by_bucket"]["31-40"]["exact_match"], ".2f"),
                "budget": r["budget"] if "budget" in r else f"{r['train_seconds']:.0f} s",  # older files: a time budget
                "params": f"{r['params']:,}",
            }
            for label, r in rows.items()
        }
    ).T
    return table.loc[:, (table != "–").any()]  # chrF and AER only where some model records them
