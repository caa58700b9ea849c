"""Step through a copy model's greedy decoding: per output word, ``p_gen`` and the copy distribution.

The model runs once per sentence, in :func:`copy_steps` (:func:`attnlab.models.copying.greedy_copy`, the
decoding the lesson measures); moving the slider only calls :func:`copy_view`, a pure function over the
recorded steps. :class:`CopyStepperState` holds the choices and :func:`copy_png` draws; :func:`copy_stepper`
only wires them to ipywidgets (one draw per change), like the course's decoding stepper
(:mod:`attnlab.viz.widgets.decode_stepper`).

Shape legend
------------
S  source length (incl. ``<eos>``)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data.vocab import Vocab
from attnlab.models.copying import CopyModel, decode_extended, encode_copy_pair, greedy_copy
from attnlab.viz.widgets._live import figure_png, new_figure
from attnlab.viz.widgets._stepper import SentenceStepper, stepper_box

__all__ = ["CopyStep", "copy_steps", "copy_view", "copy_png", "CopyStepperState", "copy_stepper"]


@dataclass(frozen=True)
class CopyStep:
    """One output word: the word, ``p_gen`` and the copy distribution ``(S,)`` it was produced with."""

    token: str
    p_gen: float
    copy: np.ndarray  # (S,)


def copy_steps(model: CopyModel, src_tokens: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab, *, max_len: int = 80):
    """Greedy-decode one sentence with a copy model, recording every step.

    Returns:
        ``(source labels incl. "<eos>", list of CopyStep)``; the last step produced ``<eos>``
        (or ``max_len`` steps were taken).

    Raises:
        ValueError: empty ``src_tokens``, or a model without copying (it has no ``p_gen``).
    """
    if not src_tokens:
        raise ValueError("src_tokens is empty: give at least one source token")
    if not model.config.copy:
        raise ValueError("copy_steps needs a copy model (config.copy=True): a model without copying has no p_gen")
    src, copy_ids, _, _, oovs = encode_copy_pair(list(src_tokens), None, src_vocab, tgt_vocab)
    device = next(model.parameters()).device
    ids, parts = greedy_copy(model, src[None].to(device), copy_ids[None].to(device), max_len=max_len)
    ids = ids[0].tolist()
    words = decode_extended(ids, tgt_vocab, oovs) + ["<eos>"]
    steps = [
        CopyStep(token=w, p_gen=float(parts["p_gen"][0, i]), copy=parts["copy"][0, i].float().cpu().numpy())
        for i, w in enumerate(words[: len(ids)])
    ]
    return [*src_tokens, "<eos>"], steps


def copy_view(src_labels: Sequence[str], steps: Sequence[CopyStep], i: int) -> dict:
    """What the widget shows at step ``i`` (pure function, no model call).

    Returns:
        dict with ``prefix`` (words produced so far, step ``i`` included), ``token``, ``p_gen``, ``copy``,
        ``focus`` (the source word with the most copy probability), ``copied`` (the word is a source word
        outside the target vocabulary, so only copying could produce it -- judged by ``p_gen < 0.5``) and
        a ready-to-print ``text``.
    """
    if not steps:
        raise ValueError("no decoding steps recorded")
    if not 0 <= i < len(steps):
        raise IndexError(f"step {i} out of range: 0..{len(steps) - 1}")
    step = steps[i]
    if np.shape(step.copy) != (len(src_labels),):
        raise ValueError(f"copy has shape {np.shape(step.copy)}, expected ({len(src_labels)},)")
    focus = src_labels[int(np.argmax(step.copy))]
    copied = step.p_gen < 0.5
    prefix = [s.token for s in steps[: i + 1]]
    text = (
        f"step {i}: wrote {step.token!r}  p_gen = {step.p_gen:.2f} "
        f"({'copies' if copied else 'generates'}; copy distribution peaks on {focus!r})\n  so far: {' '.join(prefix)}"
    )
    return {
        "prefix": prefix,
        "token": step.token,
        "p_gen": step.p_gen,
        "copy": step.copy,
        "focus": focus,
        "copied": copied,
        "text": text,
    }


def copy_png(src_labels: Sequence[str], copy: np.ndarray, p_gen: float) -> bytes:
    """PNG bytes: the copy distribution ``(S,)`` as bars, and ``p_gen`` as a bar of its own on the right."""
    copy = np.asarray(copy)
    if copy.shape != (len(src_labels),):
        raise ValueError(f"copy has shape {copy.shape}, expected ({len(src_labels)},) for the source labels")
    if not 0.0 <= p_gen <= 1.0:
        raise ValueError(f"p_gen must be in [0, 1], got {p_gen}")
    fig = new_figure((min(0.35 * len(src_labels) + 2, 13), 1.8))
    ax, side = fig.subplots(1, 2, gridspec_kw={"width_ratios": [max(len(src_labels), 1), 2]})
    ax.bar(range(len(src_labels)), copy, color="tab:orange")
    ax.set_xticks(range(len(src_labels)), list(src_labels), rotation=90, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("copy dist.", fontsize=8)
    side.bar([0, 1], [p_gen, 1 - p_gen], color=["tab:blue", "tab:orange"])
    side.set_xticks([0, 1], ["p_gen", "1-p_gen"], rotation=90, fontsize=8)
    side.set_ylim(0, 1)
    return figure_png(fig)


class CopyStepperState(SentenceStepper):
    """The copy stepper without widgets: the sentences offered, the one chosen, the step shown.

    The navigation (``options``, ``recorded``, ``last_step``, ``select``, ``move``, ``view``) is
    :class:`~attnlab.viz.widgets._stepper.SentenceStepper`'s, as in the decoding stepper.

    Args:
        model: a copy model (``config.copy=True``).
        pairs: objects with a ``src`` token sequence.
        src_vocab, tgt_vocab: the model's vocabularies.
    """

    def __init__(self, model: CopyModel, pairs, src_vocab: Vocab, tgt_vocab: Vocab, *, max_len: int = 80):
        self.model, self.src_vocab, self.tgt_vocab, self.max_len = model, src_vocab, tgt_vocab, max_len
        super().__init__(pairs)

    def record(self, src_tokens: list[str]) -> tuple[list[str], list[CopyStep]]:
        """:func:`copy_steps` of one sentence (no gradients)."""
        with torch.no_grad():
            return copy_steps(self.model, src_tokens, self.src_vocab, self.tgt_vocab, max_len=self.max_len)

    def step_view(self, labels: list[str], steps: list[CopyStep], i: int) -> dict:
        """:func:`copy_view`."""
        return copy_view(labels, steps, i)


def _copy_picture(view: dict) -> bytes:
    """The chart of a view: :func:`copy_png` of its copy distribution and ``p_gen``."""
    return copy_png(view["labels"], view["copy"], view["p_gen"])


def copy_stepper(model: CopyModel, pairs, src_vocab: Vocab, tgt_vocab: Vocab):
    """An ipywidgets UI: choose a sentence, slide through its output words (``p_gen`` and the copy distribution).

    Returns:
        ``VBox([dropdown, slider, text, picture])`` (:func:`~attnlab.viz.widgets._stepper.stepper_box`).
    """
    return stepper_box(CopyStepperState(model, pairs, src_vocab, tgt_vocab), _copy_picture)
