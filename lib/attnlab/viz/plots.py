"""The course's plot helpers: attention heatmaps, metric-by-source-length curves, training curves.

The diagrams the lessons draw (encoder-decoder, one attention step, the Transformer) live in
:mod:`attnlab.viz.diagrams` and are re-exported here.

Korean labels need a font with Hangul, which matplotlib's own DejaVu Sans lacks: importing this
module registers NanumGothic (shipped inside the ``koreanize-matplotlib`` package, a dependency)
as a *fallback* font, so Latin text keeps its usual look and Hangul is drawn instead of boxes.

Shape legend
------------
T  target (query) length
S  source (key) length
R, C  rows and columns of a grid (e.g. layers x heads)
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.ticker import FuncFormatter

from attnlab.viz.diagrams import (  # noqa: F401  (re-exported: the lessons draw them through attnlab.plots)
    attention_step_numbers,
    draw_attention_step,
    draw_encoder_decoder_stack,
    draw_seq2seq_bottleneck,
    draw_transformer_block,
)

__all__ = [
    "hangul_font",
    "plot_attention",
    "plot_attention_grid",
    "plot_metric_by_length",
    "plot_training",
    "training_curve_points",
    "attention_step_numbers",
    "draw_attention_step",
    "draw_encoder_decoder_stack",
    "draw_seq2seq_bottleneck",
    "draw_transformer_block",
]

HANGUL_FONT = "NanumGothic"


class _HangulWeightNotice(logging.Filter):
    """Drop matplotlib's notice that NanumGothic has no weight-700 face.

    The bold file registers as weight 600; for bold text matplotlib then uses it, as wanted, but
    logs "findfont: Failed to find font weight bold for NanumGothic" each time, which would print
    in every lesson cell that draws bold labels.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("findfont: Failed to find font weight") and HANGUL_FONT in msg)


def hangul_font() -> Path | None:
    """Register NanumGothic as matplotlib's fallback font for Hangul; return its file (None if absent).

    The font file is found inside the installed ``koreanize_matplotlib`` package without importing
    it (its import changes global settings and needs ``distutils``, gone since Python 3.12).
    Calling this twice is harmless.
    """
    spec = importlib.util.find_spec("koreanize_matplotlib")
    font = Path(next(iter(spec.submodule_search_locations))) / "fonts" / "NanumGothic.ttf" if spec else None
    if font is None or not font.exists():
        warnings.warn(
            "no Hangul font found (pip install koreanize-matplotlib): Korean labels will show as boxes",
            stacklevel=2,
        )
        return None
    if HANGUL_FONT not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(font))
        bold = font.with_name("NanumGothicBold.ttf")  # so bold labels find a bold Hangul face
        if bold.exists():
            font_manager.fontManager.addfont(str(bold))
    logger = logging.getLogger("matplotlib.font_manager")
    if not any(isinstance(f, _HangulWeightNotice) for f in logger.filters):
        logger.addFilter(_HangulWeightNotice())
    families = list(plt.rcParams["font.family"])
    if families == ["sans-serif"]:
        families = list(plt.rcParams["font.sans-serif"][:1])
    if HANGUL_FONT not in families:
        plt.rcParams["font.family"] = [*families, HANGUL_FONT]
    return font


hangul_font()


def _as_numpy(weights) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        return weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=float)


def _check_labels(weights: np.ndarray, src_tokens, tgt_tokens) -> None:
    T, S = weights.shape[-2:]
    if src_tokens is not None and len(src_tokens) != S:
        raise ValueError(f"src_tokens has {len(src_tokens)} labels but the weights have S={S} columns")
    if tgt_tokens is not None and len(tgt_tokens) != T:
        raise ValueError(f"tgt_tokens has {len(tgt_tokens)} labels but the weights have T={T} rows")


def plot_attention(
    weights,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    *,
    ax=None,
    title: str | None = None,
    gold: Sequence[Sequence[int]] | None = None,
    possible: Sequence[Sequence[int]] | None = None,
    cmap: str = "Blues",
):
    """Draw one attention matrix: target tokens down the side, source tokens along the top.

    Args:
        weights: ``(T, S)`` attention weights (tensor or array), rows = target steps.
        src_tokens: ``S`` source labels (x axis).
        tgt_tokens: ``T`` target labels (y axis).
        ax: matplotlib Axes to draw on (a new figure when ``None``).
        title: optional title.
        gold: optional gold alignment, per target row the source positions; drawn as red dots
            (the *sure* links where a corpus has two kinds).
        possible: optional *possible* links, per target row (e.g. a Korean particle and its noun);
            drawn as hollow red circles.
        cmap: colour map.

    Returns:
        The Axes.
    """
    w = _as_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be (T, S), got shape {w.shape}")
    _check_labels(w, src_tokens, tgt_tokens)
    if ax is None:
        T, S = w.shape
        _, ax = plt.subplots(figsize=(min(0.32 * S + 1.5, 12), min(0.3 * T + 1.0, 10)))
    ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(float(w.max()), 1e-9), aspect="auto")
    if src_tokens is not None:
        ax.set_xticks(range(len(src_tokens)))
        ax.set_xticklabels(src_tokens, rotation=90, fontsize=8)
        ax.xaxis.tick_top()
    if tgt_tokens is not None:
        ax.set_yticks(range(len(tgt_tokens)))
        ax.set_yticklabels(tgt_tokens, fontsize=8)
    for links, style in (
        (gold, dict(s=6, c="red", label="gold")),
        (possible, dict(s=22, facecolors="none", edgecolors="red", linewidths=0.8, label="possible")),
    ):
        if links is None:
            continue
        if len(links) != w.shape[0]:
            raise ValueError(f"links need one entry per target row: got {len(links)} for T={w.shape[0]}")
        points = [(t, s) for t, srcs in enumerate(links) for s in srcs]
        ys, xs = zip(*points, strict=True) if points else ((), ())
        ax.scatter(xs, ys, marker="o", **style)
    if title:
        ax.set_title(title, fontsize=9, pad=4 if src_tokens is None else 40)
    return ax


def plot_attention_grid(
    weights,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    cell_size: float = 2.2,
):
    """Draw a grid of attention matrices, e.g. layers (rows) x heads (columns).

    Args:
        weights: ``(R, C, T, S)`` weights.
        src_tokens, tgt_tokens: labels, drawn on the first row / first column only.
        row_labels, col_labels: ``R`` and ``C`` labels (default ``layer i`` / ``head j``).
        title: figure title.
        cell_size: inches per panel.

    Returns:
        The Figure.
    """
    w = _as_numpy(weights)
    if w.ndim != 4:
        raise ValueError(f"weights must be (R, C, T, S), got shape {w.shape}")
    _check_labels(w, src_tokens, tgt_tokens)
    R, C = w.shape[:2]
    row_labels = row_labels or [f"layer {i}" for i in range(R)]
    col_labels = col_labels or [f"head {j}" for j in range(C)]
    fig, axes = plt.subplots(R, C, figsize=(cell_size * C + 1, cell_size * R + 1), squeeze=False)
    for r in range(R):
        for c in range(C):
            ax = axes[r, c]
            ax.imshow(w[r, c], cmap="Blues", vmin=0.0, aspect="auto")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(col_labels[c], fontsize=8)
            if c == 0:
                ax.set_ylabel(row_labels[r], fontsize=8)
    if src_tokens is not None and R == 1 and C == 1:
        axes[0, 0].set_xticks(range(len(src_tokens)), src_tokens, rotation=90, fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_metric_by_length(
    results: Mapping[str, Mapping],
    metric: str = "bleu",
    *,
    ax=None,
    title: str | None = None,
    anchors: Mapping[str, float] | None = None,
):
    """Plot a metric per source-length bucket for several models.

    Args:
        results: ``{model label: results dict}``; each results dict has ``by_bucket`` mapping a
            bucket name (``"1-10"`` …) to ``{metric: value}`` (the ``data/results`` format).
        metric: key inside each bucket (``"bleu"`` or ``"exact_match"``).
        ax: Axes to draw on.
        title: optional title.
        anchors: optional ``{label: value}`` drawn as dotted horizontal reference lines.

    Returns:
        The Axes.
    """
    if not results:
        raise ValueError("results is empty: nothing to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for label, res in results.items():
        by_bucket = res.get("by_bucket")
        if not by_bucket:
            raise ValueError(f"results[{label!r}] has no 'by_bucket' entry")
        names = list(by_bucket)
        values = [by_bucket[b][metric] for b in names]
        ax.plot(names, values, marker="o", label=label)
    for label, value in (anchors or {}).items():
        ax.axhline(value, linestyle=":", linewidth=1, color="grey")
        ax.annotate(label, (0, value), fontsize=7, color="grey", va="bottom")
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel(metric.replace("_", " "))
    if metric == "bleu":
        ax.set_ylim(0, 102)
    elif metric == "exact_match":
        ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def training_curve_points(results: Mapping) -> dict[str, list[float]]:
    """The columns of a run's loss curve: ``step``, ``train_loss``, ``valid_loss``, ``lr``.

    Args:
        results: a results dict of :func:`attnlab.training.experiments.run` (its ``"loss_curve"``).

    Returns:
        ``{column: values}``, each list as long as the curve.

    Raises:
        ValueError: the results hold no loss curve (runs made before curves were recorded), or a
            point lacks a column.
    """
    curve = results.get("loss_curve") if isinstance(results, Mapping) else None
    if not curve:
        name = results.get("model", "this run") if isinstance(results, Mapping) else type(results).__name__
        raise ValueError(
            f"results of {name!r} hold no loss_curve; train with attnlab.training.experiments.run to record one"
        )
    columns = ("step", "train_loss", "valid_loss", "lr")
    for i, point in enumerate(curve):
        missing = [c for c in columns if c not in point]
        if missing:
            raise ValueError(f"loss_curve point {i} lacks {missing}; expected the columns {columns}")
    return {c: [float(p[c]) for p in curve] for c in columns}


def plot_training(results: Mapping, *, floor: float | None = None, title: str | None = None, axes=None):
    """Loss curves (training and validation) and the learning-rate schedule of one run, against steps.

    Args:
        results: a results dict with a ``"loss_curve"`` (see :func:`training_curve_points`).
        floor: draw the lowest loss the training objective allows (e.g.
            :func:`attnlab.models.losses.smoothed_loss_floor` under label smoothing) as a dotted line.
        title: figure title (default: the model name and its budget).
        axes: two matplotlib axes to draw on (default: a new 1 x 2 figure).

    Returns:
        The figure.
    """
    cols = training_curve_points(results)
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 2.8))
    ax_loss, ax_lr = axes
    fig = ax_loss.figure
    ax_loss.plot(cols["step"], cols["train_loss"], marker=".", label="training (mean since last point)")
    ax_loss.plot(cols["step"], cols["valid_loss"], marker=".", label="validation (whole split)")
    ax_loss.set_xlabel("optimiser step")
    ax_loss.set_ylabel("cross-entropy per token")
    if floor is not None:
        ax_loss.axhline(floor, color="grey", ls=":", lw=1, label=f"lowest possible ({floor:.2f})")
    ax_loss.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 0.9, 2, 4 rather than 9x10^-1, 2x10^0
    ax_loss.yaxis.set_major_formatter(plain)
    ax_loss.yaxis.set_minor_formatter(plain)
    ax_loss.tick_params(axis="y", which="minor", labelsize=7)
    ax_loss.legend(fontsize=8)
    ax_loss.set_title("loss", fontsize=9)
    ax_lr.plot(cols["step"], cols["lr"], color="tab:green", marker=".")
    ax_lr.set_xlabel("optimiser step")
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_title("one-cycle learning-rate schedule", fontsize=9)
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    name = results.get("model", "")
    fig.suptitle(title or f"{name}: {results.get('budget', '')}".strip(": "), fontsize=10)
    fig.tight_layout()
    return fig
