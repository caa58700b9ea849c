"""The two shared plot helpers draw what they are given and refuse mismatched labels."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnlab.viz.plots import plot_attention, plot_attention_grid, plot_metric_by_length  # noqa: E402


def test_heatmap_draws_the_matrix_and_gold_dots():
    w = torch.softmax(torch.randn(3, 4), -1)
    ax = plot_attention(w, list("abcd"), list("xyz"), gold=[(0,), (2, 3), ()], title="t")
    np.testing.assert_allclose(ax.images[0].get_array(), w.numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")
    assert len(ax.collections[0].get_offsets()) == 3  # three gold points
    plt.close("all")


def test_heatmap_label_errors():
    with pytest.raises(ValueError, match="src_tokens has 3 labels but the weights have S=4"):
        plot_attention(np.ones((2, 4)), list("abc"), list("xy"))
    with pytest.raises(ValueError, match=r"must be \(T, S\)"):
        plot_attention(np.ones((2, 2, 2)))


def test_grid_has_rows_times_cols_panels():
    fig = plot_attention_grid(np.random.rand(2, 3, 4, 5), row_labels=["enc", "dec"])
    assert len(fig.axes) == 6 and fig.axes[3].get_ylabel() == "dec"
    with pytest.raises(ValueError, match=r"\(R, C, T, S\)"):
        plot_attention_grid(np.ones((2, 4, 5)))
    plt.close("all")


def test_metric_by_length_plots_every_model():
    res = {"1-10": {"bleu": 90.0}, "11-20": {"bleu": 50.0}}
    ax = plot_metric_by_length({"a": {"by_bucket": res}, "b": {"by_bucket": res}}, "bleu", anchors={"paper": 26.75})
    assert len(ax.get_lines()) == 3 and list(ax.get_lines()[0].get_ydata()) == [90.0, 50.0]
    with pytest.raises(ValueError, match="no 'by_bucket'"):
        plot_metric_by_length({"a": {}})
    with pytest.raises(ValueError, match="empty"):
        plot_metric_by_length({})
    plt.close("all")


def test_korean_labels_are_drawn_with_a_hangul_font():
    """Without the fallback font every Hangul glyph is missing and matplotlib warns."""
    import warnings

    from attnlab.viz.plots import HANGUL_FONT, hangul_font

    assert hangul_font() is not None and HANGUL_FONT in plt.rcParams["font.family"]
    fig, ax = plt.subplots(figsize=(3, 1))
    ax.set_title("고양이 가 개 를 본다 .")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would raise
        fig.canvas.draw()
    plt.close(fig)


def test_sure_and_possible_links_are_drawn_apart():
    fig, ax = plt.subplots()
    plot_attention(np.eye(3), list("abc"), list("xyz"), ax=ax, gold=[(0,), (), (2,)], possible=[(), (0, 1), ()])
    sure, maybe = ax.collections
    assert sure.get_offsets().tolist() == [[0, 0], [2, 2]] and maybe.get_offsets().tolist() == [[0, 1], [1, 1]]
    with pytest.raises(ValueError, match="one entry per target row: got 2 for T=3"):
        plot_attention(np.eye(3), ax=ax, possible=[(), ()])
    plt.close(fig)


def test_plot_training_draws_both_losses_and_the_schedule():
    from attnlab.viz.plots import plot_training, training_curve_points

    curve = [
        {"step": s, "train_loss": 3.0 / s, "valid_loss": 3.5 / s, "lr": min(s, 40 - s) * 1e-4} for s in range(10, 40, 10)
    ]
    res = {"model": "bahdanau", "budget": "30 steps", "loss_curve": curve}
    cols = training_curve_points(res)
    assert cols["step"] == [10.0, 20.0, 30.0] and cols["valid_loss"] == [0.35, 0.175, 3.5 / 30]
    fig = plot_training(res, floor=0.05)
    loss_ax, lr_ax = fig.axes
    train_line, valid_line, floor_line = loss_ax.get_lines()
    assert list(floor_line.get_ydata()) == [0.05, 0.05]
    np.testing.assert_allclose(valid_line.get_ydata(), cols["valid_loss"])
    np.testing.assert_allclose(lr_ax.get_lines()[0].get_ydata(), cols["lr"])
    assert fig._suptitle.get_text() == "bahdanau: 30 steps"
    plt.close(fig)
    with pytest.raises(ValueError, match="results of 'old' hold no loss_curve"):
        plot_training({"model": "old"})
    with pytest.raises(ValueError, match=r"loss_curve point 1 lacks \['lr'\]"):
        training_curve_points({"loss_curve": [curve[0], {k: v for k, v in curve[1].items() if k != "lr"}]})


def test_bold_labels_log_no_font_weight_notice(caplog):
    import logging

    from attnlab.viz.plots import _HangulWeightNotice

    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "bold 고양이", weight="bold")
    with caplog.at_level(logging.INFO, logger="matplotlib.font_manager"):
        fig.canvas.draw()
    assert not [r for r in caplog.records if "Failed to find font weight" in r.getMessage()]
    plt.close(fig)
    record = logging.LogRecord("m", logging.WARNING, "", 0, "findfont: Failed to find font weight bold for X", (), None)
    assert _HangulWeightNotice().filter(record)  # other fonts' notices still pass
