"""Lesson 13's caption stepper, driven headless: recorded captions, frames, overlay, gold objects, wiring.

An untrained tiny captioner is enough to check that the records are greedy decoding's; the gold
logic is checked on hand-made scenes and attentions, where the right answer is known.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from torch import nn

from attnlab.data.corpus.scenes import caption_vocab, images_tensor, make_object, make_scene, make_scene_test_split
from attnlab.data.vocab import EOS, SPECIALS, Vocab
from attnlab.models.decoding import greedy_decode
from attnlab.models.vision import Captioner, CaptionerConfig
from attnlab.viz.widgets._live import figure_png, new_figure
from attnlab.viz.widgets.caption_stepper import (
    CaptionCase,
    caption_cases,
    caption_frame,
    caption_stepper_widget,
    format_caption_frame,
    named_objects,
    plot_caption_frame,
    upsample_attention,
)

GRID = 6  # 48-pixel scenes: regions of 8 x 8 pixels


@pytest.fixture(scope="module")
def scenes():
    return make_scene_test_split(seed=0, per_bucket=2)  # 1, 1, 2, 2, 3, 3 objects


@pytest.fixture(scope="module")
def captioner():
    torch.manual_seed(0)
    return Captioner(CaptionerConfig(len(caption_vocab()), grid=GRID, width=8, emb_dim=8, hid_dim=16)).eval()


class StopsEarly(nn.Module):
    """The captioner, made to emit ``<eos>`` from step ``2 + i`` on for image ``i`` of a batch (mixed lengths)."""

    def __init__(self, captioner, no_attention: bool = False, extra_region: bool = False):
        super().__init__()
        self.cap, self.no_attention, self.extra_region = captioner, no_attention, extra_region

    def check_source(self, images):
        self.cap.check_source(images)

    def encode(self, images):
        return {**self.cap.encode(images), "stop_at": torch.arange(images.size(0)) + 2}  # (B,)

    def init_state(self, memory):
        return self.cap.init_state(memory)

    def step(self, memory, state, y_prev, t):
        logits, state, attn = self.cap.step(memory, state, y_prev, t)  # (B, V), state, (B, S)
        logits = logits + 100.0 * torch.nn.functional.one_hot(torch.tensor(EOS), logits.size(-1)) * (
            memory["stop_at"] <= t
        ).unsqueeze(1)  # (B, V)
        if self.extra_region:
            attn = torch.cat([attn, torch.zeros_like(attn[:, :1])], dim=1)  # (B, S + 1)
        return logits, state, None if self.no_attention else attn


def two_object_case(attention_at: dict[int, int], tokens=None) -> CaptionCase:
    """A large red square in layout cell (0, 0) left of a large blue square in cell (2, 2), both centred.

    Pixels 1..14 of each axis for the first (regions 0, 1, 6, 7 of the 6 x 6 grid), 33..46 for the
    second (regions 28, 29, 34, 35). ``attention_at[t]`` is step t's one-hot region (default 14).
    """
    scene = make_scene([make_object("square", "red", "large", 0, 0), make_object("square", "blue", "large", 2, 2)])
    tokens = tuple(tokens or (*scene.tokens, "<eos>"))
    attn = np.zeros((len(tokens), GRID * GRID))  # (T, S)
    for t in range(len(tokens)):
        attn[t, attention_at.get(t, 14)] = 1.0
    return CaptionCase(scene, tokens, attn, GRID)


def one_object_case() -> CaptionCase:
    scene = make_scene([make_object("circle", "green", "small", 1, 1)])
    tokens = (*scene.tokens, "<eos>")
    return CaptionCase(scene, tokens, np.full((len(tokens), GRID * GRID), 1 / GRID**2), GRID)


# ------------------------------------------------------------------ caption_cases


def test_cases_record_greedy_decoding(captioner, scenes):
    model = StopsEarly(captioner)
    cases = caption_cases(model, scenes, k=3, max_len=6)
    ref = greedy_decode(model, images_tensor(scenes), max_len=6)
    itos = caption_vocab().itos
    assert [c.n_steps for c in cases] == [3, 4, 5, 6, 6, 6]  # <eos> forced from step 2 + i; cut at max_len
    assert cases[0].tokens[-1] == "<eos>" and "<eos>" not in cases[-1].tokens
    for i, (case, scene) in enumerate(zip(cases, scenes, strict=True)):
        n = int(ref.lengths[i])
        assert case.tokens == tuple(itos[int(j)] for j in ref.tokens[i, :n])
        assert case.attention.shape == (n, GRID * GRID)
        np.testing.assert_allclose(case.attention, ref.attn[i, :n].numpy(), atol=1e-6)
        np.testing.assert_allclose(case.attention.sum(1), 1.0, atol=1e-5)
        assert len(case.candidates) == n
        for tok, cands in zip(case.tokens, case.candidates, strict=True):
            assert len(cands) == 3 and cands[0][0] == tok
            assert [p for _, p in cands] == sorted((p for _, p in cands), reverse=True)
            assert all(w not in ("<pad>", "<bos>") for w, _ in cands)
        assert case.scene is scene and case.grid == GRID
        np.testing.assert_array_equal(case.image, scene.render().transpose(1, 2, 0))
        assert case.object_cells.shape == (scene.n_objects, GRID * GRID)


def test_cases_of_the_captioner_itself(captioner, scenes):
    cases = caption_cases(captioner, scenes[:2], max_len=5)
    ref = greedy_decode(captioner, images_tensor(scenes[:2]), max_len=5)
    for i, case in enumerate(cases):
        np.testing.assert_allclose(case.attention, ref.attn[i, : case.n_steps].numpy(), atol=1e-6)
        assert len(case.candidates[0]) == 3


def test_cases_refuse_bad_arguments(captioner, scenes):
    with pytest.raises(ValueError, match="scenes is empty"):
        caption_cases(captioner, [])
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        caption_cases(captioner, scenes[:1], k=0)
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        caption_cases(captioner, scenes[:1], max_len=0)
    with pytest.raises(ValueError, match="needs a model with attention"):
        caption_cases(StopsEarly(captioner, no_attention=True), scenes[:1], max_len=3)
    with pytest.raises(ValueError, match="attends over 37 regions, which is not a square grid"):
        caption_cases(StopsEarly(captioner, extra_region=True), scenes[:1], max_len=3)
    captioner.train()
    try:
        with pytest.raises(ValueError, match="the model scores 22 words but vocab has 4"):
            caption_cases(captioner, scenes[:1], vocab=Vocab(SPECIALS))
        assert captioner.training, "the model must get its training mode back when the recording stops"
    finally:
        captioner.eval()
    with pytest.raises(TypeError, match="must hold Scene objects"):
        caption_cases(captioner, ["a red circle"])


# ------------------------------------------------------------------ the pure pieces


def test_case_refuses_what_does_not_fit():
    good = two_object_case({})
    scene, tokens, attn = good.scene, good.tokens, good.attention
    with pytest.raises(ValueError, match=r"attention must be \(T, S\) = \(11, 36\) .* got shape \(11, 16\)"):
        CaptionCase(scene, tokens, attn[:, :16], GRID)
    with pytest.raises(ValueError, match=r"attention must be \(T, S\) = \(10, 36\)"):
        CaptionCase(scene, tokens[:-1], attn, GRID)
    with pytest.raises(ValueError, match="grid=5 must divide the scene's image_size=48"):
        CaptionCase(scene, tokens, attn[:, :25], 5)
    with pytest.raises(ValueError, match=r"candidates must have one entry per token \(11\), got 2"):
        CaptionCase(scene, tokens, attn, GRID, candidates=((), ()))
    with pytest.raises(ValueError, match="tokens must be a non-empty sequence"):
        CaptionCase(scene, (), attn[:0], GRID)
    with pytest.raises(TypeError, match="scene must be an attnlab.data.corpus.scenes.Scene"):
        CaptionCase("scene", tokens, attn, GRID)


@pytest.mark.parametrize("cell", range(GRID * GRID))
def test_overlay_lights_exactly_its_regions_pixels(cell):
    one_hot = np.zeros(GRID * GRID)
    one_hot[cell] = 0.7
    overlay = upsample_attention(one_hot, GRID, 48)
    r, c = divmod(cell, GRID)
    expected = np.zeros((48, 48))
    expected[8 * r : 8 * (r + 1), 8 * c : 8 * (c + 1)] = 0.7
    np.testing.assert_array_equal(overlay, expected)


def test_overlay_refuses_a_map_that_does_not_fit():
    with pytest.raises(ValueError, match=r"attention must be \(S,\) = \(36,\) for a 6x6 grid, got shape \(35,\)"):
        upsample_attention(np.ones(35), GRID, 48)
    with pytest.raises(ValueError, match="grid=5 must divide image_size=48"):
        upsample_attention(np.ones(25), 5, 48)
    with pytest.raises(ValueError, match="grid must be >= 1, got 0"):
        upsample_attention(np.ones(1), 0, 48)


def test_named_objects_count_the_phrases():
    toks = "a small red square , a large blue circle and a small green cross <eos>".split()
    assert named_objects(toks, 3) == (None, 0, 0, 0, None, None, 1, 1, 1, None, None, 2, 2, 2, None)
    # a phrase the scene does not have, words before any "a", a wrong colour: judged by position
    assert named_objects("red a small blue circle left of a small".split(), 1) == (
        None, None, 0, 0, 0, None, None, None, None,
    )
    with pytest.raises(ValueError, match="n_objects must be >= 0, got -1"):
        named_objects(["a"], -1)


def test_frame_for_every_step(captioner, scenes):
    for case in caption_cases(StopsEarly(captioner), scenes, max_len=6):
        objects = named_objects(case.tokens, case.scene.n_objects)
        for t in range(case.n_steps):
            f = caption_frame(case, t)
            assert f["word"] == case.tokens[t] and f["words"] == list(case.tokens[: t + 1])
            assert f["marked"].endswith(f"[{case.tokens[t]}]") and f["marked"].count("[") == 1
            np.testing.assert_array_equal(f["attention"], case.attention[t])
            assert f["overlay"].shape == (48, 48)
            np.testing.assert_allclose(f["overlay"].sum(), 64 * case.attention[t].sum(), rtol=1e-5)
            assert f["peak"] == int(np.argmax(case.attention[t])) and f["peak_cell"] == divmod(f["peak"], GRID)
            assert f["object"] == objects[t] and (f["box"] is None) == (objects[t] is None)
            assert (f["peak_on_gold"] is None) == (objects[t] is None)
            assert f["candidates"] == case.candidates[t]
        with pytest.raises(ValueError, match=rf"step must be < {case.n_steps} \(the caption's tokens\)"):
            caption_frame(case, case.n_steps)


def test_frame_refuses_bad_arguments():
    case = one_object_case()
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        caption_frame(case, -1)
    with pytest.raises(TypeError, match="step must be an int, got float"):
        caption_frame(case, 1.0)
    with pytest.raises(TypeError, match="case must be a CaptionCase"):
        caption_frame({"tokens": ["a"]}, 0)


def test_peak_on_gold_follows_the_objects_pixels():
    # step 3 "square" (object 0) looks at region 7, inside it; step 8 "blue" (object 1) looks at
    # region 0, on object 0 instead; step 9 "square" (object 1) at region 35, on it
    case = two_object_case({3: 7, 8: 0, 9: 35})
    assert case.tokens[3] == "square" and case.tokens[8] == "blue"
    np.testing.assert_array_equal(np.flatnonzero(case.object_cells[0]), [0, 1, 6, 7])
    np.testing.assert_array_equal(np.flatnonzero(case.object_cells[1]), [28, 29, 34, 35])
    on = caption_frame(case, 3)
    assert on["object"] == 0 and on["peak_on_gold"] is True and on["right_word"] is True
    assert on["box"] == (1, 1, 15, 15) and on["object_words"] == ("large", "red", "square")
    off = caption_frame(case, 8)
    assert off["object"] == 1 and off["peak_on_gold"] is False and off["box"] == (33, 33, 47, 47)
    assert caption_frame(case, 9)["peak_on_gold"] is True
    assert caption_frame(case, 1)["peak_on_gold"] is False  # "large" of object 0, looking at region 14
    for t in (0, 4, 5, 6, 10):  # a, left, of, a, <eos>
        f = caption_frame(case, t)
        assert f["object"] is None and f["peak_on_gold"] is None and f["box"] is None and f["right_word"] is None
    wrong = two_object_case({2: 6}, tokens="a large green square left of a large blue square <eos>".split())
    f = caption_frame(wrong, 2)
    assert f["word"] == "green" and f["object"] == 0 and f["right_word"] is False and f["peak_on_gold"] is True


def test_text_and_plot_show_the_step():
    case = two_object_case({3: 7, 8: 0})
    on, off = caption_frame(case, 3), caption_frame(case, 8)
    text = format_caption_frame(off)
    assert "caption so far: a large red square left of a large [blue]" in text
    assert "object 1, a large blue square (the right word)" in text and "OFF the object" in text
    assert "ON the object" in format_caption_frame(on)
    assert "names no object" in format_caption_frame(caption_frame(case, 4))
    ax = plot_caption_frame(off, case.image, new_figure((3, 3)).add_subplot())
    np.testing.assert_array_equal(ax.images[0].get_array(), case.image)
    np.testing.assert_array_equal(ax.images[1].get_array(), off["overlay"])
    peak, box = ax.patches
    assert peak.get_xy() == (-0.5, -0.5) and peak.get_width() == 8  # region 0
    assert box.get_xy() == (32.5, 32.5) and box.get_width() == 14 and box.get_height() == 14
    assert box.get_edgecolor()[:3] == (1.0, 0.0, 0.0)  # red: the peak is off the object
    ax = plot_caption_frame(on, case.image, new_figure((3, 3)).add_subplot())
    assert ax.patches[1].get_edgecolor()[:3] == (0.0, 1.0, 0.0)  # lime: on it
    assert len(plot_caption_frame(caption_frame(case, 4), case.image, new_figure((3, 3)).add_subplot()).patches) == 1


def test_update_timing(captioner, scenes):
    """No assert: prints how long one update takes (the issue asks < 100 ms)."""
    case = caption_cases(captioner, scenes[-1:], max_len=15)[0]
    start = time.perf_counter()
    for t in range(case.n_steps):
        frame = caption_frame(case, t)
    lookup = (time.perf_counter() - start) / case.n_steps
    start = time.perf_counter()
    fig = new_figure((3.0, 3.0))
    plot_caption_frame(frame, case.image, fig.add_subplot())
    png = figure_png(fig)
    print(f"caption_frame: {1000 * lookup:.2f} ms; draw + PNG: {1000 * (time.perf_counter() - start):.1f} ms "
          f"({len(png)} bytes)")


# ------------------------------------------------------------------ the widget


def test_widget_follows_its_controls():
    pytest.importorskip("ipywidgets")
    long, short = two_object_case({3: 7, 8: 0}), one_object_case()
    w = caption_stepper_widget([long, short])
    scene, step = w.children[0].children
    text, plot = w.children[1], w.children[2]
    pictures = []
    plot.observe(lambda change: pictures.append(change["new"]), names="value")
    assert [label for label, _ in scene.options] == ["#0: a large red square left of …", "#1: a small green circle"]
    assert w.result["scene"] == 0 and w.result["step"] == 0 and bytes(plot.value).startswith(b"\x89PNG")
    assert step.max == 10
    step.value = 3
    assert w.result["word"] == "square" and w.result["peak_on_gold"] is True
    step.value = 8
    assert w.result["word"] == "blue" and w.result["peak_on_gold"] is False and "[blue]" in text.value
    assert len(pictures) == 2 and pictures[0] != pictures[1]
    scene.value = 1  # a shorter caption: the slider is cut to its length, one new picture
    assert step.max == 4 and step.value == 4
    assert w.result["scene"] == 1 and w.result["step"] == 4 and w.result["word"] == "<eos>"
    assert w.result["peak_on_gold"] is None and len(pictures) == 3
    step.value = 3
    assert w.result["word"] == "circle" and w.result["object"] == 0 and len(pictures) == 4
    scene.value = 0  # a longer caption: the slider keeps its place
    assert step.max == 10 and w.result["step"] == 3 and w.result["word"] == "square" and len(pictures) == 5


def test_widget_refuses_bad_arguments():
    pytest.importorskip("ipywidgets")
    with pytest.raises(ValueError, match="at least one case"):
        caption_stepper_widget([])
    with pytest.raises(TypeError, match=r"cases\[1\] must be a CaptionCase"):
        caption_stepper_widget([one_object_case(), {"tokens": ["a"]}])
    with pytest.raises(ValueError, match="labels must name each of the 2 cases once"):
        caption_stepper_widget([one_object_case(), one_object_case()], labels=["x", "x"])
