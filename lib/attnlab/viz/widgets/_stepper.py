"""The navigation the course's sentence steppers share: choose a sentence, slide through its decoding steps.

Lesson 02's decoding stepper (:mod:`attnlab.viz.widgets.decode_stepper`) and lesson 10's copy stepper
(:mod:`attnlab.viz.widgets.copy_stepper`) differ only in what one step records and shows. Each subclasses
:class:`SentenceStepper`, which holds the sentences offered, the one chosen and the step shown, with two
methods of its own: :meth:`~SentenceStepper.record` (decode one sentence, called once per sentence) and
:meth:`~SentenceStepper.step_view` (what step ``i`` shows, a pure function over the recorded steps).
:func:`stepper_box` wires such a state to ipywidgets so that every change of a control draws exactly once
(choosing a sentence resets the slider with its observer detached), one change at a time whichever
thread the kernel delivers it on.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

from attnlab.core.checks import check_int
from attnlab.viz.widgets._live import picture

__all__ = ["SentenceStepper", "stepper_box"]


class SentenceStepper:
    """A stepper without widgets: the sentences offered, the one chosen, the step shown.

    Each sentence is decoded once, when first chosen (:meth:`recorded`). Sentences with the same source
    appear once. A subclass supplies :meth:`record` and :meth:`step_view`.

    Args:
        pairs: objects with a ``src`` token sequence (e.g. :class:`attnlab.data.corpus.Pair`).
    """

    def __init__(self, pairs):
        self.sources = list(dict.fromkeys(tuple(p.src) for p in pairs))
        if not self.sources:
            raise ValueError("pairs is empty: give at least one sentence to step through")
        self._cache: dict[int, tuple[list[str], list]] = {}
        self.sentence, self.step = 0, 0

    def record(self, src_tokens: list[str]) -> tuple[list[str], list]:
        """``(source labels, steps)`` of one sentence: the model's decoding, recorded step by step."""
        raise NotImplementedError(f"{type(self).__name__} must define record(src_tokens)")

    def step_view(self, labels: list[str], steps: list, i: int) -> dict:
        """What step ``i`` of the recorded ``steps`` shows (a pure function; a ``text`` key is printed)."""
        raise NotImplementedError(f"{type(self).__name__} must define step_view(labels, steps, i)")

    def options(self) -> list[tuple[str, int]]:
        """``(label, index)`` per sentence for a dropdown: the whole source sentence."""
        return [(" ".join(src), i) for i, src in enumerate(self.sources)]

    def recorded(self, sentence: int | None = None) -> tuple[list[str], list]:
        """``(source labels, steps)`` of a sentence (default: the chosen one), decoded once."""
        i = self.sentence if sentence is None else sentence
        if i not in self._cache:
            self._cache[i] = self.record(list(self.sources[i]))
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
        """:meth:`step_view` of the current sentence and step, plus its ``labels``."""
        labels, steps = self.recorded()
        return {**self.step_view(labels, steps, self.step), "labels": labels}


def stepper_box(state: SentenceStepper, png: Callable[[dict], bytes | None]):
    """An ipywidgets UI over ``state``: choose a sentence, then slide through its steps.

    Each change of a control draws once: choosing a sentence resets the slider with its observer
    detached, then draws the new sentence's first step. A lock keeps two changes from interleaving.

    Args:
        state: the stepper's state.
        png: ``png(view) -> PNG bytes`` of a view of ``state``, or ``None`` to hide the picture.

    Returns:
        ``VBox([dropdown, slider, text, picture])``.
    """
    import ipywidgets as W

    choose = W.Dropdown(
        options=state.options(),
        description="sentence",
        layout=W.Layout(width="98%"),
        style={"description_width": "initial"},
    )
    slider = W.IntSlider(min=0, max=state.last_step, value=0, description="step", continuous_update=True)
    text = W.HTML()
    chart = picture()
    lock = threading.RLock()  # one change at a time, whichever thread the kernel delivers it on

    def draw(view: dict) -> None:
        text.value = f"<pre>{html.escape(view['text'])}</pre>"
        image = png(view)
        if image is None:
            chart.layout.display = "none"
        else:
            chart.value = image
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
