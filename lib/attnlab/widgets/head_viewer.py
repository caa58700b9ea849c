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

from attnlab.widgets._live import live

__all__ = ["as_layer_head_stack", "update_head_viewer", "head_viewer"]


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
        ``entropy`` (mean row entropy in nats per head, ``(H,)`` or a float) and ``summary`` (text).
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

    if head is None:
        sel = w[layer : layer + 1]  # (1, H, T, S)
        entropy = _entropy(sel[0]).mean(-1)  # (H,)
        summary = "\n".join(f"{head_names[h]}: mean entropy {entropy[h]:.3f} nats" for h in range(H))
        return {
            "weights": sel,
            "title": f"{layer_name}, all heads",
            "argmax": None,
            "entropy": entropy,
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
        "summary": summary,
    }


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
    import matplotlib.pyplot as plt

    from attnlab.plots import plot_attention, plot_attention_grid

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
    plot = widgets.Output()
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
        if result["argmax"] is None:  # all heads of the layer
            return plot_attention_grid(
                result["weights"],
                row_labels=[layer_names[layer_pick.value]],
                col_labels=head_names,
                title=result["title"],
            )
        T, S = result["weights"].shape
        fig, ax = plt.subplots(figsize=(min(0.3 * S + 1.5, 8), min(0.3 * T + 1.2, 8)))
        plot_attention(result["weights"], src_tokens, tgt_tokens, ax=ax, title=result["title"])
        return fig

    return live(root, text, plot, (layer_pick, head_pick), compute, lambda r: r["summary"], draw)
