"""The drawing every lesson widget shares (attnlab.viz.widgets._live), driven headless: one PNG per change,
no pyplot inside a callback, one change at a time whichever thread delivers it."""

from __future__ import annotations

import threading
import time

import matplotlib.pyplot as plt
import pytest
import torch

pytest.importorskip("ipywidgets")
import ipywidgets as widgets  # noqa: E402
from ipywidgets.widgets.widget_link import Link  # noqa: E402

from attnlab.viz.widgets import decode_stepper  # noqa: E402
from attnlab.viz.widgets._live import figure_png, flipbook, live, new_figure, picture  # noqa: E402
from attnlab.viz.widgets.head_viewer import head_viewer, plot_head_viewer, update_head_viewer  # noqa: E402
from attnlab.viz.widgets.mask_lab import mask_lab_widget, plot_mask_lab, update_mask_lab  # noqa: E402
from attnlab.viz.widgets.score_playground import (  # noqa: E402
    score_playground_widget,
    temperature_flipbook,
    temperature_widget,
    update_temperature,
)
from attnlab.viz.widgets.worked_example import worked_example_widget  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _heads(N=2, H=3, T=4, S=5):
    gen = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(N, H, T, S, generator=gen), dim=-1)  # (N, H, T, S)


def _pictures(root) -> list:
    found, todo = [], [root]
    while todo:
        w = todo.pop()
        if isinstance(w, widgets.Image):
            found.append(w)
        elif isinstance(w, widgets.Output):
            raise AssertionError("a lesson widget draws into an Output widget (pyplot from a callback)")
        todo.extend(getattr(w, "children", ()))
    return found


# (constructor, how to change one control of the built widget)
WIDGETS = {
    "mask_lab": (lambda: mask_lab_widget(lengths=(4, 2), max_len=5), lambda r: setattr(r.children[0].children[0].children[1], "value", 1)),
    "head_viewer": (lambda: head_viewer(_heads()), lambda r: setattr(r.children[0].children[1], "value", 2)),
    "score_playground": (score_playground_widget, lambda r: setattr(r.children[0].children[0].children[1].children[0], "value", -1.0)),
    "temperature": (temperature_widget, lambda r: setattr(r.children[0].children[2], "value", True)),
    "worked_example": (worked_example_widget, lambda r: setattr(r.children[1], "value", False)),
}


@pytest.mark.parametrize("name", list(WIDGETS))
def test_every_change_shows_a_new_png_drawn_without_pyplot(name):
    """Lessons 03-06: the picture is a PNG in an Image widget, replaced once per change, and no
    pyplot figure is opened by building or moving the widget (pyplot is not thread-safe, and a
    cleared Output showed broken frames while a slider was dragged)."""
    make, change = WIDGETS[name]
    plt.close("all")
    root = make()
    [pic] = _pictures(root)
    first = pic.value
    assert first[:8] == PNG
    change(root)
    assert pic.value[:8] == PNG and pic.value != first
    assert plt.get_fignums() == [], "a widget opened a pyplot figure"


def test_live_draws_once_per_change_and_checks_its_arguments():
    slider, text, pic, drawn = widgets.IntSlider(value=1, max=5), widgets.HTML(), picture(), []

    def draw(result):
        drawn.append(result["n"])
        fig = new_figure((1, 1))
        fig.add_subplot().bar([0], [result["n"]])
        return fig

    root = live(widgets.VBox(), text, pic, [slider], lambda: {"n": slider.value}, lambda r: f"n={r['n']}", draw)
    slider.value = 3
    assert drawn == [1, 3] and root.result == {"n": 3} and "n=3" in text.value
    with pytest.raises(TypeError, match="plot must be an ipywidgets.Image .*, got Output"):
        live(widgets.VBox(), text, widgets.Output(), [], lambda: {"n": 0}, str, draw)

    def pyplot_draw(result):
        return plt.figure()

    with pytest.raises(TypeError, match="draw returned a pyplot figure"):
        live(widgets.VBox(), text, picture(), [], lambda: {"n": 0}, str, pyplot_draw)
    plt.close("all")


def test_live_handles_one_change_at_a_time_across_threads():
    """ipykernel 7 may deliver widget events on another thread: two changes must not interleave
    their compute/draw (the second waits), and the last change is what is shown."""
    slider, busy, overlaps = widgets.IntSlider(value=0, max=10), threading.Event(), []

    def compute():
        if busy.is_set():
            overlaps.append(slider.value)
        busy.set()
        time.sleep(0.05)
        result = {"n": slider.value}
        busy.clear()
        return result

    def draw(result):
        return new_figure((1, 1))

    root = live(widgets.VBox(), widgets.HTML(), picture(), [slider], compute, str, draw)
    threads = [threading.Thread(target=setattr, args=(slider, "value", v)) for v in (3, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert root.result == {"n": slider.value}


def test_figure_png_is_a_png_of_the_figure():
    fig = new_figure((2, 1))
    assert fig.canvas.manager is None  # not known to pyplot
    empty = figure_png(fig)
    fig.add_subplot().plot([0, 1], [1, 0])
    drawn = figure_png(fig)
    assert empty[:8] == drawn[:8] == PNG and len(drawn) > len(empty)


def test_plot_mask_lab_draws_on_a_given_figure():
    fig = new_figure((1, 1))
    assert plot_mask_lab(update_mask_lab([3, 2], True), fig=fig) is fig
    assert len(fig.axes) == 4 and tuple(fig.get_size_inches()) == (2.0 * 2 + 0.5, 2 * 2.0 + 0.8)


def test_head_viewer_uses_one_colour_scale_per_layer_with_a_colour_bar():
    """Lessons 05/06: every head was scaled to its own maximum and had no colour bar, so a
    near-uniform head looked as patterned as a sharp one. Now every panel, and a single head
    too, runs from 0 to the largest weight of the layer, shown on one colour bar."""
    w = _heads(N=2, H=3, T=4, S=5)
    w[0, 1] = torch.eye(4, 5)  # a sharp head (max 1) beside near-uniform ones
    w[0, 2] = torch.full((4, 5), 0.2) + 0.01 * torch.arange(5)  # nearly uniform
    for head in (None, 2):
        r = update_head_viewer(w, 0, head)
        assert r["vmax"] == pytest.approx(1.0)
        fig = plot_head_viewer(r, fig=new_figure((1, 1)))
        panels = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
        assert len(panels) == (3 if head is None else 1)
        assert all(ax.images[-1].get_clim() == (0.0, pytest.approx(1.0)) for ax in panels)
        assert len(fig.axes) == len(panels) + 1, "one colour bar for all panels"
    assert update_head_viewer(w, 1, None)["vmax"] == pytest.approx(float(w[1].max()))
    zero = update_head_viewer(torch.zeros(1, 1, 2, 2), 0, 0)  # fully masked weights still get a scale
    assert zero["vmax"] > 0
    fig = plot_head_viewer(zero)  # the pyplot path, for a lesson cell
    assert fig.canvas.manager is not None
    plt.close("all")


def test_stepper_handles_one_change_at_a_time_across_threads(monkeypatch):
    """Lesson 02's stepper: a sentence chosen while a step change is being drawn waits for it,
    so the chart shown is always the chosen sentence's (no mixed or half-drawn PNG)."""
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

    from .conftest import copy_task_splits

    splits = copy_task_splits(n_train=200)
    src_vocab, tgt_vocab = build_vocabs(splits)
    torch.manual_seed(0)
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention="bahdanau")).eval()
    inside, overlaps = threading.Event(), []

    def slow_png(labels, attention):
        if inside.is_set():
            overlaps.append(tuple(labels))
        inside.set()
        time.sleep(0.3)  # longer than decoding a sentence, so that the other change arrives meanwhile
        inside.clear()
        return PNG + bytes(str(tuple(labels)), "utf8")

    monkeypatch.setattr(decode_stepper, "attention_png", slow_png)
    box = decode_stepper.stepper(model, splits.test[:3], src_vocab, tgt_vocab)
    choose, slider, _, chart = box.children
    threads = [
        threading.Thread(target=setattr, args=(slider, "value", 2)),
        threading.Thread(target=setattr, args=(choose, "value", 1)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    labels = [*splits.test[choose.value].src, "<eos>"]
    assert chart.value == PNG + bytes(str(tuple(labels)), "utf8")


def test_flipbook_moves_in_the_browser_alone():
    """The d_k flipbook: one frame per d_k, drawn from update_temperature unscaled and scaled, and the
    slider tied to the shown frame by a jslink (a browser-side link: no kernel needed, so it moves on
    the static website)."""
    plt.close("all")
    book = temperature_flipbook(d_ks=(1, 64, 1024))
    assert plt.get_fignums() == []
    slider, stack = book.children
    assert isinstance(stack, widgets.Stack) and len(stack.children) == 3 == len(book.frames)
    assert "attnlab-flipbook" in book._dom_classes
    assert [img.value for img in stack.children] == book.frames and all(f.startswith(PNG) for f in book.frames)
    assert len(set(book.frames)) == 3  # every d_k draws a different picture
    links = [w for w in widgets.Widget.widgets.values() if isinstance(w, Link)
             and w.source == (slider, "index") and w.target == (stack, "selected_index")]
    assert len(links) == 1
    # each frame shows what update_temperature gives for its d_k, without and with the scale
    unscaled, scaled = book.results[2]
    assert unscaled["max_weight"] == update_temperature(1024, 1.0, scale=False)["max_weight"]
    assert scaled["max_weight"] == update_temperature(1024, 1.0, scale=True)["max_weight"] < unscaled["max_weight"]


def test_flipbook_rejects_frames_that_do_not_match():
    png = figure_png(new_figure((1, 1)))
    with pytest.raises(ValueError, match="one frame per option, got 2 options and 1 frames"):
        flipbook([1, 2], [png], description="x")
    with pytest.raises(TypeError, match="frames must be PNG bytes"):
        flipbook([1], ["not a png"], description="x")
