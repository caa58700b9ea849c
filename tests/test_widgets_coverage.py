"""Headless tests of lesson 7's coverage explorer: the pure update function and the widget's wiring."""

from __future__ import annotations

import time

import numpy as np
import pytest

from attnlab.viz.widgets._live import new_figure
from attnlab.viz.widgets.coverage_explorer import (
    coverage_explorer_widget,
    format_coverage_explorer,
    plot_coverage_explorer,
    update_coverage_explorer,
)

CASE = {
    "src": ["the", "cat", "sleeps", "<eos>"][:3],
    "hyp": ["le", "chat", "chat", "dort"],
    "ref": ["le", "chat", "dort"],
    "attn": np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.0, 0.8, 0.2], [0.0, 0.1, 0.9]]),
    "fertility": [1, 1, 1],
}


def test_update_sums_the_attention_so_far_and_marks_over_coverage():
    r = update_coverage_explorer(CASE, 1)
    np.testing.assert_allclose(r["coverage"], [1.0, 1.0, 0.0])
    assert r["n_over"] == 0 and r["word"] == "chat"
    r = update_coverage_explorer(CASE, 2)  # "chat" written twice: "cat" has 1.8 > 1 + 0.5
    np.testing.assert_allclose(r["coverage"], [1.0, 1.8, 0.2])
    assert r["over"].tolist() == [False, True, False] and r["n_over"] == 1
    np.testing.assert_allclose(r["current"], CASE["attn"][2])
    assert update_coverage_explorer(CASE, 2, tolerance=1.0)["n_over"] == 0


def test_update_refuses_a_step_outside_the_output_and_a_case_that_does_not_fit():
    with pytest.raises(ValueError, match=r"step must be < 4 \(output words\), got 4"):
        update_coverage_explorer(CASE, 4)
    with pytest.raises(ValueError, match=r"step must be >= 0"):
        update_coverage_explorer(CASE, -1)
    with pytest.raises(ValueError, match=r"case\['attn'\] must be \(T', S=2\)"):
        update_coverage_explorer({**CASE, "fertility": [1, 1]}, 0)


def test_update_is_fast():
    big = {**CASE, "src": ["w"] * 40, "hyp": ["v"] * 45, "attn": np.random.rand(45, 40), "fertility": [1] * 40}
    start = time.perf_counter()
    update_coverage_explorer(big, 44)
    print(f"update: {1000 * (time.perf_counter() - start):.2f} ms")


def test_text_and_plot_name_the_over_covered_word():
    r = update_coverage_explorer(CASE, 2)
    text = format_coverage_explorer(r)
    assert "over-covered" in text and "cat" in text.splitlines()[-1] and "le chat chat" in text
    ax = plot_coverage_explorer(r, new_figure((4, 2)).add_subplot())
    bars = ax.patches[:3]
    assert [b.get_height() for b in bars] == pytest.approx([1.0, 1.8, 0.2])
    assert bars[1].get_facecolor()[:3] != bars[0].get_facecolor()[:3]  # the over-covered bar is red


def test_widget_follows_its_controls():
    pytest.importorskip("ipywidgets")
    other = {**CASE, "hyp": ["le", "chat"], "attn": CASE["attn"][:2]}
    w = coverage_explorer_widget([CASE, other], labels=["a", "b"])
    sentence, step = w.children[0].children
    assert w.result["step"] == 0 and bytes(w.children[2].value).startswith(b"\x89PNG")
    step.value = 3
    assert w.result["word"] == "dort"
    sentence.value = 1  # a shorter sentence: the slider is cut to its length
    assert step.max == 1 and w.result["step"] == 1 and w.result["hyp"] == ["le", "chat"]
    with pytest.raises(ValueError, match="at least one case"):
        coverage_explorer_widget([])
