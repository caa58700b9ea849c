"""Step through greedy decoding of one sentence: attention, produced token, top candidates.

The model runs once per sentence, in :func:`decode_steps`, which records what the one decoding
loop of :mod:`attnlab.models.decoding` (:func:`~attnlab.models.decoding.beam_steps` with ``k = 1``) does at
every step, so the stepper shows exactly the translation :func:`~attnlab.models.decoding.greedy_decode`
gives. Moving the slider only calls :func:`step_view`, a pure function over the recorded steps.

The widget's behaviour lives in :class:`StepperState` (which sentence, which step, what to show)
and :func:`attention_png` (the picture), both plain and tested headless; :func:`stepper` only
wires them to ipywidgets so that every change of a control draws exactly once. The picture is
drawn with matplotlib's object-oriented API into PNG bytes shown by an ``Image`` widget: no
pyplot, no ``Output`` capture, so a redraw is safe from whichever thread the kernel uses to
deliver a widget event.

Shape legend
------------
S  source length (incl. ``<eos>``)
V  target vocabulary size
k  number of candidates shown
"""

from __future__ import annotations

import html
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.data.vocab import Vocab
from attnlab.models.decoding import beam_steps
from attnlab.viz.widgets._live import figure_png, new_figure, picture

__all__ = ["Step", "decode_steps", "step_view", "attention_png", "StepperState", "stepper"]


@dataclass(frozen=True)
class Step:
    """One decoding step: the token produced, the attention used, the best candidates."""

    token: str
    attention: np.ndarray | None  # (S,)
    candidates: tuple[tuple[str, float], ...]  # up to k (token, probability), best first


def decode_steps(model, src_tokens, src_vocab: Vocab, tgt_vocab: Vocab, *, k: int = 5, max_len: int = 80):
    """Greedy-decode one sentence, recording every step.

    Args:
        model: a model implementing the decoding protocol.
        src_tokens: source tokens (``<eos>`` is added).
        src_vocab, tgt_vocab: vocabularies.
        k: most candidates recorded per step (tokens greedy decoding may not produce,
            ``<pad>`` and ``<bos>``, are never candidates).
        max_len: most steps.

    Returns:
        ``(source labels incl. "<eos>", list of Step)``; decoding stops after ``<eos>``.
    """
    if not src_tokens:
        raise ValueError("src_tokens is empty: give at least one source token")
    k = check_positive_int("k", k)
    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(list(src_tokens), eos=True)], device=device)  # (1, S)
    steps = []
    for step in beam_steps(model, src, beam=1, max_len=max_len):
        probs = step.logp[int(step.parent[0])].exp()  # (V,) the model's probabilities; forbidden tokens 0
        top_p, top_i = probs.topk(min(k, probs.numel()))  # (k,), (k,)
        candidates = tuple((tgt_vocab.itos[int(i)], float(p)) for p, i in zip(top_p, top_i, strict=True) if p > 0)
        steps.append(
            Step(
                token=tgt_vocab.itos[int(step.tokens[0, -1])],
                attention=None if step.attn is None else step.attn[0, -1].float().cpu().numpy(),  # (S,)
                candidates=candidates,
            )
        )
    return [*src_tokens, "<eos>"], steps


def step_view(src_labels, steps, i: int) -> dict:
    """What the widget shows at step ``i`` (pure function, no model call).

    Returns:
        dict with ``prefix`` (tokens produced so far, including step ``i``), ``token``,
        ``attention`` (``(S,)`` or ``None``), ``focus`` (most attended source token),
        ``candidates`` and a ready-to-print ``text``.
    """
    if not steps:
        raise ValueError("no decoding steps recorded")
    if not 0 <= i < len(steps):
        raise IndexError(f"step {i} out of range: 0..{len(steps) - 1}")
    step = steps[i]
    focus = None
    if step.attention is not None:
        if step.attention.shape != (len(src_labels),):
            raise ValueError(f"attention has shape {step.attention.shape}, expected ({len(src_labels)},)")
        focus = src_labels[int(np.argmax(step.attention))]
    prefix = [s.token for s in steps[: i + 1]]
    cands = "  ".join(f"{tok} {p:.2f}" for tok, p in step.candidates)
    text = f"step {i}: produced {step.token!r}" + (f", looking mostly at {focus!r}" if focus else "")
    text += f"\n  so far: {' '.join(prefix)}\n  candidates: {cands}"
    return {
        "prefix": prefix,
        "token": step.token,
        "attention": step.attention,
        "focus": focus,
        "candidates": step.candidates,
        "text": text,
    }


def attention_png(src_labels: Sequence[str], attention: np.ndarray) -> bytes:
    """PNG bytes of a bar chart of one step's attention ``(S,)`` over the source labels.

    Drawn on a fresh :class:`matplotlib.figure.Figure` with the Agg canvas (no pyplot state), so
    two calls never share a figure, whatever thread they run on.
    """
    attention = np.asarray(attention)
    if attention.shape != (len(src_labels),):
        raise ValueError(f"attention has shape {attention.shape}, expected ({len(src_labels)},) for the source labels")
    fig = new_figure((min(0.35 * len(src_labels) + 1, 12), 1.6))
    ax = fig.add_subplot()
    ax.bar(range(len(src_labels)), attention)
    ax.set_xticks(range(len(src_labels)), list(src_labels), rotation=90, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("attention", fontsize=8)
    return figure_png(fig)


class StepperState:
    """The decoding stepper without widgets: the sentences offered, the one chosen, the step shown.

    Each sentence is decoded once, when first chosen. Sentences with the same source appear once.

    Args:
        model: a model implementing the decoding protocol.
        pairs: objects with a ``src`` token sequence (e.g. :class:`attnlab.data.corpus.Pair`).
        src_vocab, tgt_vocab: vocabularies.
        k, max_len: as :func:`decode_steps`.
    """

    def __init__(self, model, pairs, src_vocab: Vocab, tgt_vocab: Vocab, *, k: int = 5, max_len: int = 80):
        self.model, self.src_vocab, self.tgt_vocab, self.k, self.max_len = model, src_vocab, tgt_vocab, k, max_len
        seen, self.sources = set(), []
        for p in pairs:
            src = tuple(p.src)
            if src not in seen:
                seen.add(src)
                self.sources.append(src)
        if not self.sources:
            raise ValueError("pairs is empty: give at least one sentence to step through")
        self._cache: dict[int, tuple[list[str], list[Step]]] = {}
        self.sentence, self.step = 0, 0

    def options(self) -> list[tuple[str, int]]:
        """``(label, index)`` per sentence for a dropdown: the whole source sentence."""
        return [(" ".join(src), i) for i, src in enumerate(self.sources)]

    def recorded(self, sentence: int | None = None) -> tuple[list[str], list[Step]]:
        """``(source labels, steps)`` of a sentence (default: the chosen one), decoded once."""
        i = self.sentence if sentence is None else sentence
        if i not in self._cache:
            self._cache[i] = decode_steps(
                self.model, list(self.sources[i]), self.src_vocab, self.tgt_vocab, k=self.k, max_len=self.max_len
            )
        return self._cache[i]

    @property
    def last_step(self) -> int:
        """Index of the chosen sentence's last step (the slider's maximum)."""
        return len(self.recorded()[1]) - 1

    def select(self, sentence: int) -> dict:
        """Choose a sentence; the step goes back to 0. Returns the view to show."""
        check_int("sentence", sentence, minimum=0)
        if sentence >= len(self.sources):
            raise IndexError(f"sentence {sentence} out of range: 0..{len(self.sources) - 1}")
        self.sentence, self.step = sentence, 0
        return self.view()

    def move(self, step: int) -> dict:
        """Show another step of the chosen sentence. Returns the view to show."""
        check_int("step", step, minimum=0)
        if step > self.last_step:
            raise IndexError(f"step {step} out of range: 0..{self.last_step}")
        self.step = step
        return self.view()

    def view(self) -> dict:
        """:func:`step_view` of the current sentence and step, plus its ``labels``."""
        labels, steps = self.recorded()
        return {**step_view(labels, steps, self.step), "labels": labels}


def stepper(model, pairs, src_vocab: Vocab, tgt_vocab: Vocab):
    """An ipywidgets UI: choose a sentence, then slide through its decoding steps.

    Each change of a control draws once: choosing a sentence resets the slider with its observer
    detached, then draws the new sentence's first step.

    Returns:
        ``VBox([dropdown, slider, text, picture])``.
    """
    import ipywidgets as W

    state = StepperState(model, pairs, src_vocab, tgt_vocab)
    wide = W.Layout(width="98%")
    choose = W.Dropdown(
        options=state.options(), description="sentence", layout=wide, style={"description_width": "initial"}
    )
    slider = W.IntSlider(min=0, max=state.last_step, value=0, description="step", continuous_update=True)
    text = W.HTML()
    chart = picture()
    lock = threading.RLock()  # one change at a time, whichever thread the kernel delivers it on

    def draw(view: dict) -> None:
        text.value = f"<pre>{html.escape(view['text'])}</pre>"
        if view["attention"] is None:
            chart.layout.display = "none"
        else:
            chart.value = attention_png(view["labels"], view["attention"])
            chart.layout.display = None

    def on_step(change) -> None:
        with lock:
            draw(state.move(change["new"]))

    def on_sentence(change) -> None:
        with lock:
            view = state.select(change["new"])
            slider.unobserve(on_step, names="value")
            try:
                slider.value = 0  # first, so that lowering max never moves the value
                slider.max = state.last_step
            finally:
                slider.observe(on_step, names="value")
            draw(view)

    choose.observe(on_sentence, names="value")
    slider.observe(on_step, names="value")
    draw(state.view())
    return W.VBox([choose, slider, text, chart])
