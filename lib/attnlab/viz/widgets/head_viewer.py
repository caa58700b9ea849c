"""A general attention-head viewer: any stack of weights shaped (layers, heads, T, S).

Lesson 5 uses it on a small trained multi-head model; lesson 6 reuses it three times on a
Transformer, once each for encoder self-attention (T = S = source), decoder self-attention
(T = S = target) and cross-attention (T = target, S = source).

Shape legend
------------
N  number of layers
H  number of heads per layer
T  number of queries (rows; ``tgt_tokens`` label them)
S  number of keys (columns; ``src_tokens`` label them)
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import torch

from attnlab.viz.plots import plot_attention
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = ["as_layer_head_stack", "update_head_viewer", "plot_head_viewer", "head_viewer"]


def as_layer_head_stack(weights) -> torch.Tensor:
    """Return ``weights`` as a float tensor ``(N, H, T, S)``.

    Accepts ``(N, H, T, S)``, a single layer ``(H, T, S)``, a single head ``(T, S)``, or a list
    of per-layer ``(H, T, S)`` tensors (e.g. what a model collected layer by layer).
    """
    if isinstance(weights, (list, tuple)):
        weights = torch.stack([torch.as_tensor(w) for w in weights])  # (N, H, T, S)
    w = torch.as_tensor(weights).detach().float().cpu()
    if w.dim() == 2:
        w = w[None, None]  # (1, 1, T, S)
    elif w.dim() == 3:
        w = w[None]  # (1, H, T, S)
    if w.dim() != 4:
        raise ValueError(f"weights must be (layers, heads, T, S), got shape {tuple(w.shape)}")
    return w


def _entropy(w: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of each row ``(T,)``; 0 for an all-zero (fully masked) row."""
    return -(w * torch.log(w.clamp_min(1e-12))).sum(-1)  # (T,)


def update_head_viewer(
    weights,
    layer: int,
    head: int | None,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    *,
    layer_labels: Sequence[str] | None = None,
    head_labels: Sequence[str] | None = None,
) -> dict:
    """Select one head (or all heads of a layer) and describe it (pure).

    Args:
        weights: ``(N, H, T, S)`` (or anything :func:`as_layer_head_stack` accepts).
        layer: layer index.
        head: head index, or ``None`` for all heads of ``layer``.
        src_tokens: ``S`` key labels; tgt_tokens: ``T`` query labels.
        layer_labels, head_labels: names shown in titles.

    Returns:
        dict with ``weights`` (``(T, S)`` for one head, ``(1, H, T, S)`` for all heads),
        ``title``, ``argmax`` (per query, the most attended key index, one head only),
        ``entropy`` (mean row entropy in nats per head, ``(H,)`` or a float), ``vmax`` (the top of
        the colour scale: the largest weight of any head of ``layer``, so that every head of a layer
        is drawn on one scale and a near-uniform head looks pale, not patterned) and ``summary`` (text).
    """
    w = as_layer_head_stack(weights)  # (N, H, T, S)
    N, H, T, S = w.shape
    if not 0 <= layer < N:
        raise IndexError(f"layer {layer} out of range: the weights have {N} layer(s)")
    if head is not None and not 0 <= head < H:
        raise IndexError(f"head {head} out of range: the weights have {H} head(s)")
    if src_tokens is not None and len(src_tokens) != S:
        raise ValueError(f"src_tokens has {len(src_tokens)} labels but the weights have S={S} keys")
    if tgt_tokens is not None and len(tgt_tokens) != T:
        raise ValueError(f"tgt_tokens has {len(tgt_tokens)} labels but the weights have T={T} queries")
    layer_name = layer_labels[layer] if layer_labels else f"layer {layer}"
    head_names = list(head_labels) if head_labels else [f"head {h}" for h in range(H)]
    src = list(src_tokens) if src_tokens is not None else [str(j) for j in range(S)]
    tgt = list(tgt_tokens) if tgt_tokens is not None else [str(i) for i in range(T)]
    vmax = max(float(w[layer].max()), 1e-9)  # all-zero (fully masked) weights still get a scale

    if head is None:
        sel = w[layer : layer + 1]  # (1, H, T, S)
        entropy = _entropy(sel[0]).mean(-1)  # (H,)
        summary = "\n".join(f"{head_names[h]}: mean entropy {entropy[h]:.3f} nats" for h in range(H))
        return {
            "weights": sel,
            "title": f"{layer_name}, all heads",
            "argmax": None,
            "entropy": entropy,
            "vmax": vmax,
            "summary": summary,
        }
    sel = w[layer, head]  # (T, S)
    argmax = sel.argmax(-1).tolist()  # (T,)
    entropy = float(_entropy(sel).mean())
    rows = [
        f"{tgt[i]:>8s} -> {src[j]:<8s} ({sel[i, j]:.2f})"
        if sel[i].sum() > 0
        else f"{tgt[i]:>8s} -> (fully masked)"
        for i, j in enumerate(argmax)
    ]
    summary = f"mean entropy {entropy:.3f} nats; strongest key per query:\n" + "\n".join(rows)
    return {
        "weights": sel,
        "title": f"{layer_name}, {head_names[head]}",
        "argmax": argmax,
        "entropy": entropy,
        "vmax": vmax,
        "summary": summary,
    }


def plot_head_viewer(
    result: dict,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    *,
    head_labels: Sequence[str] | None = None,
    fig=None,
):
    """Draw :func:`update_head_viewer`'s ``result``: one heatmap, or one per head side by side, all on
    the colour scale ``0 .. result["vmax"]`` with one colour bar.

    Args:
        result: from :func:`update_head_viewer`.
        src_tokens, tgt_tokens: key (column) and query (row) labels; all-heads panels label the
            first panel's rows only.
        head_labels: ``H`` panel titles when all heads are shown (default ``head h``).
        fig: an empty matplotlib Figure to draw on (resized to fit); a new pyplot figure when ``None``.

    Returns:
        The Figure.
    """

    w = result["weights"]
    vmax = result["vmax"]
    all_heads = result["argmax"] is None
    if all_heads:  # (1, H, T, S): every head of the layer, side by side
        panels = [w[0, h] for h in range(w.shape[1])]  # H x (T, S)
        titles = list(head_labels) if head_labels else [f"head {h}" for h in range(len(panels))]
    else:  # (T, S)
        panels, titles = [w], [result["title"]]
    T, S = panels[0].shape
    panel_w, panel_h = (2.3, min(0.2 * T + 1.4, 5)) if all_heads else (min(0.3 * S + 1.5, 8), min(0.3 * T + 1.2, 8))
    size = (min(panel_w * len(panels) + 1.0, 15), panel_h + (0.4 if all_heads else 0))
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=size, layout="constrained")
    else:
        fig.set_size_inches(*size)
        fig.set_layout_engine("constrained")
    axes = list(fig.subplots(1, len(panels), squeeze=False)[0])
    for h, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
        plot_attention(panel, src_tokens, tgt_tokens if h == 0 else None, ax=ax, title=titles[h])
        ax.images[-1].set_clim(0.0, vmax)  # one scale for every panel (plot_attention scales to its own max)
        if h:
            ax.set_yticks([])
    bar = fig.colorbar(axes[0].images[-1], ax=axes, shrink=0.9)
    bar.set_label(f"weight, 0 to {vmax:.2f} (largest in the layer)", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    if all_heads:
        fig.suptitle(result["title"], fontsize=10)
    return fig


def head_viewer(
    weights,
    src_tokens: Sequence[str] | None = None,
    tgt_tokens: Sequence[str] | None = None,
    *,
    layer_labels: Sequence[str] | None = None,
    head_labels: Sequence[str] | None = None,
    title: str | None = None,
):
    """Browse ``weights`` ``(N, H, T, S)`` head by head, or all heads of a layer at once.

    Returns an ``ipywidgets.VBox``; its ``.result`` attribute holds the latest
    :func:`update_head_viewer` dict.
    """
    import ipywidgets as widgets

    w = as_layer_head_stack(weights)  # (N, H, T, S)
    N, H = w.shape[:2]
    layer_names = list(layer_labels) if layer_labels else [f"layer {i}" for i in range(N)]
    head_names = list(head_labels) if head_labels else [f"head {h}" for h in range(H)]
    layer_pick = widgets.Dropdown(
        options=[(n, i) for i, n in enumerate(layer_names)], value=0, description="layer"
    )
    head_pick = widgets.Dropdown(
        options=[("all heads", -1), *[(n, h) for h, n in enumerate(head_names)]], value=0, description="head"
    )
    text = widgets.HTML()
    plot = picture()
    header = [widgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
    root = widgets.VBox([*header, widgets.HBox([layer_pick, head_pick]), widgets.HBox([plot, text])])

    def compute() -> dict:
        head = None if head_pick.value == -1 else head_pick.value
        return update_head_viewer(
            w,
            layer_pick.value,
            head,
            src_tokens,
            tgt_tokens,
            layer_labels=layer_names,
            head_labels=head_names,
        )

    def draw(result: dict):
        return plot_head_viewer(result, src_tokens, tgt_tokens, head_labels=head_names, fig=new_figure((1, 1)))

    return live(root, text, plot, (layer_pick, head_pick), compute, lambda r: r["summary"], draw)
