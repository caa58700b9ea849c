"""Lesson 7's widget: step through the decoding of one sentence and watch its coverage grow.

For a decoded test sentence, :func:`update_coverage_explorer` (a pure function) sums the attention
of the first ``step + 1`` output words per source word -- the coverage vector of Tu et al. (2016)
-- and sets it beside each source word's gold fertility (how many target tokens the gold links
give it). A source word whose coverage exceeds its fertility by more than ``tolerance`` is
over-covered (its bar turns red); one the decoder has finished with below its fertility is, so far,
under-covered.

The widget follows the course's pattern (:mod:`attnlab.viz.widgets._live`): the pure update function,
a text description, and a figure drawn without pyplot into an ``ipywidgets.Image``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab.core.checks import check_int
from attnlab.data.gold import gold_fertility
from attnlab.models.decoding import translate
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = [
    "coverage_cases",
    "update_coverage_explorer",
    "format_coverage_explorer",
    "plot_coverage_explorer",
    "coverage_explorer_widget",
]

TOLERANCE = 0.5  # attention mass above the gold fertility that counts as over-covered


def coverage_cases(model, pairs: Sequence, src_vocab, tgt_vocab) -> list[dict]:
    """Greedy-decode ``pairs`` once; per pair a case for the widget.

    Returns:
        per pair ``{"src", "hyp", "ref", "attn" ((T', S) array over the source words, <eos> dropped),
        "fertility"}``.
    """

    hyps, attns, _ = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab)
    if attns[0] is None:
        raise ValueError("the coverage explorer needs a model with attention")
    return [
        {
            "src": list(p.src),
            "hyp": list(h),
            "ref": list(p.tgt),
            "attn": np.asarray(a)[: len(h), : len(p.src)],
            "fertility": gold_fertility(p),
        }
        for p, h, a in zip(pairs, hyps, attns, strict=True)
    ]


def update_coverage_explorer(case: dict, step: int, *, tolerance: float = TOLERANCE) -> dict:
    """Coverage after output word ``step`` (0-based) of ``case`` against the gold fertility.

    Args:
        case: one dict of :func:`coverage_cases` (``attn`` ``(T', S)``, ``fertility`` ``S`` counts).
        step: last output word included, ``0 <= step < T'``.
        tolerance: coverage above ``fertility + tolerance`` is over-covered.

    Returns:
        ``{"step", "word", "coverage" (S,), "fertility" (S,), "current" (S,) attention of this step,
        "over" (S,) bool, "n_over", "src", "hyp"}``.

    Raises:
        ValueError: ``step`` outside the output, or ``attn`` and ``fertility`` of different widths.
    """
    attn = np.asarray(case["attn"], dtype=float)
    fert = np.asarray(case["fertility"], dtype=float)
    if attn.ndim != 2 or attn.shape[1] != fert.shape[0]:
        raise ValueError(f"case['attn'] must be (T', S={fert.shape[0]}), got shape {attn.shape}")
    step = check_int("step", step, minimum=0)
    if step >= attn.shape[0]:
        raise ValueError(f"step must be < {attn.shape[0]} (output words), got {step}")
    coverage = attn[: step + 1].sum(axis=0)  # (S,)
    over = coverage > fert + tolerance
    return {
        "step": step,
        "word": case["hyp"][step],
        "coverage": coverage,
        "fertility": fert,
        "current": attn[step],
        "over": over,
        "n_over": int(over.sum()),
        "src": case["src"],
        "hyp": case["hyp"],
    }


def format_coverage_explorer(result: dict) -> str:
    """The output so far, the word just written, and the over-covered source words."""
    so_far = " ".join(result["hyp"][: result["step"] + 1])
    over = [w for w, o in zip(result["src"], result["over"], strict=True) if o]
    return (
        f"output so far: {so_far}\n"
        f"step {result['step']}: wrote {result['word']!r}; most attended source word: "
        f"{result['src'][int(np.argmax(result['current']))]!r}\n"
        f"over-covered (coverage > fertility + {TOLERANCE}): {', '.join(over) if over else 'none'}"
    )


def plot_coverage_explorer(result: dict, ax) -> object:
    """Bars of the coverage per source word (red when over-covered), gold fertility as black ticks."""
    x = np.arange(len(result["src"]))
    colors = ["tab:red" if o else "tab:blue" for o in result["over"]]
    ax.bar(x, result["coverage"], color=colors, alpha=0.8, label="coverage (sum of attention)")
    ax.scatter(x, result["fertility"], marker="_", s=200, color="black", label="gold fertility", zorder=3)
    ax.bar(x, result["current"], color="none", edgecolor="orange", linewidth=1.2, label="this step's attention")
    ax.set_xticks(x, result["src"], rotation=60, fontsize=7)
    ax.set_ylabel("attention mass")
    ax.set_title(f"after output word {result['step']}: {result['word']!r}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    return ax


def coverage_explorer_widget(cases: Sequence[dict], labels: Sequence[str] | None = None):
    """A Dropdown ``sentence`` and an IntSlider ``step``; the coverage bars of that sentence after that step.

    Args:
        cases: from :func:`coverage_cases`.
        labels: one name per case for the dropdown (default: the first source words).

    Returns:
        an ``ipywidgets.VBox``; ``.result`` holds the latest :func:`update_coverage_explorer` dict.
    """
    import ipywidgets as widgets

    if not cases:
        raise ValueError("coverage_explorer_widget needs at least one case")
    labels = list(labels) if labels is not None else [" ".join(c["src"][:6]) + " …" for c in cases]
    sentence = widgets.Dropdown(
        options=list(zip(labels, range(len(cases)), strict=True)), value=0, description="sentence",
        layout=widgets.Layout(width="28em"),  # room for a label of six words (the browser test checks it)
    )
    step = widgets.IntSlider(value=0, min=0, max=len(cases[0]["hyp"]) - 1, description="step")
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox([sentence, step]), text, plot])

    def on_sentence(change) -> None:
        n = len(cases[change["new"]]["hyp"])
        step.value = min(step.value, n - 1)
        step.max = n - 1

    sentence.observe(on_sentence, names="value")  # registered first: the slider is valid before the refresh

    def compute() -> dict:
        case = cases[sentence.value]
        return update_coverage_explorer(case, min(step.value, len(case["hyp"]) - 1))

    def draw(result: dict):
        fig = new_figure((6.0, 2.8))
        plot_coverage_explorer(result, fig.add_subplot())
        return fig

    return live(root, text, plot, (sentence, step), compute, format_coverage_explorer, draw)
