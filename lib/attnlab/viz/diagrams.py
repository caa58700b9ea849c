"""Textbook diagrams of the course's models, drawn by code so that they are regenerated, not pasted.

Each function draws with matplotlib patches (boxes, circles, arrows) on an Axes whose data unit is
one inch, and returns the Figure. None of them shows the figure.

* :func:`draw_seq2seq_bottleneck` (lesson 01): a GRU encoder reads the source, its last state is
  the single context vector ``c``, and a GRU decoder writes the target from that vector alone.
* :func:`draw_attention_step` (lesson 02): one attention step with real numbers: the scores
  ``e_j``, the softmax weights ``alpha_j`` as bars, and the context ``c_t`` as the weighted sum of
  the encoder states (arrow widths proportional to the weights). The numbers come from the plain
  function :func:`attention_step_numbers`.
* :func:`draw_attention_encoder_decoder` (lesson 02): lesson 01's drawing with attention: every
  encoder state feeds the context ``c_t`` of the step being written, through arrows whose widths are
  the attention weights, and a fresh context is computed at every step.
* :func:`draw_step_order` (lesson 03): the order of one decoding step in Bahdanau's and in Luong's
  decoder (attend then step, against step then attend, with input feeding).
* :func:`draw_transformer_block` (lesson 06): one encoder or decoder layer with its residual
  paths, LayerNorm placed before the sublayer (pre-LN, the course default) or after the sum
  (post-LN, the 2017 paper).
* :func:`draw_encoder_decoder_stack` (lesson 06): the whole Transformer: embeddings and positions,
  the two stacks of layers, the encoder memory feeding every decoder layer's cross-attention,
  and the output projection.

* :func:`draw_qkv_projections` (lesson 04), :func:`draw_multihead` (lesson 05) and
  :func:`draw_warmup_schedule` (lesson 06, with :func:`noam_rate`, the paper's schedule).

Labels are sized to stay inside their boxes at the default figure sizes; the tests check it with
:func:`_layout_problems`, which works on any figure drawn here.

Shape legend
------------
S   source length (number of scores / encoder states)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import cbook
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path

from attnlab.core.checks import check_choice, check_positive_int

__all__ = [
    "attention_step_numbers",
    "draw_attention_encoder_decoder",
    "draw_attention_step",
    "draw_step_order",
    "draw_encoder_decoder_stack",
    "draw_seq2seq_bottleneck",
    "draw_transformer_block",
    "draw_qkv_projections",
    "draw_multihead",
    "noam_rate",
    "draw_warmup_schedule",
]

KINDS = ("encoder", "decoder")
NORMS = ("pre", "post")

FONT = 9  # box labels and tokens: about 10 px at 80 dpi
SMALL = 8  # notes and headers
LINE = "#404040"
ENCODER = ("#dbe9f6", "#4a78a8")  # (face, edge)
DECODER = ("#fde3cf", "#c0732f")
CONTEXT = ("#ffd966", "#a87900")
NORM = ("#fbf3c4", "#a89a3c")
ATTENTION = ("#f9d5bb", "#c0732f")
FEED_FORWARD = ("#cfe3f3", "#4a78a8")
EMBEDDING = ("#f6d0d8", "#b0566b")
OUTPUT = ("#e0d8ef", "#6f5a9e")
ADD = ("white", LINE)

_BOX_GID = "attnlab-box-"
_box_ids = itertools.count()  # unique across figures and axes, so that two diagrams can share a figure
_measure = RendererAgg(8, 8, 72)  # at 72 dpi one pixel is one point


# ---------------------------------------------------------------------------------------------
# drawing helpers


def _text_size(text: str, fontsize: float, style: str = "normal") -> tuple[float, float]:
    """Width and height in inches of ``text`` (several lines allowed) at ``fontsize``."""
    prop = FontProperties(size=fontsize, style=style)
    widths, heights = [], []
    for line in text.split("\n"):
        w, h, _ = _measure.get_text_width_height_descent(line or " ", prop, ismath=cbook.is_math_text(line))
        widths.append(float(w))
        heights.append(float(h))
    height = sum(heights) + (len(heights) - 1) * 0.2 * fontsize  # matplotlib's 1.2 line spacing
    return max(widths) / 72, height / 72


def _plain(token: str) -> str:
    """A token shown literally: a ``$`` in it must not start mathtext."""
    return str(token).replace("$", r"\$")


def _canvas(ax, width: float, height: float):
    """A Figure and Axes whose data unit is one inch (a new figure of that size when ``ax`` is None)."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(width, height))
        fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax.figure, ax


def _register(ax, patch, label: str, x: float, y: float, fontsize: float, **text_kw):
    """Add ``patch`` with ``label`` centred at (x, y); the shared gid ties them for the layout check."""
    gid = f"{_BOX_GID}{next(_box_ids)}"
    patch.set_gid(gid)
    patch.set_zorder(2)
    ax.add_patch(patch)
    ax.text(x, y, label, ha="center", va="center", fontsize=fontsize, gid=gid + ":label", zorder=3, **text_kw)
    return patch


def _box(ax, x, y, w, h, label, colours, *, fontsize=FONT, lw=1.0, **text_kw):
    """A rounded box of size (w, h) centred at (x, y) with a centred label."""
    face, edge = colours
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2),
        w,
        h,
        boxstyle=f"round,pad=0,rounding_size={0.2 * min(w, h):.3f}",
        facecolor=face,
        edgecolor=edge,
        linewidth=lw,
    )
    return _register(ax, patch, label, x, y, fontsize, **text_kw)


def _add_circle(ax, x, y, r=0.12):
    """The residual sum: a circle with a plus sign."""
    return _register(ax, Circle((x, y), r, facecolor=ADD[0], edgecolor=ADD[1], linewidth=1.0), "+", x, y, FONT + 1)


def _arrow(ax, *points, lw=1.0, color=LINE, head=8, **kw):
    """An arrow along the polyline ``points`` (two or more (x, y) pairs), head at the last point."""
    patch = FancyArrowPatch(
        path=Path(points),
        arrowstyle="-|>",
        mutation_scale=head,
        linewidth=lw,
        color=color,
        shrinkA=0,
        shrinkB=0,
        zorder=1,
        **kw,
    )
    ax.add_patch(patch)
    return patch


def _layout_problems(fig, *, margin_px: float = 1.0) -> list[str]:
    """Render ``fig`` and list every text that leaves the figure, leaves its box, or collides.

    A box label (drawn by the helpers above) must lie inside its own box, ``margin_px`` pixels
    clear of the edge; no text may overlap another text or a box that is not its own. An empty
    list means the layout is clean. The tests call this on every diagram.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith(_BOX_GID):
                boxes[gid] = patch.get_window_extent(renderer)
    texts = [t for ax in fig.axes for t in ax.texts] + list(fig.texts)
    texts = [t for t in texts if t.get_visible() and t.get_text().strip()]
    extents = [t.get_window_extent(renderer) for t in texts]
    problems = []
    page = fig.bbox
    for text, bb in zip(texts, extents, strict=True):
        name = repr(text.get_text())
        if bb.x0 < page.x0 - 0.5 or bb.y0 < page.y0 - 0.5 or bb.x1 > page.x1 + 0.5 or bb.y1 > page.y1 + 0.5:
            problems.append(f"{name} leaves the figure: {bb.bounds} outside {page.bounds}")
        own = (text.get_gid() or "").removesuffix(":label")
        if own in boxes:
            box = boxes[own].padded(-margin_px)
            if bb.x0 < box.x0 or bb.y0 < box.y0 or bb.x1 > box.x1 or bb.y1 > box.y1:
                problems.append(f"{name} overflows its box: {bb.bounds} not inside {box.bounds}")
        for gid, box in boxes.items():
            if gid != own and bb.overlaps(box):
                problems.append(f"{name} overlaps box {gid}")
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if extents[i].overlaps(extents[j]):
                problems.append(f"{texts[i].get_text()!r} overlaps {texts[j].get_text()!r}")
    return problems


# ---------------------------------------------------------------------------------------------
# lesson 01: the bottleneck


def draw_seq2seq_bottleneck(
    src_tokens: Sequence[str] = ("the", "cat", "sleeps", "."),
    tgt_tokens: Sequence[str] = ("le", "chat", "dort", "."),
    ax=None,
):
    """Draw the encoder-decoder without attention: the whole source passes through one vector ``c``.

    The encoder's GRU states ``h_1..h_S`` run over the source tokens; its final states become the
    context ``c`` (lesson 01's bidirectional encoder joins the last forward and the first backward
    state). ``c`` starts the decoder and is read again at every step, the decoder's only view of
    the source. The decoder's states ``s_1..s_T`` are fed ``<bos>`` and then the previous target
    words, and emit the target.

    Args:
        src_tokens: the ``S`` source tokens (at least one).
        tgt_tokens: the ``T`` target tokens (at least one).
        ax: Axes to draw on (a new figure of the size the labels need when None; a smaller Axes may
            make them overflow their boxes).

    Returns:
        The Figure.
    """
    src = [_plain(t) for t in src_tokens]
    tgt = [_plain(t) for t in tgt_tokens]
    for name, toks in (("src_tokens", src), ("tgt_tokens", tgt)):
        if not toks:
            raise ValueError(f"{name} must hold at least one token, got {len(toks)}")
    dec_in = ["<bos>", *tgt[:-1]]
    cell_w, cell_h, gap = 0.45, 0.4, 0.2
    enc_head, dec_head = "encoder: a GRU reads the source", "decoder: a GRU writes the target"
    enc_pitch = max(cell_w, *(_text_size(t, FONT)[0] for t in src)) + gap
    dec_pitch = max(cell_w, *(_text_size(t, FONT)[0] for t in dec_in + tgt)) + gap
    # a short sentence still needs room for its header
    enc_pitch = max(enc_pitch, (_text_size(enc_head, SMALL, "italic")[0] + 0.1) / len(src))
    dec_pitch = max(dec_pitch, (_text_size(dec_head, SMALL, "italic")[0] + 0.1) / len(tgt))
    c_label = "$c$ = final states:\nthe whole sentence\nin $H$ numbers"
    note = "every step reads the\nsame $c$: its only\nview of the source"
    c_w = max(_text_size(c_label, FONT)[0], _text_size(note, SMALL)[0]) + 0.25
    c_h = _text_size(c_label, FONT)[1] + 0.2
    margin = 0.15
    x_enc = [margin + enc_pitch * (j + 0.5) for j in range(len(src))]
    x_c = x_enc[-1] + enc_pitch / 2 + 0.25 + c_w / 2
    x_dec0 = x_c + c_w / 2 + 0.25
    x_dec = [x_dec0 + dec_pitch * (t + 0.5) for t in range(len(tgt))]
    width, height = x_dec[-1] + dec_pitch / 2 + margin, 2.9
    y_in, y_cell, y_out, y_head = 0.35, 1.25, 2.05, 2.6
    fig, ax = _canvas(ax, width, height)

    def header(xs, text):
        ax.text((xs[0] + xs[-1]) / 2, y_head, text, ha="center", va="center", fontsize=SMALL, style="italic")

    header(x_enc, enc_head)
    header(x_dec, dec_head)
    for j, (x, tok) in enumerate(zip(x_enc, src, strict=True)):
        ax.text(x, y_in, tok, ha="center", va="center", fontsize=FONT)
        _arrow(ax, (x, y_in + 0.15), (x, y_cell - cell_h / 2))
        _box(ax, x, y_cell, cell_w, cell_h, f"$h_{{{j + 1}}}$", ENCODER)
        if j:
            _arrow(ax, (x_enc[j - 1] + cell_w / 2, y_cell), (x - cell_w / 2, y_cell))
    for t, (x, tok_in, tok_out) in enumerate(zip(x_dec, dec_in, tgt, strict=True)):
        ax.text(x, y_in, tok_in, ha="center", va="center", fontsize=FONT)
        _arrow(ax, (x, y_in + 0.15), (x, y_cell - cell_h / 2))
        _box(ax, x, y_cell, cell_w, cell_h, f"$s_{{{t + 1}}}$", DECODER)
        _arrow(ax, (x, y_cell + cell_h / 2), (x, y_out - 0.13))
        ax.text(x, y_out, tok_out, ha="center", va="center", fontsize=FONT, weight="bold")
        if t:
            _arrow(ax, (x_dec[t - 1] + cell_w / 2, y_cell), (x - cell_w / 2, y_cell))
    _box(ax, x_c, y_cell, c_w, c_h, c_label, CONTEXT, lw=2.0)
    _arrow(ax, (x_enc[-1] + cell_w / 2, y_cell), (x_c - c_w / 2, y_cell), lw=1.5)
    _arrow(ax, (x_c + c_w / 2, y_cell), (x_dec[0] - cell_w / 2, y_cell), lw=2.5, color=CONTEXT[1], head=11)
    for x in x_dec[1:]:  # the same c enters every later step too, from below (thin: the same vector)
        ax.annotate(
            "",
            xy=(x - cell_w / 4, y_cell - cell_h / 2),
            xytext=(x_c + c_w / 2, y_cell - c_h / 4),
            arrowprops=dict(arrowstyle="-|>", color=CONTEXT[1], lw=0.8, alpha=0.7, connectionstyle="arc3,rad=0.25"),
        )
    ax.text(x_c, y_in, note, ha="center", va="center", fontsize=SMALL, color=CONTEXT[1])
    return fig


# ---------------------------------------------------------------------------------------------
# lesson 02: the encoder-decoder with attention


def draw_attention_encoder_decoder(
    src_tokens: Sequence[str] = ("the", "cat", "sleeps", "."),
    tgt_tokens: Sequence[str] = ("le", "chat", "dort", "."),
    weights: Sequence[float] | None = None,
    step: int | None = None,
    ax=None,
):
    """Draw the encoder-decoder with attention, laid out like :func:`draw_seq2seq_bottleneck`.

    The encoder states ``h_1..h_S`` and the decoder states ``s_1..s_T`` are drawn as in lesson 01.
    Instead of one summary ``c``, the context box ``c_t`` of decoder step ``step`` receives an arrow
    from **every** encoder state, of width proportional to its attention weight, and feeds that
    step; the note says that every step computes its own context.

    Args:
        src_tokens: the ``S`` source tokens (at least one).
        tgt_tokens: the ``T`` target tokens (at least one).
        weights: the ``S`` attention weights of step ``step`` (non-negative, summing to 1); None for
            a made-up peak on the source word at the same position (``step``, or the last one).
        step: 0-based index of the highlighted decoder step (default: ``min(S, T) - 1``).
        ax: Axes to draw on (a new figure of the size the labels need when None).

    Returns:
        The Figure.

    Raises:
        ValueError: empty sentences, ``step`` out of range, or ``weights`` of the wrong length, with
            negative entries or not summing to 1.
    """
    src = [_plain(t) for t in src_tokens]
    tgt = [_plain(t) for t in tgt_tokens]
    for name, toks in (("src_tokens", src), ("tgt_tokens", tgt)):
        if not toks:
            raise ValueError(f"{name} must hold at least one token, got {len(toks)}")
    step = min(len(src), len(tgt)) - 1 if step is None else step
    if not (isinstance(step, int) and 0 <= step < len(tgt)):
        raise ValueError(f"step must be an int in [0, {len(tgt) - 1}], got {step!r}")
    if weights is None:
        centre = min(step, len(src) - 1)
        raw = np.exp(-2.0 * np.abs(np.arange(len(src)) - centre))
        alpha = raw / raw.sum()
    else:
        alpha = np.asarray(weights, dtype=np.float64)
        if alpha.shape != (len(src),):
            raise ValueError(f"weights must have one entry per source token (S={len(src)}), got shape {alpha.shape}")
        if (alpha < 0).any() or abs(alpha.sum() - 1) > 1e-6:
            raise ValueError(f"weights must be non-negative and sum to 1, got sum {alpha.sum():.6f}")
    dec_in = ["<bos>", *tgt[:-1]]
    cell_w, cell_h, gap = 0.45, 0.4, 0.2
    enc_head, dec_head = "encoder: a GRU reads the source", "decoder: a GRU writes the target"
    enc_pitch = max(cell_w, *(_text_size(t, FONT)[0] for t in src)) + gap
    dec_pitch = max(cell_w, *(_text_size(t, FONT)[0] for t in dec_in + tgt)) + gap
    enc_pitch = max(enc_pitch, (_text_size(enc_head, SMALL, "italic")[0] + 0.1) / len(src))
    dec_pitch = max(dec_pitch, (_text_size(dec_head, SMALL, "italic")[0] + 0.1) / len(tgt))
    c_label = f"$c_{{{step + 1}}} = \\sum_j \\alpha_{{{step + 1}j}} h_j$"
    note = "every step computes\nits own context from\nall encoder states"
    c_w = max(_text_size(c_label, FONT)[0], _text_size(note, SMALL)[0]) + 0.25
    c_h = _text_size(c_label, FONT)[1] + 0.3
    margin = 0.15
    x_enc = [margin + enc_pitch * (j + 0.5) for j in range(len(src))]
    x_c = x_enc[-1] + enc_pitch / 2 + 0.25 + c_w / 2
    x_dec0 = x_c + c_w / 2 + 0.25
    x_dec = [x_dec0 + dec_pitch * (t + 0.5) for t in range(len(tgt))]
    width, height = x_dec[-1] + dec_pitch / 2 + margin, 3.3
    y_in, y_cell, y_out, y_head, y_c = 0.35, 1.25, 2.05, 3.0, 2.45
    fig, ax = _canvas(ax, width, height)

    def header(xs, text):
        ax.text((xs[0] + xs[-1]) / 2, y_head, text, ha="center", va="center", fontsize=SMALL, style="italic")

    header(x_enc, enc_head)
    header(x_dec, dec_head)
    for j, (x, tok) in enumerate(zip(x_enc, src, strict=True)):
        ax.text(x, y_in, tok, ha="center", va="center", fontsize=FONT)
        _arrow(ax, (x, y_in + 0.15), (x, y_cell - cell_h / 2))
        _box(ax, x, y_cell, cell_w, cell_h, f"$h_{{{j + 1}}}$", ENCODER)
        if j:
            _arrow(ax, (x_enc[j - 1] + cell_w / 2, y_cell), (x - cell_w / 2, y_cell))
    for t, (x, tok_in, tok_out) in enumerate(zip(x_dec, dec_in, tgt, strict=True)):
        ax.text(x, y_in, tok_in, ha="center", va="center", fontsize=FONT)
        _arrow(ax, (x, y_in + 0.15), (x, y_cell - cell_h / 2))
        _box(ax, x, y_cell, cell_w, cell_h, f"$s_{{{t + 1}}}$", DECODER, lw=2.0 if t == step else 1.0)
        _arrow(ax, (x, y_cell + cell_h / 2), (x, y_out - 0.13))
        ax.text(x, y_out, tok_out, ha="center", va="center", fontsize=FONT, weight="bold")
        if t:
            _arrow(ax, (x_dec[t - 1] + cell_w / 2, y_cell), (x - cell_w / 2, y_cell))
    _box(ax, x_c, y_c, c_w, c_h, c_label, CONTEXT, lw=2.0)
    for x, a in zip(x_enc, alpha, strict=True):  # every encoder state feeds c_t, as wide as its weight
        _arrow(ax, (x + cell_w / 4, y_cell + cell_h / 2), (x_c - c_w / 2, y_c - c_h / 4),
               lw=0.3 + 5.0 * float(a), color=CONTEXT[1], head=6, gid="attention-weight")
    _arrow(ax, (x_c + c_w / 2, y_c), (x_dec[step] - cell_w / 2, y_cell + cell_h / 4), lw=2.0, color=CONTEXT[1])
    ax.text(x_c, (y_in + y_cell) / 2 - 0.05, note, ha="center", va="center", fontsize=SMALL, color=CONTEXT[1])
    return fig


# ---------------------------------------------------------------------------------------------
# lesson 03: the order of one decoding step

STEP_ORDER = {
    "bahdanau": (
        "Bahdanau et al. (2014): attend, then step",
        ("$s_{t-1}$", "score $h_j$\nagainst $s_{t-1}$", "softmax,\n$c_t = \\sum_j \\alpha_{tj} h_j$",
         "GRU step:\n$s_t$ from $[E y_{t-1}; c_t]$", "$p(y_t)$ from\n$s_t$, $c_t$, $E y_{t-1}$"),
    ),
    "luong": (
        "Luong et al. (2015): step, then attend",
        ("$h_{t-1}$, $\\tilde h_{t-1}$", "RNN step:\n$h_t$ from $[E y_{t-1}; \\tilde h_{t-1}]$",
         "score $\\bar h_s$\nagainst $h_t$", "softmax, $c_t$;\n$\\tilde h_t = \\tanh(W_c[c_t; h_t])$",
         "$p(y_t)$ from\n$\\tilde h_t$"),
    ),
}


def draw_step_order(ax=None):
    """Draw one decoding step of Bahdanau's decoder above one of Luong's: the same five stages in
    a different order (:data:`STEP_ORDER`), and Luong's input feeding, an arrow from
    :math:`\\tilde h_t` back into the next step's RNN input.

    Returns:
        The Figure.
    """
    rows = list(STEP_ORDER.values())
    n = max(len(stages) for _, stages in rows)
    box_w = max(_text_size(label, FONT)[0] for _, stages in rows for label in stages) + 0.25
    box_h = max(_text_size(label, FONT)[1] for _, stages in rows for label in stages) + 0.25
    pitch, margin = box_w + 0.35, 0.15
    width = margin * 2 + pitch * (n - 1) + box_w
    height = 2 * (box_h + 0.55) + 0.85
    fig, ax = _canvas(ax, width, height)
    for r, (title, stages) in enumerate(rows):
        y = height - 0.5 - box_h / 2 - r * (box_h + 0.75)
        ax.text(margin, y + box_h / 2 + 0.15, title, ha="left", va="center", fontsize=SMALL, style="italic")
        for k, label in enumerate(stages):
            x = margin + box_w / 2 + k * pitch
            is_attention = ("score" in label) or ("softmax" in label)
            _box(ax, x, y, box_w, box_h, label, ATTENTION if is_attention else DECODER if k else CONTEXT)
            if k:
                _arrow(ax, (x - pitch + box_w / 2, y), (x - box_w / 2, y))
        if r == 1:  # input feeding: h~_t goes back into the next step's RNN input
            x_from, x_to = margin + box_w / 2 + 3 * pitch, margin + box_w / 2 + pitch
            ax.annotate("", xy=(x_to, y - box_h / 2), xytext=(x_from, y - box_h / 2),
                        arrowprops=dict(arrowstyle="-|>", color=CONTEXT[1], lw=1.2, connectionstyle="arc3,rad=-0.25"))
            ax.text((x_from + x_to) / 2, y - box_h / 2 - 0.32, "input feeding (next step)", ha="center",
                    va="center", fontsize=SMALL, color=CONTEXT[1])
    return fig


# ---------------------------------------------------------------------------------------------
# lesson 02: one attention step


def attention_step_numbers(scores) -> dict[str, np.ndarray]:
    """The numbers of one attention step: the scores and their softmax weights.

    The softmax subtracts the largest score first, so scores such as ``[1000, 1001]`` give the
    same weights as ``[0, 1]``. A score of ``-inf`` is a masked position (weight 0); if every
    score is ``-inf`` all weights are 0, never NaN.

    Args:
        scores: ``(S,)`` scores ``e_j`` (list, NumPy array or tensor of real numbers).

    Returns:
        ``{"scores": (S,) float64 array, "weights": (S,) float64 array}``.

    Raises:
        TypeError: ``scores`` does not hold real numbers.
        ValueError: ``scores`` is not 1-D, is empty, or holds NaN or ``+inf``.
    """
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().double().numpy()
    try:
        e = np.asarray(scores, dtype=np.float64)  # (S,)
    except (TypeError, ValueError) as err:
        raise TypeError(f"scores must hold real numbers, got {type(scores).__name__} {scores!r}") from err
    if e.ndim != 1 or e.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D sequence (S,), got shape {e.shape}")
    if np.isnan(e).any() or np.isposinf(e).any():
        raise ValueError(f"scores must be finite or -inf (masked), got {e.tolist()}")
    kept = np.isfinite(e)  # (S,)
    weights = np.zeros_like(e)  # (S,)
    if kept.any():
        z = np.exp(e[kept] - e[kept].max())
        weights[kept] = z / z.sum()
    return {"scores": e, "weights": weights}


def _number(value: float) -> str:
    return r"$-\infty$" if np.isneginf(value) else f"{value:.2f}"


def draw_attention_step(scores, src_tokens: Sequence[str], query_label: str = "s_{t-1}", ax=None):
    """Draw one attention step with its numbers: scores, softmax weights, weighted sum.

    One row per source token ``j``: its encoder state ``h_j``, its score ``e_j``, its weight
    ``alpha_j`` (value and a bar of proportional length), and an arrow into the context box
    ``c_t`` whose width is proportional to ``alpha_j``. The numbers come from
    :func:`attention_step_numbers`.

    Args:
        scores: ``(S,)`` scores ``e_j`` of the query against each encoder state.
        src_tokens: the ``S`` source tokens.
        query_label: mathtext (without ``$``) for the query, ``"s_{t-1}"`` for Bahdanau attention.
        ax: Axes to draw on (a new figure of the size the labels need when None; a smaller Axes may
            make them overflow their boxes).

    Returns:
        The Figure.

    Raises:
        ValueError: ``src_tokens`` does not have one token per score (and see
            :func:`attention_step_numbers`).
    """
    numbers = attention_step_numbers(scores)
    e, alpha = numbers["scores"], numbers["weights"]  # (S,), (S,)
    tokens = [_plain(t) for t in src_tokens]
    if len(tokens) != len(e):
        raise ValueError(f"src_tokens has {len(tokens)} tokens but scores has S={len(e)} entries")
    S = len(e)
    row, top = 0.36, 0.85
    tok_w = max(_text_size(t, FONT)[0] for t in tokens)
    x_tok = 0.2 + tok_w  # right edge of the token column
    x_h = x_tok + 0.4
    x_e = x_h + 0.75
    x_val = x_e + 0.95  # right edge of the weight values
    bar0, bar_len = x_val + 0.12, 1.5
    x_c = bar0 + bar_len + 1.3
    width, height = x_c + 0.75, top + S * row + 0.25
    fig, ax = _canvas(ax, width, height)
    ys = [height - top - row * (j + 0.5) for j in range(S)]
    y_head = height - top + 0.2
    title = rf"the query ${query_label}$ scores every encoder state: $e_j = \mathrm{{score}}({query_label}, h_j)$"
    ax.text(width / 2, height - 0.22, title, ha="center", va="center", fontsize=SMALL)
    ax.text(x_h, y_head, "$h_j$", ha="center", va="center", fontsize=FONT)
    ax.text(x_e, y_head, "$e_j$", ha="center", va="center", fontsize=FONT)
    ax.text(
        (x_val - 0.3 + bar0 + bar_len) / 2,
        y_head,
        r"$\alpha_j = \mathrm{softmax}(e)_j$",
        ha="center",
        va="center",
        fontsize=FONT,
    )
    for j, y in enumerate(ys):
        ax.text(x_tok, y, tokens[j], ha="right", va="center", fontsize=FONT)
        _box(ax, x_h, y, 0.5, row * 0.78, f"$h_{{{j + 1}}}$", ENCODER)
        ax.text(x_e, y, _number(e[j]), ha="center", va="center", fontsize=FONT)
        ax.text(x_val, y, f"{alpha[j]:.2f}", ha="right", va="center", fontsize=FONT)
        ax.add_patch(
            Rectangle(
                (bar0, y - row * 0.3),
                bar_len * alpha[j],
                row * 0.6,
                facecolor=ATTENTION[0],
                edgecolor=ATTENTION[1],
                linewidth=0.8,
            )
        )
    y_c = (ys[0] + ys[-1]) / 2
    c_w, c_h = 0.55, 0.42
    for y, a in zip(ys, alpha, strict=True):
        if a > 0:
            _arrow(
                ax,
                (bar0 + bar_len * a + 0.08, y),
                (x_c - c_w / 2, y_c),
                lw=0.3 + 5.0 * a,
                color=ATTENTION[1],
                head=6 + 6 * a,
                alpha=0.85,
            )
    _box(ax, x_c, y_c, c_w, c_h, "$c_t$", CONTEXT, lw=2.0, fontsize=FONT + 1)
    ax.text(x_c, y_head, r"$c_t=\sum_j \alpha_j h_j$", ha="center", va="center", fontsize=FONT)
    return fig


# ---------------------------------------------------------------------------------------------
# lesson 06: the Transformer


_NORM_H, _SUB_H, _ADD_R, _GAP = 0.3, 0.5, 0.12, 0.17
_GROUP_H = 3 * _GAP + _NORM_H + _SUB_H + 2 * _ADD_R  # one sublayer with its LayerNorm and sum
_LINK = 0.25  # plain line from one group's sum to the next group's branch point


def _residual_sublayer(ax, x, y, w, label, colours, norm, *, x_skip):
    """Draw one sublayer with its residual sum and LayerNorm, from the branch point at height ``y`` up.

    Returns the top of the group (``y + _GROUP_H``) and the sublayer's box, for side inputs.
    """
    ax.plot([x], [y], marker="o", markersize=3.5, color=LINE, zorder=3)
    cursor = y + _GAP
    _arrow(ax, (x, y), (x, cursor))
    if norm == "pre":
        _box(ax, x, cursor + _NORM_H / 2, w, _NORM_H, "LayerNorm", NORM)
        cursor += _NORM_H + _GAP
        _arrow(ax, (x, cursor - _GAP), (x, cursor))
    sub = _box(ax, x, cursor + _SUB_H / 2, w, _SUB_H, label, colours)
    cursor += _SUB_H + _GAP
    y_add = cursor + _ADD_R
    _arrow(ax, (x, cursor - _GAP), (x, y_add - _ADD_R))
    _add_circle(ax, x, y_add, _ADD_R)
    _arrow(ax, (x, y), (x_skip, y), (x_skip, y_add), (x - _ADD_R, y_add), color="#7a7a7a")
    cursor = y_add + _ADD_R
    if norm == "post":
        _arrow(ax, (x, cursor), (x, cursor + _GAP))
        _box(ax, x, cursor + _GAP + _NORM_H / 2, w, _NORM_H, "LayerNorm", NORM)
        cursor += _GAP + _NORM_H
    return cursor, sub


def draw_transformer_block(kind: str = "encoder", norm: str = "pre", ax=None):
    """Draw one Transformer layer with its residual paths, data flowing upwards.

    An encoder layer is multi-head self-attention then a feed-forward network; a decoder layer is
    masked (causal) self-attention, cross-attention (queries from the decoder, keys and values from
    the encoder memory), then a feed-forward network. Each sublayer sits in a residual connection
    (the grey arrow that skips around it) with a LayerNorm: before the sublayer inside the branch
    (``norm="pre"``: ``x + Sublayer(LN(x))``) or after the sum (``norm="post"``:
    ``LN(x + Sublayer(x))``).

    Args:
        kind: ``"encoder"`` or ``"decoder"``.
        norm: ``"pre"`` or ``"post"``.
        ax: Axes to draw on (a new figure of the size the labels need when None; a smaller Axes may
            make them overflow their boxes).

    Returns:
        The Figure.

    Raises:
        ValueError: ``kind`` or ``norm`` is not one of its allowed values.
    """
    check_choice("kind", kind, KINDS)
    check_choice("norm", norm, NORMS)
    if kind == "encoder":
        sublayers = [("multi-head\nself-attention", ATTENTION), ("feed-forward", FEED_FORWARD)]
    else:
        sublayers = [
            ("masked multi-head\nself-attention", ATTENTION),
            ("multi-head\ncross-attention", ATTENTION),
            ("feed-forward", FEED_FORWARD),
        ]
    n = len(sublayers)
    y_start = 0.5  # the first branch point
    top = y_start + n * _GROUP_H + (n - 1) * _LINK
    width, height = (4.6 if kind == "decoder" else 3.4), top + 1.05
    fig, ax = _canvas(ax, width, height)
    w = 1.9
    x = 1.75 if kind == "decoder" else width / 2 + 0.15
    x_skip = x - w / 2 - 0.3
    name = "input $x$" if kind == "encoder" else "input $y$ (target so far)"
    ax.text(x, 0.16, name, ha="center", va="center", fontsize=SMALL)
    ax.plot([x, x], [0.28, y_start], color=LINE, lw=1.0, zorder=1)
    cursor = y_start
    for i, (label, colours) in enumerate(sublayers):
        if i:
            ax.plot([x, x], [cursor, cursor + _LINK], color=LINE, lw=1.0, zorder=1)
            cursor += _LINK
        cursor, box = _residual_sublayer(ax, x, cursor, w, label, colours, norm, x_skip=x_skip)
        if "cross" in label:
            bb = box.get_bbox()
            y_mid = (bb.y0 + bb.y1) / 2
            x_mem = bb.x1 + 0.95
            ax.text(
                x_mem,
                y_mid,
                "encoder\nmemory",
                ha="center",
                va="center",
                fontsize=SMALL,
                color=ENCODER[1],
                weight="bold",
            )
            _arrow(ax, (x_mem - 0.42, y_mid), (bb.x1, y_mid), color=ENCODER[1], lw=1.3)
            ax.text(bb.x1 + 0.2, y_mid + 0.12, "K, V", ha="center", va="center", fontsize=SMALL - 1, color=ENCODER[1])
    frame_x0, frame_x1 = x_skip - 0.15, x + w / 2 + 0.15
    frame = FancyBboxPatch(
        (frame_x0, y_start - 0.1),
        frame_x1 - frame_x0,
        cursor - y_start + 0.2,
        boxstyle="round,pad=0,rounding_size=0.12",
        facecolor="#f4f4f4",
        edgecolor="#b0b0b0",
        linewidth=0.8,
        zorder=0,
    )
    ax.add_patch(frame)
    _arrow(ax, (x, cursor), (x, cursor + 0.25))
    ax.text(x, cursor + 0.37, "output", ha="center", va="center", fontsize=SMALL)
    if norm == "pre":
        formula = r"$x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))$"
    else:
        formula = r"$\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$"
    ax.text(width / 2, height - 0.2, f"{kind} layer, {norm}-LN", ha="center", va="center", fontsize=FONT, weight="bold")
    ax.text(width / 2, height - 0.42, f"each sublayer: {formula}", ha="center", va="center", fontsize=SMALL)
    return fig


def draw_encoder_decoder_stack(n_layers: int = 2, ax=None, *, norm: str = "pre"):
    """Draw the whole encoder-decoder Transformer, data flowing upwards.

    Source embeddings (scaled by ``sqrt(E)``) plus positional encodings go through ``N`` encoder
    layers to the memory; target embeddings plus positions go through ``N`` decoder layers, each of
    which reads the memory in its cross-attention; a linear layer and a softmax give the next-token
    probabilities. Up to three layers per stack are drawn; deeper stacks show the first and the
    last with a vertical ellipsis between them. With ``norm="pre"`` each stack ends in one extra
    LayerNorm, as in :mod:`attnlab.models.transformer`.

    Args:
        n_layers: ``N``, the number of layers in each stack (>= 1).
        ax: Axes to draw on (a new figure of the size the labels need when None; a smaller Axes may
            make them overflow their boxes).
        norm: ``"pre"`` or ``"post"`` (only decides whether the final LayerNorms are drawn).

    Returns:
        The Figure.

    Raises:
        TypeError: ``n_layers`` is not an int.
        ValueError: ``n_layers < 1`` or ``norm`` is not ``"pre"``/``"post"``.
    """
    n = check_positive_int("n_layers", n_layers)
    check_choice("norm", norm, NORMS)
    shown = list(range(1, n + 1)) if n <= 3 else [1, None, n]  # None: the ellipsis
    box_w, box_h, step, lh = 1.75, 0.36, 0.56, 0.3
    x_enc, x_dec = 1.55, 5.45
    x_bus = (x_enc + x_dec) / 2
    final_norm = norm == "pre"
    y_tok, y_emb, y_pos = 0.25, 0.8, 1.35
    y_layers = [1.9 + step * i + box_h / 2 for i in range(len(shown))]
    y_after = y_layers[-1] + box_h / 2 + 0.25
    y_norm = y_after + lh / 2
    y_next = y_after + (lh + 0.2 if final_norm else 0.0)
    y_mem = y_next + 0.2
    y_lin = y_next + lh / 2
    y_soft = y_lin + lh + 0.2
    y_prob = y_soft + lh / 2 + 0.3
    width, height = 7.0, y_prob + 0.3
    fig, ax = _canvas(ax, width, height)
    for side, x, colours in (("encoder", x_enc, ENCODER), ("decoder", x_dec, DECODER)):
        tokens = "source tokens" if side == "encoder" else r"<bos>, $y_1, \dots, y_{T-1}$"
        ax.text(x, y_tok, tokens, ha="center", va="center", fontsize=SMALL)
        _arrow(ax, (x, y_tok + 0.13), (x, y_emb - lh / 2))
        _box(ax, x, y_emb, box_w, lh, r"embedding $\times\sqrt{E}$", EMBEDDING)
        _arrow(ax, (x, y_emb + lh / 2), (x, y_pos - 0.12))
        _add_circle(ax, x, y_pos)
        outward = -1 if side == "encoder" else 1
        ax.text(x + outward * 0.95, y_pos, "positional\nencoding", ha="center", va="center", fontsize=SMALL - 1)
        _arrow(ax, (x + outward * 0.55, y_pos), (x + outward * 0.12, y_pos))
        _arrow(ax, (x, y_pos + 0.12), (x, y_layers[0] - box_h / 2))
        for i, (k, y) in enumerate(zip(shown, y_layers, strict=True)):
            if k is None:
                ax.text(x, y, r"$\vdots$", ha="center", va="center", fontsize=FONT + 2)
            else:
                _box(ax, x, y, box_w, box_h, f"{side} layer {k}", colours)
            if i:
                _arrow(ax, (x, y_layers[i - 1] + box_h / 2), (x, y - box_h / 2))
        # the N-times bracket, on the outer side of the stack
        bx = x + outward * (box_w / 2 + 0.12)
        y0, y1 = y_layers[0] - box_h / 2, y_layers[-1] + box_h / 2
        ax.plot([bx - outward * 0.06, bx, bx, bx - outward * 0.06], [y0, y0, y1, y1], color=LINE, lw=1.0)
        ax.text(bx + outward * 0.22, (y0 + y1) / 2, rf"$\times{n}$", ha="center", va="center", fontsize=FONT + 1)
        _arrow(ax, (x, y1), (x, y_after))
        if final_norm:
            _box(ax, x, y_norm, box_w, lh, "final LayerNorm", NORM)
            _arrow(ax, (x, y_norm + lh / 2), (x, y_next))
    mem = _box(ax, x_enc, y_mem, box_w, 0.4, "memory", ENCODER, lw=1.6)
    _box(ax, x_dec, y_lin, box_w, lh, "linear", OUTPUT)
    _arrow(ax, (x_dec, y_lin + lh / 2), (x_dec, y_soft - lh / 2))
    _box(ax, x_dec, y_soft, box_w, lh, "softmax", OUTPUT)
    _arrow(ax, (x_dec, y_soft + lh / 2), (x_dec, y_prob - 0.13))
    ax.text(x_dec, y_prob, r"$P(y_t \mid y_{<t}, x)$", ha="center", va="center", fontsize=FONT)
    # the memory bus: every decoder layer's cross-attention reads the same memory
    mb = mem.get_bbox()
    bus_bottom = min(y for k, y in zip(shown, y_layers, strict=True) if k is not None)
    ax.plot([mb.x1, x_bus, x_bus], [y_mem, y_mem, bus_bottom], color=ENCODER[1], lw=1.4, zorder=1)
    for k, y in zip(shown, y_layers, strict=True):
        if k is not None:
            _arrow(ax, (x_bus, y), (x_dec - box_w / 2, y), color=ENCODER[1], lw=1.4)
    ax.text(
        x_bus,
        y_mem + 0.22,
        "keys, values for every\ncross-attention",
        ha="center",
        va="bottom",
        fontsize=SMALL - 1,
        color=ENCODER[1],
    )
    return fig


# ---------------------------------------------------------------------------------------------
# lessons 04-06: projections, heads, warm-up


def _fit_box(ax, x, y, label, colours, *, min_w=0.9, h=0.42, fontsize=FONT):
    """A box centred at (x, y) wide enough for ``label`` (and at least ``min_w``); returns (patch, width)."""
    w = max(min_w, _text_size(label, fontsize)[0] + 0.24)
    h = max(h, _text_size(label, fontsize)[1] + 0.16)
    return _box(ax, x, y, w, h, label, colours, fontsize=fontsize), w, h


def draw_qkv_projections(ax=None):
    """Lesson 04: one self-attention layer as data flow: ``X`` times three learned matrices gives ``Q``, ``K`` and
    ``V``; the scaled scores ``QK^T / sqrt(d_k)`` go through a row-wise softmax, and the weights average ``V``.

    Returns:
        The Figure.
    """
    width, height = 7.6, 2.9
    fig, ax = _canvas(ax, width, height)
    y_q, y_k, y_v, y_mid = 2.25, 1.45, 0.55, 1.85
    x_box, xw, _ = _fit_box(ax, 0.55, y_k, "$X$\n(T, d)", EMBEDDING, min_w=0.7)
    proj = {}
    for name, y, colours in (("Q", y_q, ATTENTION), ("K", y_k, ENCODER), ("V", y_v, FEED_FORWARD)):
        _, w, _ = _fit_box(ax, 2.35, y, f"${name} = X W_{name}$", colours)
        proj[name] = (2.35 + w / 2, y)
        _arrow(ax, (0.55 + xw / 2, y_k), (1.25, y), (2.35 - w / 2, y))
    _, sw, sh = _fit_box(ax, 4.3, y_mid, "scores\n$QK^\\top/\\sqrt{d_k}$  (T, T)", CONTEXT)
    for name in ("Q", "K"):
        _arrow(ax, proj[name], (4.3 - sw / 2, y_mid + (0.1 if name == "Q" else -0.1)))
    _, fw, _ = _fit_box(ax, 5.75, y_mid, "softmax\nper row: $\\alpha$", NORM, min_w=0.8)
    _arrow(ax, (4.3 + sw / 2, y_mid), (5.75 - fw / 2, y_mid))
    _, ow, oh = _fit_box(ax, 6.95, y_mid, "$\\alpha V$\n(T, d_v)", OUTPUT, min_w=0.7)
    _arrow(ax, (5.75 + fw / 2, y_mid), (6.95 - ow / 2, y_mid))
    _arrow(ax, proj["V"], (6.95, y_v), (6.95, y_mid - oh / 2))
    ax.text(width / 2, height - 0.15, "self-attention: queries, keys and values from one sequence", ha="center",
            va="center", fontsize=SMALL, weight="bold")
    return fig


def draw_multihead(num_heads: int = 4, ax=None):
    """Lesson 05: multi-head attention, data flowing upwards: three ``E x E`` projections, the split of
    ``(B, L, E)`` into ``(B, H, L, D)``, ``H`` attentions side by side, the concatenation back to ``(B, L, E)``
    and the output projection ``W_O``. More than four heads are drawn as the first two, an ellipsis and the last.

    Raises:
        TypeError / ValueError: ``num_heads`` is not a positive int.
    """
    num_heads = check_positive_int("num_heads", num_heads)
    shown = list(range(num_heads)) if num_heads <= 4 else [0, 1, None, num_heads - 1]
    head_w, gap = 1.05, 0.15
    width = max(4.6, len(shown) * (head_w + gap) + 0.6)
    height = 5.3
    fig, ax = _canvas(ax, width, height)
    x = width / 2
    ax.text(x, 0.18, "input $X$  (B, L, E)", ha="center", va="center", fontsize=SMALL)
    _, _, ph = _fit_box(ax, x, 0.85, "$Q, K, V = X W_Q,\\ X W_K,\\ X W_V$   ($E \\times E$ each)", ATTENTION)
    _arrow(ax, (x, 0.3), (x, 0.85 - ph / 2))
    _, _, sh = _fit_box(ax, x, 1.75, "split: (B, L, E) $\\to$ (B, H, L, D),  $D = E / H$", NORM)
    _arrow(ax, (x, 0.85 + ph / 2), (x, 1.75 - sh / 2))
    y_head = 2.85
    x0 = x - (len(shown) - 1) * (head_w + gap) / 2
    for i, h in enumerate(shown):
        xh = x0 + i * (head_w + gap)
        if h is None:
            ax.text(xh, y_head, "...", ha="center", va="center", fontsize=FONT)
            continue
        _box(ax, xh, y_head, head_w, 0.62, f"head {h}\nsoftmax, $\\cdot V_{{{h}}}$", ENCODER, fontsize=SMALL)
        _arrow(ax, (x, 1.75 + sh / 2), (xh, y_head - 0.31))
        _arrow(ax, (xh, y_head + 0.31), (x, 3.95 - 0.21))
    _, _, ch = _fit_box(ax, x, 3.95, "concat: (B, H, L, D) $\\to$ (B, L, E)", NORM)
    _, _, oh = _fit_box(ax, x, 4.65, "$W_O$  ($E \\times E$)", OUTPUT)
    _arrow(ax, (x, 3.95 + ch / 2), (x, 4.65 - oh / 2))
    ax.text(x, height - 0.12, f"multi-head attention, H = {num_heads}", ha="center", va="center", fontsize=SMALL,
            weight="bold")
    return fig


def noam_rate(step, d_model: int = 512, warmup: int = 4000) -> np.ndarray:
    """The learning rate of Vaswani et al. (2017, eq. 3): ``d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)``.

    Linear warm-up for ``warmup`` steps, then decay as ``1 / sqrt(step)``; the peak is at ``step = warmup``.
    """
    d_model, warmup = check_positive_int("d_model", d_model), check_positive_int("warmup", warmup)
    step = np.asarray(step, dtype=float)
    if (step < 1).any():
        raise ValueError(f"steps start at 1, got a smallest step of {step.min()}")
    return d_model**-0.5 * np.minimum(step**-0.5, step * warmup**-1.5)


def draw_warmup_schedule(course_curve=None, *, d_model: int = 512, warmup: int = 4000, steps: int = 100_000, axes=None):
    """Lesson 06: the paper's learning-rate schedule (:func:`noam_rate`, its base model: 100,000 steps, 4,000 of
    warm-up) beside the course's one-cycle schedule, read from a run's ``loss_curve`` (points with ``step`` and
    ``lr``; the right panel is left out when ``course_curve`` is None).

    Returns:
        The Figure.
    """
    steps = check_positive_int("steps", steps)
    panels = 1 if course_curve is None else 2
    if axes is None:
        fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 2.6), squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    s = np.arange(1, steps + 1)
    rate = noam_rate(s, d_model, warmup)
    axes[0].plot(s, rate, color=ENCODER[1])
    axes[0].axvline(warmup, color=LINE, lw=0.8, ls=":")
    axes[0].set_title(f"Vaswani et al. (2017): warm-up {warmup:,} steps, then $1/\\sqrt{{step}}$", fontsize=SMALL)
    axes[0].set_xlabel("step", fontsize=SMALL)
    axes[0].set_ylabel("learning rate", fontsize=SMALL)
    if course_curve is not None:
        pts = [(p["step"], p["lr"]) for p in course_curve]
        axes[1].plot(*zip(*pts, strict=True), color=DECODER[1], marker=".")
        peak = max(pts, key=lambda p: p[1])[0]
        axes[1].axvline(peak, color=LINE, lw=0.8, ls=":")
        axes[1].set_title(f"the course's one-cycle: peak at step {peak:,}", fontsize=SMALL)
        axes[1].set_xlabel("step", fontsize=SMALL)
    for a in axes:
        a.tick_params(labelsize=SMALL - 1)
    fig.tight_layout()
    return fig
