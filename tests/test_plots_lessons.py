"""The plots the lessons moved into attnlab.viz.plots: what each draws, and the errors for mismatched input."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnlab.data.corpus import BUCKET_NAMES  # noqa: E402
from attnlab.viz.plots import (  # noqa: E402
    plot_by_gold_level,
    plot_course_by_length,
    plot_grouped_bars,
    plot_local_windows,
    plot_scaling,
    plot_seed_curves,
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_plot_scaling_draws_each_curve_the_reference_and_log_axes():
    x = [1, 2, 4, 8]
    ax = plot_scaling(x, {"a": [1, 2, 4, 8], "b": [1, 1, 1, 1]}, reference=("x", x), hline=0.5, base=2,
                      xlabel="d_k", ylabel="variance", title="t")
    assert [line.get_label() for line in ax.get_lines()[:3]] == ["a", "b", "x"]
    assert [line.get_marker() for line in ax.get_lines()[:2]] == ["o", "s"] and ax.get_lines()[2].get_linestyle() == ":"
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlabel() == "d_k" and ax.get_title() == "t"
    assert ax.get_lines()[3].get_ydata()[0] == 0.5  # the horizontal line
    ax = plot_scaling(x, {"a": x}, logy=False, ticks_at_x=True)
    assert ax.get_yscale() == "linear" and [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    with pytest.raises(ValueError, match="curve 'a' has 3 values for 4 sizes"):
        plot_scaling(x, {"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="curves is empty"):
        plot_scaling(x, {})
    with pytest.raises(ValueError, match="base must be > 1"):
        plot_scaling(x, {"a": x}, base=1)


def test_plot_local_windows_two_panels_and_shape_errors():
    S = 6
    window = torch.ones(4, S, dtype=torch.bool)
    w = torch.full((S,), 1 / S)
    fig = plot_local_windows(window, w, w * 0.5, torch.ones(S), 2.5, 2)
    assert len(fig.axes) == 2 and fig.axes[1].get_title() == "local-p at p_t = 2.5"
    assert fig.axes[0].get_title() == "local-m windows, D = 2" and len(fig.axes[1].patches) == 2 * S
    with pytest.raises(ValueError, match=r"gauss must be \(S,\) = \(6,\)"):
        plot_local_windows(window, w, w, torch.ones(5), 2.5, 2)
    with pytest.raises(ValueError, match=r"window_m must be \(T, S\)"):
        plot_local_windows(torch.ones(S), w, w, w, 2.5, 2)


def curve(final, sd=0.1):
    return {"step": [100, 200, 300, 400], "bleu": [10, 50, 90, final], "bleu_sd": [sd] * 4}


def test_plot_seed_curves_grid_and_inset_where_models_end_level():
    curves = {"fr": {"m1": curve(95), "m2": curve(96)}, "ko": {"m1": curve(20), "m2": curve(80)}}
    fig = plot_seed_curves(curves, {"bleu": ("BLEU", 100)}, dashed={"m2"}, title_suffix=" on long")
    ax_fr, ax_ko = fig.axes[0], fig.axes[1]
    assert ax_fr.get_title() == "fr: BLEU on long" and ax_fr.get_lines()[1].get_linestyle() == "--"
    assert len(ax_fr.child_axes) == 1 and not ax_ko.child_axes  # fr's models end within 10 % of the top
    with pytest.raises(ValueError, match=r"curves\['ko'\] has models \['m1'\], expected"):
        plot_seed_curves({"fr": {"m1": curve(1), "m2": curve(2)}, "ko": {"m1": curve(1)}}, {"bleu": ("BLEU", 100)})


def test_plot_grouped_bars_places_groups_side_by_side():
    ax = plot_grouped_bars({"a": torch.tensor([1.0, 2.0, 3.0]), "b": [3, 2, 1]}, divider=1.5, xlabel="x")
    xs = sorted(round(p.get_x() + p.get_width() / 2, 6) for p in ax.patches)
    assert xs == [-0.2, 0.2, 0.8, 1.2, 1.8, 2.2]
    with pytest.raises(ValueError, match=r"same length, got lengths \[2, 3\]"):
        plot_grouped_bars({"a": [1, 2], "b": [1, 2, 3]})


def test_plot_course_by_length_and_by_gold_level():
    res = {"by_bucket": {b: {"bleu": 100.0, "exact_match": 1.0} for b in BUCKET_NAMES}}
    fig = plot_course_by_length({"fr": {"model": res}}, {"fr": "English→French"})
    assert len(fig.axes) == 2 and fig.axes[0].get_yscale() == "log"
    assert min(fig.axes[0].get_lines()[0].get_ydata()) == 0.01  # a perfect bucket stays on the log axis
    with pytest.raises(ValueError, match=r"titles lacks the pairs \['ko'\]"):
        plot_course_by_length({"ko": {"model": res}}, {"fr": "x"})
    gold = np.array([1, 1, 2, 3])
    fig = plot_by_gold_level({"a": np.array([0.5, 1.0, 2.0, 2.5]), "b": np.zeros(4)}, gold)
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "a" and fig.axes[0].get_ylabel() == "predicted Φ"
    with pytest.raises(ValueError, match=r"predicted\['a'\] has shape \(3,\), gold has \(4,\)"):
        plot_by_gold_level({"a": np.zeros(3)}, gold)
