"""Headless tests of lesson 3's widgets: the score playground and the d_k / temperature slider."""

from __future__ import annotations

import math
from statistics import median

import matplotlib
import pytest
import torch

from attnlab.core.scores import SCORE_KINDS
from attnlab.viz.widgets.score_playground import (
    DEFAULT_KEYS,
    DEFAULT_QUERY,
    format_score_playground,
    format_temperature,
    make_scorers,
    plot_score_playground,
    plot_temperature,
    score_playground_widget,
    temperature_widget,
    update_score_playground,
    update_temperature,
)

matplotlib.use("Agg")


# ----------------------------------------------------------------------------------------------
# score playground
# ----------------------------------------------------------------------------------------------


def test_playground_matches_each_scorer_and_hand_formulas():
    q, K = torch.tensor(DEFAULT_QUERY), torch.tensor(DEFAULT_KEYS)
    scorers = make_scorers(4)
    r = update_score_playground(q, K, scorers)
    assert r["kinds"] == list(SCORE_KINDS)
    for kind in SCORE_KINDS:
        torch.testing.assert_close(r["scores"][kind], scorers[kind](q[None], K[None])[0].detach())
        torch.testing.assert_close(r["weights"][kind], torch.softmax(r["scores"][kind], 0))
    torch.testing.assert_close(r["scores"]["dot"], K @ q)  # q . k_j
    torch.testing.assert_close(r["scores"]["scaled_dot"], K @ q / 2)  # / sqrt(4)
    torch.testing.assert_close(r["scores"]["general"], K @ scorers["general"].W.weight.T @ q)  # q^T W k_j
    torch.testing.assert_close(r["scores"]["location"], scorers["location"].W(q)[:4].detach())  # ignores keys
    # the long key (row 3, twice key 0) wins the dot score; the opposite key loses it
    assert r["argmax"]["dot"] == 3 and int(r["scores"]["dot"].argmin()) == 1


def test_playground_is_pure_and_deterministic():
    q, K = torch.tensor(DEFAULT_QUERY), torch.tensor(DEFAULT_KEYS)
    q0, K0 = q.clone(), K.clone()
    before = torch.randn(3)
    torch.manual_seed(123)
    a = update_score_playground(q, K)
    after = torch.randn(3)
    torch.manual_seed(123)
    b = update_score_playground(q.tolist(), K.tolist())  # nested lists work too
    for kind in SCORE_KINDS:
        torch.testing.assert_close(a["scores"][kind], b["scores"][kind])
    torch.testing.assert_close(q, q0)
    torch.testing.assert_close(K, K0)
    torch.manual_seed(123)
    torch.testing.assert_close(torch.randn(3), after)  # the global RNG is not consumed
    assert not torch.equal(before, after)


def test_playground_location_ignores_keys_dot_does_not():
    q, K = torch.tensor(DEFAULT_QUERY), torch.tensor(DEFAULT_KEYS)
    scorers = make_scorers(4)
    a = update_score_playground(q, K, scorers)
    b = update_score_playground(q, K.flip(0), scorers)
    torch.testing.assert_close(a["weights"]["location"], b["weights"]["location"])
    torch.testing.assert_close(a["weights"]["dot"], b["weights"]["dot"].flip(0))


def test_playground_errors_are_clear():
    with pytest.raises(ValueError, match="same width d: query has d=3, keys have d=4"):
        update_score_playground([1.0, 0.0, 0.0], DEFAULT_KEYS)
    with pytest.raises(ValueError, match=r"query must be one vector"):
        update_score_playground([[1.0, 0.0]], [[1.0, 0.0]])
    with pytest.raises(ValueError, match=r"scorer was built for query/key width 4/4, got d=2"):
        update_score_playground([1.0, 0.0], [[1.0, 0.0]], make_scorers(4))
    with pytest.raises(ValueError, match="dim must be >= 1"):
        make_scorers(0)


def test_playground_format_and_plot():
    r = update_score_playground(DEFAULT_QUERY, DEFAULT_KEYS)
    text = format_score_playground(r, ["same", "opposite", "orthogonal", "long"])
    assert text.splitlines()[1].split() == ["same", "opposite", "orthogonal", "long"]
    assert len(text.splitlines()) == 2 * (2 + len(SCORE_KINDS)) + 1
    assert "2.500" in text  # dot score of the long key: 2*1 + 1*0.5
    ax = plot_score_playground(r)
    assert len(ax.patches) == 4 * len(SCORE_KINDS)
    matplotlib.pyplot.close("all")


def test_playground_widget_updates_when_a_cell_changes():
    root = score_playground_widget()
    torch.testing.assert_close(root.result["scores"]["dot"], torch.tensor([1.25, -1.25, 0.0, 2.5]))
    editors = root.children[0].children[0]  # VBox: title, query row, title, one row per key
    editors.children[1].children[0].value = -1.0  # q[0]: 1 -> -1
    torch.testing.assert_close(root.result["scores"]["dot"], torch.tensor([-0.75, 0.75, 0.0, -1.5]))
    editors.children[3].children[3].value = 5.0  # k0[2]: 0 -> 5 (row 0: label, then 4 cells)
    assert root.result["scores"]["dot"].tolist()[0] == pytest.approx(-0.75)
    matplotlib.pyplot.close("all")


# ----------------------------------------------------------------------------------------------
# d_k / temperature slider
# ----------------------------------------------------------------------------------------------


def test_temperature_by_hand():
    r = update_temperature(16, 0.5, scale=True, n_keys=5, seed=3)
    torch.testing.assert_close(r["logits"], r["raw"] / (4 * 0.5))
    torch.testing.assert_close(r["weights"], torch.softmax(r["logits"], 0))
    p = r["weights"]
    assert r["entropy"] == pytest.approx(float(-(p * p.log()).sum()))
    # the gradient norm is the softmax Jacobian applied to a fixed vector, checked with autograd
    logits = r["logits"].clone().requires_grad_()
    g = torch.randn(5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (torch.softmax(logits, 0) @ g).backward()
    assert r["grad_norm"] == pytest.approx(float(logits.grad.norm()))
    raw = update_temperature(16, 0.5, scale=False, n_keys=5, seed=3)
    torch.testing.assert_close(raw["raw"], r["raw"])  # same vectors, only the divisor differs
    torch.testing.assert_close(raw["logits"], r["raw"] / 0.5)


def test_temperature_sharpens_and_flattens_monotonically():
    temps = [0.05, 0.2, 1.0, 5.0, 50.0]
    runs = [update_temperature(64, T, scale=True, seed=1) for T in temps]
    ent = [r["entropy"] for r in runs]
    top = [r["max_weight"] for r in runs]
    assert ent == sorted(ent) and top == sorted(top, reverse=True)
    assert runs[0]["max_weight"] > 0.99 and runs[-1]["entropy"] > 0.99 * math.log(8)


def test_unscaled_softmax_saturates_as_d_k_grows_scaled_does_not():
    dims = [1, 4, 16, 64, 256, 1024]
    seeds = range(20)
    mean = lambda xs: sum(xs) / len(xs)
    unscaled = [mean([update_temperature(d, scale=False, seed=s)["max_weight"] for s in seeds]) for d in dims]
    scaled = [mean([update_temperature(d, scale=True, seed=s)["max_weight"] for s in seeds]) for d in dims]
    grads = [median([update_temperature(d, scale=False, seed=s)["grad_norm"] for s in seeds]) for d in dims]
    sgrads = [median([update_temperature(d, scale=True, seed=s)["grad_norm"] for s in seeds]) for d in dims]
    assert unscaled[-1] > 0.9 and unscaled[-1] > unscaled[1]
    assert grads[-1] < 0.01 * grads[0]  # the gradient through a saturated softmax vanishes
    assert min(sgrads) > 0.5 * sgrads[0]  # ... and the scale keeps it alive
    assert max(scaled) - min(scaled) < 0.2 and max(scaled) < 0.75  # stays spread out at every d_k
    std = mean([float(update_temperature(1024, scale=True, seed=s)["logits"].std()) for s in seeds])
    assert 0.7 < std < 1.3


def test_temperature_errors_and_format():
    with pytest.raises(ValueError, match="d_k must be a positive integer"):
        update_temperature(0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        update_temperature(8, 0.0)
    with pytest.raises(ValueError, match="n_keys must be >= 1"):
        update_temperature(8, n_keys=0)
    r = update_temperature(8, 2.0, n_keys=3)
    text = format_temperature(r)
    assert "d_k=8" in text and "√8·2" in text and text.count(", ") >= 2
    ax = plot_temperature(r)
    assert len(ax.patches) == 3
    matplotlib.pyplot.close("all")


def test_temperature_widget_follows_its_controls():
    root = temperature_widget(d_k=64, temperature=1.0, scale=False)
    dk, temp, scale_box = root.children[0].children
    assert root.result["d_k"] == 64 and not root.result["scale"]
    sharp = root.result["max_weight"]
    scale_box.value = True
    assert root.result["scale"] and root.result["max_weight"] < sharp
    dk.value = 1024
    temp.value = 10.0
    assert root.result["d_k"] == 1024 and root.result["temperature"] == pytest.approx(10.0)
    assert root.result["entropy"] > 0.95 * math.log(8)
    matplotlib.pyplot.close("all")


def test_playground_legend_never_covers_a_bar():
    """Lesson 03: the legend sat inside the axes, over a weight close to 1 (the tallest bar)."""
    from attnlab.viz.widgets._live import new_figure

    # what the browser test left in lesson 03's playground: every cell moved up by 1.5
    query = [2.5, 2.0, 1.5, 1.5]
    r = update_score_playground(query, [query, [0.5, 1, 1.5, 1.5], [1.5, 1.5, 2.5, 1.5], [3.5, 2.5, 1.5, 1.5]])
    assert max(float(w.max()) for w in r["weights"].values()) > 0.95
    fig = new_figure((6, 2.6))
    ax = fig.add_subplot()
    plot_score_playground(r, ax=ax)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    bars = [p.get_window_extent() for p in ax.patches if p.get_height() > 0]
    assert bars and not any(legend.overlaps(b) for b in bars)
