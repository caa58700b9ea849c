"""Headless tests of lessons 4-5's widgets: the pure update functions and the thin wrappers."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

from attnlab.viz.widgets.head_viewer import as_layer_head_stack, head_viewer, update_head_viewer
from attnlab.viz.widgets.mask_lab import describe_mask_lab, mask_lab_widget, plot_mask_lab, update_mask_lab
from attnlab.viz.widgets.worked_example import (
    PUBLISHED_OUTPUT,
    PUBLISHED_ROUNDED_SCORES,
    PUBLISHED_WEIGHTS,
    format_worked_example,
    update_worked_example,
    worked_example_inputs,
    worked_example_widget,
)

matplotlib.use("Agg")


# ----------------------------------------------------------------------------------------------
# worked example
# ----------------------------------------------------------------------------------------------


def test_worked_example_reproduces_the_published_scores():
    r = update_worked_example(**worked_example_inputs())
    assert r["Q"].tolist() == [[1, 0, 2], [3, 3, 3], [2, 1, 3]]
    assert r["K"].tolist() == [[0, 1, 1], [6, 6, 3], [2, 3, 2]]
    assert r["V"].tolist() == [[1, 2, 3], [3, 12, 0], [2, 6, 3]]
    assert r["scores"][0].tolist() == [2, 12, 6]
    torch.testing.assert_close(r["scaled"][0], torch.tensor([2, 12, 6], dtype=torch.float64) / math.sqrt(3))
    torch.testing.assert_close(r["weights"], torch.softmax(r["scaled"], dim=-1))
    torch.testing.assert_close(r["output"], r["weights"] @ r["V"])
    torch.testing.assert_close(r["output"], F.scaled_dot_product_attention(r["Q"], r["K"], r["V"]))


def test_published_constants_are_consistent():
    """The seed's printed numbers follow from its rounded scores (and are not the exact ones)."""
    V = update_worked_example(**worked_example_inputs())["V"]
    w = torch.softmax(torch.tensor(PUBLISHED_ROUNDED_SCORES, dtype=torch.float64), 0)
    assert [round(x, 4) for x in w.tolist()] == list(PUBLISHED_WEIGHTS)
    out = torch.tensor(PUBLISHED_WEIGHTS, dtype=torch.float64) @ V
    torch.testing.assert_close(out, torch.tensor(PUBLISHED_OUTPUT, dtype=torch.float64))


def test_worked_example_is_pure_and_scale_switch():
    inputs = worked_example_inputs()
    before = {k: v.clone() for k, v in inputs.items()}
    a = update_worked_example(**inputs)
    b = update_worked_example(**inputs)
    for k in a:
        torch.testing.assert_close(a[k], b[k])
    for k in inputs:
        torch.testing.assert_close(inputs[k], before[k])  # inputs untouched
    raw = update_worked_example(**inputs, scale=False)
    torch.testing.assert_close(raw["scaled"], raw["scores"])
    assert raw["weights"][0].max() > a["weights"][0].max()  # no scaling: a sharper softmax


def test_worked_example_errors_and_format():
    inputs = worked_example_inputs()
    with pytest.raises(ValueError, match=r"W_K must be \(d, d_k\) with d = 4.*\(3, 3\)"):
        update_worked_example(inputs["X"], inputs["W_Q"], torch.ones(3, 3), inputs["W_V"])
    text = format_worked_example(update_worked_example(**inputs))
    assert "[2, 12, 6]" in text
    assert text.count("\n") == 7 * 3 - 1


def test_worked_example_widget_updates_when_a_cell_changes():
    root = worked_example_widget()
    assert root.result["scores"][0].tolist() == [2, 12, 6]
    x_grid = root.children[0].children[0]  # VBox: title, then one HBox per row of X
    x_grid.children[1].children[0].value = 2.0  # X[0, 0]: 1 -> 2
    assert root.result["Q"][0].tolist() == [2, 0, 3]
    html_box = root.children[2].children[0]
    assert "[2, 0, 3]" in html_box.value


# ----------------------------------------------------------------------------------------------
# mask lab
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_mask_lab_padding_and_causal(causal):
    r = update_mask_lab([4, 2], causal, max_len=5)
    mask, w = r["mask"], r["weights"]
    assert mask.shape == w.shape == (2, 5, 5)
    assert not mask[1, :, 2:].any()  # padding keys are never attended
    assert (w[1, :, 2:] == 0).all()
    if causal:
        assert not mask[0].triu(1).any()
    else:
        assert mask[0, 0, 3]
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5))  # no dead rows without query masking
    assert r["tokens"][1] == ["t0", "t1", "<pad>", "<pad>", "<pad>"]


def test_mask_lab_dead_rows_are_zero_and_pure():
    r = update_mask_lab([3, 0], True, max_len=4, mask_padded_queries=True)
    assert r["dead_rows"].tolist() == [[False, False, False, True], [True] * 4]
    assert (r["weights"][r["dead_rows"]] == 0).all()
    assert not r["weights"].isnan().any()
    r2 = update_mask_lab([3, 0], True, max_len=4, mask_padded_queries=True)
    torch.testing.assert_close(r["weights"], r2["weights"])
    assert "fully masked rows [3]" in describe_mask_lab(r)
    with pytest.raises(ValueError, match=r"every length must be in 0..4"):
        update_mask_lab([5], False, max_len=4)


def test_mask_lab_plot_and_widget():
    fig = plot_mask_lab(update_mask_lab([3, 2], True))
    assert len(fig.axes) == 4
    root = mask_lab_widget(lengths=(4, 2), max_len=5)
    assert root.result["lengths"] == [4, 2]
    sliders_box, boxes = root.children[0].children
    sliders_box.children[1].value = 1
    assert root.result["lengths"] == [4, 1]
    boxes.children[0].value = True  # causal on
    assert not root.result["mask"][0].triu(1).any()


# ----------------------------------------------------------------------------------------------
# head viewer
# ----------------------------------------------------------------------------------------------


def _stack(N=2, H=3, T=4, S=5):
    gen = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(N, H, T, S, generator=gen), dim=-1)  # (N, H, T, S)


def test_as_layer_head_stack_shapes():
    w = _stack()
    assert as_layer_head_stack(w).shape == (2, 3, 4, 5)
    assert as_layer_head_stack(w[0]).shape == (1, 3, 4, 5)
    assert as_layer_head_stack(w[0, 0]).shape == (1, 1, 4, 5)
    assert as_layer_head_stack([w[0], w[1]]).shape == (2, 3, 4, 5)
    with pytest.raises(ValueError, match=r"\(layers, heads, T, S\)"):
        as_layer_head_stack(torch.ones(1, 1, 1, 1, 1))


def test_update_head_viewer_one_head_and_all_heads():
    w = _stack()
    w[1, 2] = torch.eye(4, 5)  # a head that attends position i -> key i
    src, tgt = list("abcde"), list("wxyz")
    r = update_head_viewer(w, 1, 2, src, tgt)
    torch.testing.assert_close(r["weights"], w[1, 2])
    assert r["argmax"] == [0, 1, 2, 3]
    assert r["entropy"] == pytest.approx(0.0, abs=1e-6)
    assert "w -> a" in r["summary"] and r["title"] == "layer 1, head 2"
    r_all = update_head_viewer(w, 0, None, src, tgt, layer_labels=["enc", "dec"])
    assert r_all["weights"].shape == (1, 3, 4, 5) and r_all["title"] == "enc, all heads"
    assert r_all["entropy"].shape == (3,)


def test_update_head_viewer_errors_and_masked_rows():
    w = _stack()
    with pytest.raises(IndexError, match=r"head 3 out of range: the weights have 3 head"):
        update_head_viewer(w, 0, 3)
    with pytest.raises(IndexError, match=r"layer 2 out of range"):
        update_head_viewer(w, 2, 0)
    with pytest.raises(ValueError, match=r"src_tokens has 2 labels but the weights have S=5"):
        update_head_viewer(w, 0, 0, ["a", "b"])
    w[0, 0, 1] = 0.0  # a fully masked query row
    assert "(fully masked)" in update_head_viewer(w, 0, 0)["summary"]


def test_head_viewer_widget_cross_attention_shape():
    """Cross-attention (T != S), as lesson 6 will use it."""
    w = _stack(N=2, H=2, T=3, S=6)
    root = head_viewer(w, [f"s{j}" for j in range(6)], ["y0", "y1", "y2"], title="cross-attention")
    assert root.result["weights"].shape == (3, 6)
    picks = root.children[1].children
    picks[1].value = -1  # all heads
    assert root.result["weights"].shape == (1, 2, 3, 6)
    picks[0].value = 1
    assert root.result["title"] == "layer 1, all heads"
