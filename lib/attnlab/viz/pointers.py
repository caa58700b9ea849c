"""Lesson 10's pictures for pointer networks and parsing as translation (sections 5 and 6).

* :func:`plot_exact_by_length` -- exact order per list length for several models, the longest training
  length marked;
* :func:`plot_closing_offsets` -- where the attention of closing brackets peaks, relative to the last word
  of their span;
* :func:`closing_gold` -- per target row of a linearised tree, the span's last word for closing brackets
  (the ``gold`` dots of :func:`attnlab.viz.plots.plot_attention`);
* :func:`ceiling_rows`, :func:`print_ceiling`, :func:`target_verdict` -- the F1 ceiling of the ambiguous
  grammar against the parser's F1, from ``data/results/comparisons/lesson10_parse_ceiling.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from attnlab.data.parsing import closing_brackets

__all__ = [
    "plot_exact_by_length",
    "plot_closing_offsets",
    "closing_gold",
    "ceiling_rows",
    "print_ceiling",
    "target_verdict",
]


def plot_exact_by_length(curves: Mapping[str, Mapping], train_max: int, *, ax=None, title: str | None = None):
    """Exact order (0-1) against list length, one line per model.

    Args:
        curves: ``{label: {length: exact order}}`` (lengths as ints or strings, e.g. a results file's ``by_length``).
        train_max: the longest training length (a dotted line; longer lists were never seen).
        ax: Axes to draw on (default: a new figure).
        title: optional title.

    Returns:
        The Axes.
    """
    if not curves:
        raise ValueError("curves is empty: nothing to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.0))
    for label, by_length in curves.items():
        pts = sorted((int(n), float(v)) for n, v in by_length.items())
        ax.plot([n for n, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=label)
    ax.axvline(train_max + 0.5, color="grey", linestyle=":")
    ax.annotate("longer than any training list ->", (train_max + 0.7, 0.5), fontsize=7, color="grey")
    ax.set_xlabel("list length")
    ax.set_ylabel("exact order")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_closing_offsets(offsets: Mapping, *, ax=None, span: int = 4, title: str | None = None):
    """Bars of the share of closing brackets whose attention peaks ``k`` words after their span's last word.

    Args:
        offsets: ``{offset: count}`` (keys ints or strings, e.g. a results file's ``closing_offsets``).
        span: offsets from ``-span`` to ``span`` get a bar each; the rest are summed into two end bars.
        ax: Axes to draw on (default: a new figure).
        title: optional title.

    Returns:
        The Axes.
    """
    counts = {int(k): int(v) for k, v in offsets.items()}
    total = sum(counts.values())
    if not total:
        raise ValueError("offsets holds no closing bracket: nothing to plot")
    inner = list(range(-span, span + 1))
    labels = [f"<{-span}"] + [f"{k:+d}" if k else "0" for k in inner] + [f">{span}"]
    shares = [sum(v for k, v in counts.items() if k < -span) / total]
    shares += [counts.get(k, 0) / total for k in inner]
    shares += [sum(v for k, v in counts.items() if k > span) / total]
    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 2.6))
    ax.bar(range(len(labels)), shares, color=["tab:orange" if lab in ("0", "+1") else "tab:blue" for lab in labels])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel("attention peak - last word of the span")
    ax.set_ylabel("share of closing brackets")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def closing_gold(tgt: Sequence[str]) -> list[list[int]]:
    """Per target token, ``[last word of its span]`` for a closing bracket, else ``[]``."""
    gold: list[list[int]] = [[] for _ in tgt]
    for t, _, last in closing_brackets(tgt):
        gold[t] = [last]
    return gold


def ceiling_rows(summary: Mapping) -> dict[str, dict]:
    """Per length bucket of a ceiling summary: the ceiling figures and the runs' F1 as mean and sample sd.

    Args:
        summary: the comparison written by :func:`attnlab.training.parsing_experiments.ceiling_summary`.

    Returns:
        ``{bucket: {"ceiling", "parser_f1", "ambiguous_share", "f1", "f1_sd", "f1_blind", "f1_blind_sd",
        "n"}}``: ``ceiling`` the summary's ``ceiling_best``, ``parser_f1`` its ``best_parser_f1`` (the
        words-only parser behind the ceiling, on the test trees); ``*_sd`` None for one run.
    """
    runs = list(summary["runs"].values())
    if not runs:
        raise ValueError("summary holds no runs: nothing to compare with the ceiling")
    out = {}
    for b, c in summary["by_bucket"].items():
        row = {"ceiling": c["ceiling_best"], "parser_f1": c["best_parser_f1"], "ambiguous_share": c["ambiguous_share"]}
        for fig in ("f1", "f1_blind"):
            v = np.array([r[b][fig] for r in runs], dtype=float)
            row[fig] = float(v.mean())
            row[fig + "_sd"] = float(v.std(ddof=1)) if len(v) > 1 else None
        row["n"] = len(runs)
        out[b] = row
    return out


def _pm(mean: float, sd: float | None) -> str:
    return f"{mean:.3f}" + ("" if sd is None else f" ± {sd:.3f}")


def print_ceiling(rows: Mapping[str, Mapping]) -> None:
    """Print :func:`ceiling_rows` as a table: share of ambiguous sentences, ceiling, the parser's F1."""
    n = next(iter(rows.values()))["n"]
    print(
        f"{'words':>6s} {'ambiguous':>10s} {'ceiling':>8s} {'words-only parser':>18s} "
        f"{'F1 (' + str(n) + ' seeds)':>15s} {'attachment-blind F1':>20s}"
    )
    for b, r in rows.items():
        print(
            f"{b:>6s} {r['ambiguous_share']:>10.1%} {r['ceiling']:>8.3f} {r['parser_f1']:>18.3f} "
            f"{_pm(r['f1'], r['f1_sd']):>15s} {_pm(r['f1_blind'], r['f1_blind_sd']):>20s}"
        )


def target_verdict(row: Mapping, target: float) -> str:
    """Where the parser stands against ``target`` and against the estimated ceiling of the grammar.

    A target the ceiling lets a parser reach gets its verdict on standard F1 (met / NOT met). A target above
    the ceiling gets none -- by this estimate no parser can meet it -- and the text says so, with the F1
    reached, how far below the ceiling it is, and how much of the gap to the target the ceiling explains.

    Args:
        row: one bucket of :func:`ceiling_rows`.
        target: the target F1.
    """
    f1, ceil = row["f1"], row["ceiling"]
    if ceil < target:
        gap = target - f1
        share = (target - ceil) / gap if gap > 0 else 0.0
        own = f"the model's own errors the other {ceil - f1:.3f}" if f1 < ceil else "the model is at the ceiling"
        return (
            f"F1 {f1:.3f} on standard F1; a target of {target:.2f} lies above the estimated ceiling {ceil:.3f}: "
            f"by this estimate no parser reaches it on this grammar; the ceiling explains {share:.0%} of the gap "
            f"{gap:.3f}, {own}."
        )
    met = "met" if f1 >= target else "NOT met"
    out = f"target F1 >= {target:.2f}: {met} on standard F1 ({f1:.3f}). "
    return out + f"It lies below the estimated ceiling {ceil:.3f}: reachable; the gap is the model's own errors."
