"""Lesson 4's worked example of self-attention (as published in Transformer primers): data, update, widget.

Three words, embedding width 4, query/key/value width 3. The published example's sentence is Korean
("나는 고양이를 좋아한다", *I like cats*); the labels below gloss it word by word in its own order.

Shape legend
------------
T    number of words (3 in the example)
d    embedding width (4 in the example)
d_k  query/key/value width (3 in the example)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.core.attention import scaled_dot_product_attention
from attnlab.viz.plots import plot_attention
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = [
    "WORDS",
    "PUBLISHED_X",
    "PUBLISHED_W_Q",
    "PUBLISHED_W_K",
    "PUBLISHED_W_V",
    "PUBLISHED_ROUNDED_SCORES",
    "PUBLISHED_WEIGHTS",
    "PUBLISHED_OUTPUT",
    "worked_example_inputs",
    "update_worked_example",
    "format_worked_example",
    "worked_example_widget",
]

WORDS = ("I", "cat", "like")

# The inputs as the example gives them: rows of X are the three word embeddings.
PUBLISHED_X = ((1, 0, 1, 0), (0, 3, 0, 3), (1, 1, 1, 1))
PUBLISHED_W_Q = ((1, 0, 1), (1, 0, 0), (0, 0, 1), (0, 1, 1))
PUBLISHED_W_K = ((0, 0, 1), (1, 1, 0), (0, 1, 0), (1, 1, 1))
PUBLISHED_W_V = ((0, 2, 0), (0, 3, 0), (1, 0, 3), (1, 1, 0))

# What the example printed for the first word. It rounded the scaled scores [2, 12, 6] / sqrt(3)
# to these values before the softmax, and multiplied V by its 4-digit weights; lesson 4
# reproduces both numbers and shows the exact ones beside them.
PUBLISHED_ROUNDED_SCORES = (1.15, 7.0, 3.5)
PUBLISHED_WEIGHTS = (0.0028, 0.968, 0.0292)
PUBLISHED_OUTPUT = (2.9652, 11.7968, 0.096)


def worked_example_inputs(dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """The example's ``X`` ``(T, d) = (3, 4)`` and ``W_Q``, ``W_K``, ``W_V`` ``(d, d_k) = (4, 3)`` as tensors."""
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    return {
        "X": torch.tensor(PUBLISHED_X, dtype=dtype),  # (T, d)
        "W_Q": torch.tensor(PUBLISHED_W_Q, dtype=dtype),  # (d, d_k)
        "W_K": torch.tensor(PUBLISHED_W_K, dtype=dtype),  # (d, d_k)
        "W_V": torch.tensor(PUBLISHED_W_V, dtype=dtype),  # (d, d_k)
    }


def update_worked_example(
    X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, *, scale: bool = True
) -> dict[str, torch.Tensor]:
    """Every intermediate of one self-attention layer on ``X`` (pure: no state, no drawing).

    Args:
        X: ``(T, d)`` word embeddings, one row per word.
        W_Q, W_K: ``(d, d_k)`` query and key projections.
        W_V: ``(d, d_v)`` value projection.
        scale: divide the scores by :math:`\\sqrt{d_k}` (``False`` shows what scaling changes).

    Returns:
        dict with ``Q``, ``K`` ``(T, d_k)``, ``V`` ``(T, d_v)``, ``scores`` ``(T, T)`` (raw
        :math:`QK^\\top`), ``scaled`` ``(T, T)`` (what enters the softmax), ``weights`` ``(T, T)``
        and ``output`` ``(T, d_v)``.
    """
    X, W_Q, W_K, W_V = (torch.as_tensor(t, dtype=torch.float64) for t in (X, W_Q, W_K, W_V))
    if X.dim() != 2:
        raise ValueError(f"X must be (T, d), got shape {tuple(X.shape)}")
    d = X.shape[1]
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if W.dim() != 2 or W.shape[0] != d:
            raise ValueError(
                f"{name} must be (d, d_k) with d = {d} (the width of X), got shape {tuple(W.shape)}"
            )
    if W_Q.shape[1] != W_K.shape[1]:
        raise ValueError(f"W_Q {tuple(W_Q.shape)} and W_K {tuple(W_K.shape)} must have the same width d_k")
    Q = X @ W_Q  # (T, d_k)
    K = X @ W_K  # (T, d_k)
    V = X @ W_V  # (T, d_v)
    scores = Q @ K.T  # (T, T)
    factor = 1.0 / math.sqrt(Q.shape[1]) if scale else 1.0
    output, weights = scaled_dot_product_attention(Q, K, V, scale=factor)  # (T, d_v), (T, T)
    return {
        "Q": Q,
        "K": K,
        "V": V,
        "scores": scores,
        "scaled": scores * factor,  # (T, T)
        "weights": weights,
        "output": output,
    }


def _fmt_matrix(M: torch.Tensor, decimals: int) -> list[str]:
    return [
        "[" + ", ".join(f"{x:.{decimals}f}".rstrip("0").rstrip(".") or "0" for x in row) + "]"
        for row in M.tolist()
    ]


def format_worked_example(
    result: dict[str, torch.Tensor], words: Sequence[str] = WORDS, decimals: int = 4
) -> str:
    """A plain-text table of :func:`update_worked_example`'s result, one block per word."""
    T = result["Q"].shape[0]
    words = list(words) if len(words) == T else [f"w{i}" for i in range(T)]
    width = max(len(w) for w in words)
    lines = []
    for key, label in (
        ("Q", "query"),
        ("K", "key"),
        ("V", "value"),
        ("scores", "q.k"),
        ("scaled", "scaled"),
        ("weights", "softmax"),
        ("output", "output"),
    ):
        rows = _fmt_matrix(result[key], decimals)
        for i, (w, row) in enumerate(zip(words, rows, strict=True)):
            lines.append(f"{label if i == 0 else '':8s} {w:{width}s}  {row}")
    return "\n".join(lines)


def worked_example_widget(
    X: torch.Tensor | None = None,
    W_Q: torch.Tensor | None = None,
    W_K: torch.Tensor | None = None,
    W_V: torch.Tensor | None = None,
    words: Sequence[str] = WORDS,
):
    """Edit ``X`` and the three weight matrices; Q, K, V, weights and output update live.

    Defaults to the published example's numbers. Returns an ``ipywidgets.VBox``; its ``.result`` attribute
    always holds the latest :func:`update_worked_example` dict (handy for checks).
    """
    import ipywidgets as widgets

    start = worked_example_inputs()
    mats = {
        "X": X if X is not None else start["X"],
        "W_Q": W_Q if W_Q is not None else start["W_Q"],
        "W_K": W_K if W_K is not None else start["W_K"],
        "W_V": W_V if W_V is not None else start["W_V"],
    }
    grids: dict[str, list[list[widgets.FloatText]]] = {}
    boxes = []
    for name, M in mats.items():
        cells = [
            [widgets.FloatText(value=float(x), layout=widgets.Layout(width="58px")) for x in row]
            for row in M.tolist()
        ]
        grids[name] = cells
        boxes.append(
            widgets.VBox(
                [widgets.HTML(f"<b>{name}</b> {tuple(M.shape)}"), *[widgets.HBox(row) for row in cells]]
            )
        )
    scale_box = widgets.Checkbox(value=True, description="divide scores by √d_k")
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox(boxes), scale_box, widgets.HBox([text, plot])])

    def read(name: str) -> torch.Tensor:
        return torch.tensor([[c.value for c in row] for row in grids[name]], dtype=torch.float64)

    def compute() -> dict:
        return update_worked_example(read("X"), read("W_Q"), read("W_K"), read("W_V"), scale=scale_box.value)

    def draw(result: dict):
        fig = new_figure((2.6, 2.4))
        ax = fig.add_subplot()
        plot_attention(result["weights"], list(words), list(words), ax=ax, title="weights")
        return fig

    controls = [c for cells in grids.values() for row in cells for c in row] + [scale_box]
    return live(root, text, plot, controls, compute, lambda r: format_worked_example(r, words), draw)
