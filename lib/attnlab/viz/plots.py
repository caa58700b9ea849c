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
    "plot_scaling",
    "plot_local_windows",
    "plot_seed_curves",
    "plot_grouped_bars",
    "plot_course_by_length",
    "plot_by_gold_level",
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


def plot_scaling(
    x: Sequence[float],
    curves: Mapping[str, Sequence[float]],
    *,
    ax=None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    base: float = 10,
    logy: bool = True,
    markers: str = "os^vD<>p*",
    reference: tuple[str, Sequence[float]] | None = None,
    hline: float | None = None,
    grid: bool = True,
    grid_which: str = "major",
    ticks_at_x: bool = False,
    figsize: tuple[float, float] = (4.8, 3.0),
):
    """How figures grow with a size: one line per curve on log-log axes (``logy=False``: log x only).

    Args:
        x: the sizes (``d_k``, sequence lengths ...), shared by every curve.
        curves: ``{label: values}``, each as long as ``x``; drawn with markers ``o``, ``s`` ... in turn.
        ax: Axes to draw on (default: a new figure of ``figsize``).
        xlabel, ylabel, title: the labels (the title at font size 9).
        base: the logarithm's base on both axes.
        logy: log scale on the y axis too.
        markers: the markers, one character per curve, reused in turn.
        reference: ``(label, values)`` drawn as a grey dotted line (``d_k`` itself, say).
        hline: a grey dotted horizontal line at this value (the uniform weight ``1 / n``, say).
        grid: draw a light grid; ``grid_which`` chooses ``"major"``, ``"minor"`` or ``"both"`` lines.
        ticks_at_x: put one labelled tick at each ``x`` and no minor ticks.

    Returns:
        The Axes.
    """
    x = list(x)
    if not x:
        raise ValueError("x is empty: nothing to plot")
    if not curves:
        raise ValueError("curves is empty: nothing to plot")
    if not markers:
        raise ValueError("markers is empty: give one marker character per curve")
    for label, ys in [*curves.items(), *([reference] if reference else [])]:
        if len(ys) != len(x):
            raise ValueError(f"curve {label!r} has {len(ys)} values for {len(x)} sizes in x")
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    draw = ax.loglog if logy else ax.semilogx
    kwargs = {} if base == 10 else {"base": base}
    for i, (label, ys) in enumerate(curves.items()):
        draw(x, ys, f"{markers[i % len(markers)]}-", label=label, **kwargs)
    if reference is not None:
        draw(x, reference[1], ":", color="grey", label=reference[0], **kwargs)
    if hline is not None:
        ax.axhline(hline, color="grey", linestyle=":")
    if title:
        ax.set_title(title, fontsize=9)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if ticks_at_x:
        ax.set_xticks(x, [str(v) for v in x])
        ax.minorticks_off()
    if grid:
        ax.grid(alpha=0.3, which=grid_which)
    ax.legend(fontsize=8)
    return ax


def plot_local_windows(window_m, align, weights, gauss, p_t: float, D: int):
    """Luong's local attention: local-m's windows (left) and one local-p step (right).

    Args:
        window_m: ``(T, S)`` bool, local-m's window per target step.
        align: ``(S,)`` the softmax inside local-p's window.
        weights: ``(S,)`` ``align`` times the Gaussian: local-p's weights.
        gauss: ``(S,)`` the Gaussian centred on ``p_t`` with sigma ``D / 2``.
        p_t: local-p's predicted position.
        D: the half-width of the window.

    Returns:
        The figure (two panels).
    """
    window_m, align, weights, gauss = (_as_numpy(a) for a in (window_m, align, weights, gauss))
    if window_m.ndim != 2:
        raise ValueError(f"window_m must be (T, S), got shape {window_m.shape}")
    S = window_m.shape[1]
    for name, a in (("align", align), ("weights", weights), ("gauss", gauss)):
        if a.shape != (S,):
            raise ValueError(f"{name} must be (S,) = ({S},) like window_m's columns, got shape {a.shape}")
    positions = np.arange(S, dtype=np.float32)
    fig, axes = plt.subplots(1, 2, figsize=(9, 2.8))
    axes[0].imshow(window_m, cmap="Blues", aspect="auto")
    axes[0].set_xlabel("source position s")
    axes[0].set_ylabel("target step t")
    axes[0].set_title(f"local-m windows, D = {D}", fontsize=9)
    axes[1].bar(positions - 0.2, align, 0.4, label="align (softmax in window)")
    axes[1].bar(positions + 0.2, weights, 0.4, label="× Gaussian σ = D/2")
    axes[1].plot(positions, gauss, ":", color="grey", label="Gaussian")
    axes[1].axvline(float(p_t), color="red", linewidth=1)
    axes[1].set_title(f"local-p at p_t = {float(p_t):g}", fontsize=9)
    axes[1].set_xlabel("source position s")
    axes[1].legend(fontsize=7)
    plt.tight_layout()
    return fig


def plot_seed_curves(
    curves: Mapping[str, Mapping[str, Mapping]],
    figures: Mapping[str, tuple[str, float]],
    *,
    short=str,
    dashed=(),
    title_suffix: str = "",
):
    """Learning curves, mean ± sd over seeds: one column per pair, one row per figure, one line per model.

    A panel whose models all end near the same value gets an inset that zooms on the last 30 % of training.

    Args:
        curves: ``{pair title: {model: curve}}``; a curve has ``"step"``, and ``key`` and ``key_sd`` per figure.
        figures: ``{key: (label, top)}``, ``top`` the figure's best possible value (100 for BLEU).
        short: a model's legend label.
        dashed: the models drawn dashed.
        title_suffix: appended to each panel's title (``" on 31-40 tokens"``).

    Returns:
        The figure.
    """
    if not curves or not figures:
        raise ValueError("curves and figures must both be non-empty")
    names = list(next(iter(curves.values())))
    for title, by_model in curves.items():
        if list(by_model) != names:
            raise ValueError(f"curves[{title!r}] has models {list(by_model)}, expected {names}")
    style = {n: dict(color=plt.cm.tab10(i), linestyle="--" if n in dashed else "-", marker=".", linewidth=1.3)
             for i, n in enumerate(names)}
    fig, axes = plt.subplots(len(figures), len(curves), figsize=(10, 6.4), sharex=True, squeeze=False)
    for col, (title, by_model) in enumerate(curves.items()):
        for row, (key, (label, top)) in enumerate(figures.items()):
            ax = axes[row, col]
            for name, c in by_model.items():
                m, sd = np.array(c[key]), np.array(c[f"{key}_sd"])
                ax.plot(c["step"], m, label=short(name), **style[name])
                ax.fill_between(c["step"], m - sd, m + sd, color=style[name]["color"], alpha=0.12, linewidth=0)
            peak = max(max(np.array(c[key]) + np.array(c[f"{key}_sd"])) for c in by_model.values())
            ax.set_ylim(0, 1.03 * top if peak > 0.5 * top else 1.15 * peak)  # a panel far below the top: scale to data
            ax.set_title(f"{title}: {label}{title_suffix}", fontsize=9)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            finals = [c[key][-1] for c in by_model.values()]
            if max(finals) - min(finals) < 0.1 * top:  # every model ends near the same value: zoom in there
                steps = by_model[names[0]]["step"]
                half = [i for i, s in enumerate(steps) if s >= 0.7 * steps[-1]]  # the last 30 % of training
                lo = min(c[key][i] - c[f"{key}_sd"][i] for c in by_model.values() for i in half)
                hi = max(c[key][i] + c[f"{key}_sd"][i] for c in by_model.values() for i in half)
                inset = ax.inset_axes([0.42, 0.08, 0.55, 0.5])
                for name, c in by_model.items():
                    inset.plot([c["step"][i] for i in half], [c[key][i] for i in half], **style[name])
                pad = 0.05 * (hi - lo) + 1e-3 * top
                inset.set_ylim(lo - pad, min(hi + pad, 1.005 * top))
                inset.tick_params(labelsize=7)
                inset.grid(alpha=0.3)
                ax.indicate_inset_zoom(inset, edgecolor="grey")
        axes[-1, col].set_xlabel("optimiser steps")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def plot_grouped_bars(
    values: Mapping[str, Sequence[float]],
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    divider: float | None = None,
    ax=None,
    figsize: tuple[float, float] = (4.5, 2.5),
):
    """Bars side by side at each position 0, 1, ...: one group per position, one bar per series.

    Args:
        values: ``{label: values}``, all of the same length.
        xlabel, ylabel: axis labels.
        divider: a grey dotted vertical line at this x (between the positions a change can and cannot reach).
        ax: Axes to draw on (default: a new figure of ``figsize``).

    Returns:
        The Axes.
    """
    if not values:
        raise ValueError("values is empty: nothing to plot")
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise ValueError(f"every series must have the same length, got lengths {sorted(lengths)}")
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    n, width = len(values), 0.8 / len(values)
    x = np.arange(lengths.pop())
    for i, (label, ys) in enumerate(values.items()):
        ax.bar(x + (i - (n - 1) / 2) * width, _as_numpy(ys) if torch.is_tensor(ys) else ys, width=width, label=label)
    if divider is not None:
        ax.axvline(divider, color="grey", linestyle=":")
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def plot_course_by_length(rows_by_pair: Mapping[str, Mapping[str, Mapping]], titles: Mapping[str, str]):
    """The course's models by source length: 100 - BLEU on a log scale (left) and exact match (right), per pair.

    Args:
        rows_by_pair: ``{pair: {model label: results dict}}``.
        titles: ``{pair: title}`` (``"English→French"``).

    Returns:
        The figure, one row of two panels per pair.
    """
    if not rows_by_pair:
        raise ValueError("rows_by_pair is empty: nothing to plot")
    missing = [p for p in rows_by_pair if p not in titles]
    if missing:
        raise ValueError(f"titles lacks the pairs {missing}")
    fig, axes = plt.subplots(len(rows_by_pair), 2, figsize=(10, 3.2 * len(rows_by_pair)), squeeze=False)
    for (lang, rows), (ax_bleu, ax_em) in zip(rows_by_pair.items(), axes, strict=True):
        # 100 - BLEU, floored at 0.01 so that a perfect bucket stays on the log axis
        gap = {
            label: {"by_bucket": {b: {"100 - BLEU": max(100 - m["bleu"], 0.01)} for b, m in r["by_bucket"].items()}}
            for label, r in rows.items()
        }
        plot_metric_by_length(gap, "100 - BLEU", ax=ax_bleu, title=f"{titles[lang]}: 100 - BLEU (log scale)")
        ax_bleu.set_yscale("log")
        ax_bleu.set_ylabel("100 - BLEU (lower is better)")
        ax_bleu.get_legend().remove()  # same models, same colours as the exact-match panel's legend
        plot_metric_by_length(rows, "exact_match", ax=ax_em, title=f"{titles[lang]}: exact match")
    plt.tight_layout()
    return fig


def plot_by_gold_level(
    predicted: Mapping[str, np.ndarray],
    gold: np.ndarray,
    *,
    xlabel: str = "gold fertility",
    ylabel: str = "predicted Φ",
    ylim: tuple[float, float] = (0, 3.3),
):
    """A predicted figure against its gold value: one box per gold level, the gold value as a black tick.

    Args:
        predicted: ``{panel title: values}``, each array aligned with ``gold``.
        gold: the gold value per item (whole numbers: fertilities).
        xlabel, ylabel, ylim: the axes.

    Returns:
        The figure, one panel per entry of ``predicted`` (shared y axis).
    """
    if not predicted:
        raise ValueError("predicted is empty: nothing to plot")
    gold = np.asarray(gold)
    for title, values in predicted.items():
        if np.shape(values) != gold.shape:
            raise ValueError(f"predicted[{title!r}] has shape {np.shape(values)}, gold has {gold.shape}")
    levels = sorted(set(gold.tolist()))
    fig, ax = plt.subplots(1, len(predicted), figsize=(5 * len(predicted), 3), sharey=True, squeeze=False)
    ax = ax[0]
    for a, (title, values) in zip(ax, predicted.items(), strict=True):
        a.boxplot([np.asarray(values)[gold == k] for k in levels], positions=levels, widths=0.5)
        a.plot(levels, levels, "k_", markersize=25, label="gold")
        a.set(xlabel=xlabel, title=title, ylim=ylim)
    ax[0].set_ylabel(ylabel)
    ax[0].legend(fontsize=7)
    plt.tight_layout()
    return fig
