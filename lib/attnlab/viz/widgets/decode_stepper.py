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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.checks import check_positive_int
from attnlab.data.vocab import Vocab
from attnlab.models.decoding import beam_steps
from attnlab.viz.widgets._live import figure_png, new_figure
from attnlab.viz.widgets._stepper import SentenceStepper, stepper_box

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


class StepperState(SentenceStepper):
    """The decoding stepper without widgets: the sentences offered, the one chosen, the step shown.

    Each sentence is decoded once, when first chosen. Sentences with the same source appear once.
    The navigation (``options``, ``recorded``, ``last_step``, ``select``, ``move``, ``view``) is
    :class:`~attnlab.viz.widgets._stepper.SentenceStepper`'s.

    Args:
        model: a model implementing the decoding protocol.
        pairs: objects with a ``src`` token sequence (e.g. :class:`attnlab.data.corpus.Pair`).
        src_vocab, tgt_vocab: vocabularies.
        k, max_len: as :func:`decode_steps`.
    """

    def __init__(self, model, pairs, src_vocab: Vocab, tgt_vocab: Vocab, *, k: int = 5, max_len: int = 80):
        self.model, self.src_vocab, self.tgt_vocab, self.k, self.max_len = model, src_vocab, tgt_vocab, k, max_len
        super().__init__(pairs)

    def record(self, src_tokens: list[str]) -> tuple[list[str], list[Step]]:
        """:func:`decode_steps` of one sentence."""
        return decode_steps(self.model, src_tokens, self.src_vocab, self.tgt_vocab, k=self.k, max_len=self.max_len)

    def step_view(self, labels: list[str], steps: list[Step], i: int) -> dict:
        """:func:`step_view`."""
        return step_view(labels, steps, i)


def _attention_picture(view: dict) -> bytes | None:
    """The chart of a view: :func:`attention_png` of its attention (None for a model without attention)."""
    return None if view["attention"] is None else attention_png(view["labels"], view["attention"])


def stepper(model, pairs, src_vocab: Vocab, tgt_vocab: Vocab):
    """An ipywidgets UI: choose a sentence, then slide through its decoding steps.

    Each change of a control draws once: choosing a sentence resets the slider with its observer
    detached, then draws the new sentence's first step (:func:`~attnlab.viz.widgets._stepper.stepper_box`).

    Returns:
        ``VBox([dropdown, slider, text, picture])``.
    """
    return stepper_box(StepperState(model, pairs, src_vocab, tgt_vocab), _attention_picture)
