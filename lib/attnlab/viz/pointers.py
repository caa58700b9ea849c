"""Lesson 10's pictures for pointer networks and parsing as translation (sections 5 and 6).

* :func:`plot_exact_by_length` -- exact order per list length for several models, the longest training
  length marked;
* :func:`plot_closing_offsets` -- where the attention of closing brackets peaks, relative to the last word
  of their span;
* :func:`closing_gold` -- per target row of a linearised tree, the span's last word for closing brackets
  (the ``gold`` dots of :func:`attnlab.viz.plots.plot_attention`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from attnlab.data.parsing import closing_brackets

__all__ = ["plot_exact_by_length", "plot_closing_offsets", "closing_gold"]


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
