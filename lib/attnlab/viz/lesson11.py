"""Lesson 11's pictures: the two masks, the head-by-layer AER grids, the attention mass on the first token.

Shape legend
------------
L  sequence length (source + target)
N  layers
H  heads
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["plot_lm_masks", "plot_aer_grids", "plot_first_token_mass"]


def plot_lm_masks(masks: Mapping[str, torch.Tensor], tokens: Sequence[str], n_source: int):
    """Draw boolean ``(L, L)`` masks side by side (black = may attend), the source block outlined.

    Args:
        masks: ``{title: (L, L) bool}``.
        tokens: the ``L`` tokens (row and column labels).
        n_source: how many of them are the source (the outlined block).
    """
    fig, axes = plt.subplots(1, len(masks), figsize=(3.4 * len(masks), 3.4), squeeze=False)
    for ax, (title, mask) in zip(axes[0], masks.items(), strict=True):
        ax.imshow(mask.float().numpy(), cmap="Greys", vmin=0, vmax=1)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
        ax.add_patch(plt.Rectangle((-0.5, -0.5), n_source, n_source, fill=False, edgecolor="tab:orange", lw=2))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key (attended to)", fontsize=8)
    axes[0, 0].set_ylabel("query", fontsize=8)
    fig.tight_layout()
    return fig


def plot_aer_grids(grids: Mapping[str, np.ndarray], *, vmax: float = 1.0):
    """Heat maps of ``(N, H)`` AER grids, one panel per model, each cell labelled (lower = better aligned)."""
    fig, axes = plt.subplots(1, len(grids), figsize=(3.2 * len(grids), 2.8), squeeze=False,
                             gridspec_kw={"width_ratios": [max(np.shape(g)[0], 1) for g in grids.values()]})
    for ax, (title, grid) in zip(axes[0], grids.items(), strict=True):
        g = np.asarray(grid).T  # (H, N): heads down, layers across
        im = ax.imshow(g, cmap="viridis_r", vmin=0, vmax=vmax)
        for (h, n), v in np.ndenumerate(g):
            ax.text(n, h, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white" if v > vmax / 2 else "black")
        ax.set_xticks(range(g.shape[1]), [f"layer {n}" for n in range(g.shape[1])], fontsize=8)
        ax.set_yticks(range(g.shape[0]), [f"head {h}" for h in range(g.shape[0])], fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="AER (lower = closer to gold)")
    return fig


def plot_first_token_mass(sinks: Mapping[str, dict]):
    """Per layer the attention mass on the first token (one line per run), with uniform attention's share dotted."""
    fig, ax = plt.subplots(figsize=(4.5, 2.8))
    for name, s in sinks.items():
        ax.plot(range(len(s["first"])), s["first"], marker="o", label=name)
    uniform = float(np.mean([s["uniform"] for s in sinks.values()]))
    ax.axhline(uniform, ls=":", color="grey", label="uniform attention")
    n = max(len(s["first"]) for s in sinks.values())
    ax.set_xticks(range(n), [f"layer {i}" for i in range(n)])
    ax.set_ylabel("mass on the first token")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
