"""Lesson 5's mask lab: pick padding lengths and causal on/off, see the mask and the weights.

A small batch of self-attention with random queries and keys (fixed seed) runs through
:func:`attnlab.core.attention.scaled_dot_product_attention` with the mask built by
:mod:`attnlab.core.masks`, so what the lab draws is exactly what the library computes.

Shape legend
------------
B  batch size (one sequence per padding length)
T  padded sequence length (queries and keys: self-attention)
d  feature width of the random queries/keys
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.core.attention import scaled_dot_product_attention
from attnlab.core.masks import causal_mask, combine_masks, padding_mask
from attnlab.viz.plots import plot_attention
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = ["update_mask_lab", "describe_mask_lab", "plot_mask_lab", "mask_lab_widget"]

PAD = "<pad>"


def update_mask_lab(
    lengths: Sequence[int],
    causal: bool,
    *,
    max_len: int | None = None,
    mask_padded_queries: bool = False,
    d: int = 8,
    seed: int = 0,
) -> dict:
    """Build the mask for a padded batch and attend with it (pure: same inputs, same result).

    Args:
        lengths: true length of each sequence (``B`` entries, each ``0 .. max_len``).
        causal: also block future keys.
        max_len: padded length ``T`` (default: the longest length, at least 1).
        mask_padded_queries: also block every key for queries at padding positions, so those
            rows become fully masked (their weights are then all zero by the course's definition).
        d: width of the random queries and keys.
        seed: seed of the random queries and keys.

    Returns:
        dict with ``mask`` ``(B, T, T)`` bool (True = attend), ``weights`` ``(B, T, T)``,
        ``dead_rows`` ``(B, T)`` bool (queries with no allowed key), ``tokens`` (``B`` label
        lists, ``<pad>`` at padding) and ``lengths``.
    """
    lengths = [int(n) for n in lengths]
    if not lengths:
        raise ValueError("lengths is empty: give one length per sequence")
    T = max(max(lengths), 1) if max_len is None else int(max_len)
    if any(n < 0 or n > T for n in lengths):
        raise ValueError(f"every length must be in 0..{T} (max_len), got {lengths}")
    B = len(lengths)
    real = padding_mask(torch.tensor(lengths), T)  # (B, T) True = real token
    mask = combine_masks(
        real[:, None, :],  # (B, 1, T): nobody attends to padding keys
        causal_mask(T) if causal else None,  # (T, T)
        real[:, :, None] if mask_padded_queries else None,  # (B, T, 1): padded queries see nothing
    )  # (B, T, T) or (B, 1, T)
    mask = mask.expand(B, T, T)  # (B, T, T)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, d, generator=gen)  # (B, T, d)
    k = torch.randn(B, T, d, generator=gen)  # (B, T, d)
    v = torch.randn(B, T, d, generator=gen)  # (B, T, d)
    _, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, T, T)
    tokens = [[f"t{i}" if i < n else PAD for i in range(T)] for n in lengths]
    return {
        "mask": mask,
        "weights": weights,
        "dead_rows": ~mask.any(dim=-1),  # (B, T)
        "tokens": tokens,
        "lengths": lengths,
    }


def describe_mask_lab(result: dict) -> str:
    """One line per sequence: its length, how many keys each query may see, dead rows."""
    lines = []
    for b, n in enumerate(result["lengths"]):
        allowed = result["mask"][b].sum(-1).tolist()  # (T,)
        dead = result["dead_rows"][b].nonzero().flatten().tolist()
        lines.append(
            f"sequence {b}: length {n}, keys per query {allowed}, fully masked rows {dead or 'none'}"
        )
    return "\n".join(lines)


def plot_mask_lab(result: dict, cell: float = 2.0, *, fig=None):
    """Masks (top row) and weights (bottom row), one column per sequence.

    Args:
        result: from :func:`update_mask_lab`.
        cell: inches per panel.
        fig: an empty matplotlib Figure to draw on (resized to fit); a new pyplot figure when ``None``.

    Returns:
        The Figure.
    """

    B = len(result["lengths"])
    size = (cell * B + 0.5, 2 * cell + 0.8)
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=size)
    else:
        fig.set_size_inches(*size)
    axes = fig.subplots(2, B, squeeze=False)
    for b in range(B):
        toks = result["tokens"][b]
        plot_attention(result["mask"][b].float(), toks, toks, ax=axes[0, b], cmap="Greys")
        axes[0, b].set_xlabel(f"mask, length {result['lengths'][b]}", fontsize=8)
        plot_attention(result["weights"][b], None, toks, ax=axes[1, b])
        axes[1, b].set_xlabel("weights", fontsize=8)
    fig.tight_layout()
    return fig


def mask_lab_widget(lengths: Sequence[int] = (5, 3), max_len: int = 6, causal: bool = False):
    """Sliders for each sequence's length, check boxes for causal and padded queries.

    Returns an ``ipywidgets.VBox``; its ``.result`` attribute holds the latest
    :func:`update_mask_lab` dict.
    """
    import ipywidgets as widgets

    sliders = [
        widgets.IntSlider(value=int(n), min=0, max=max_len, description=f"length {b}")
        for b, n in enumerate(lengths)
    ]
    causal_box = widgets.Checkbox(value=causal, description="causal")
    queries_box = widgets.Checkbox(value=False, description="mask padded queries")
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox(
        [widgets.HBox([widgets.VBox(sliders), widgets.VBox([causal_box, queries_box])]), text, plot]
    )

    def compute() -> dict:
        return update_mask_lab(
            [s.value for s in sliders],
            causal_box.value,
            max_len=max_len,
            mask_padded_queries=queries_box.value,
        )

    def draw(result: dict):
        return plot_mask_lab(result, fig=new_figure((1, 1)))

    return live(root, text, plot, (*sliders, causal_box, queries_box), compute, describe_mask_lab, draw)
