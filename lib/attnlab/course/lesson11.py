"""Lesson 11's tables: the seeds of two models side by side with the course's difference rule, the sliding windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attnlab.course.lessons import compare_seeds

__all__ = ["seed_table", "window_table"]


def seed_table(summaries: Mapping[str, dict], figures: Sequence[str] = ("bleu", "exact_match")) -> str:
    """Rows ``model: mean ± sd (n seeds)`` of each figure, and the verdict of the course's difference rule.

    Args:
        summaries: ``{label: summary}`` of :func:`attnlab.training.decoder_only_report.seed_summary`;
            the first two are compared.
        figures: which figures, e.g. ``("bleu", "em 31-40")``.
    """
    lines = []
    for label, s in summaries.items():
        cells = [f"{f} {s['mean'][f]:.3f} ± " + ("–" if s["sd"][f] is None else f"{s['sd'][f]:.3f}") for f in figures]
        n = len(s["runs"])
        lines.append(f"{label} ({n} seed{'s' if n > 1 else ''}, {s['params']:,} params):")
        lines.append("    " + ", ".join(cells))  # on a line of its own: the row fits a narrow notebook
    (na, a), (nb, b) = list(summaries.items())[:2]
    for f in figures:
        if len(a["runs"]) < 3 or len(b["runs"]) < 3:
            lines.append(f"  {f}: unknown (a verdict needs 3 seeds of each)")
            continue
        sign = compare_seeds(a, b, f)
        lines.append(f"  {f}: " + {1: f"{na} ahead", -1: f"{nb} ahead", 0: "tie (gap within the seeds' spread)"}[sign])
    return "\n".join(lines)


def window_table(windows: Mapping[str, list[dict]]) -> str:
    """One row per ``(window, sinks)`` setting: BLEU and exact match averaged over the runs given."""
    runs = list(windows.values())
    lines = [f"{'window':>8s} {'sinks':>6s} {'BLEU':>7s} {'exact':>7s}   ({len(runs)} run(s), 31-40-token sources)"]
    for i, row in enumerate(runs[0]):
        bleu = np.mean([r[i]["bleu"] for r in runs])
        em = np.mean([r[i]["exact_match"] for r in runs])
        w = "full" if row["window"] is None else str(row["window"])
        lines.append(f"{w:>8s} {row['sinks']:>6d} {bleu:7.1f} {em:7.3f}")
    return "\n".join(lines)
