"""The course diagrams: the numbers of an attention step, the labels each figure must carry, and a clean layout."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attnlab.viz.diagrams import (  # noqa: E402
    _layout_problems,
    attention_step_numbers,
    draw_attention_step,
    draw_encoder_decoder_stack,
    draw_multihead,
    draw_qkv_projections,
    draw_seq2seq_bottleneck,
    draw_transformer_block,
    draw_warmup_schedule,
    noam_rate,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def texts(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_text().strip()]


def labels(fig):
    return [t.get_text() for t in texts(fig)]


def y_of(fig, predicate):
    """Heights (data units) of the texts whose string satisfies ``predicate``, lowest first."""
    return sorted(t.get_position()[1] for t in texts(fig) if predicate(t.get_text()))


# --- attention_step_numbers -------------------------------------------------------------------


@pytest.mark.parametrize("scores", [[0.3, -1.2, 2.5, 0.0], np.array([1.0, 2.0]), torch.tensor([0.5, 0.5, -3.0])])
def test_attention_numbers_are_the_softmax(scores):
    out = attention_step_numbers(scores)
    expected = torch.softmax(torch.as_tensor(np.asarray(scores, dtype=np.float64)), -1).numpy()
    np.testing.assert_allclose(out["weights"], expected, rtol=1e-12)
    np.testing.assert_array_equal(out["scores"], np.asarray(scores, dtype=np.float64))


def test_attention_numbers_are_stable_for_large_scores():
    w = attention_step_numbers([1000.0, 1001.0])["weights"]
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w, torch.softmax(torch.tensor([0.0, 1.0], dtype=torch.float64), -1).numpy())


def test_attention_numbers_masked_scores_get_zero_weight_and_never_nan():
    w = attention_step_numbers([2.0, float("-inf"), 0.0])["weights"]
    np.testing.assert_allclose(w, torch.softmax(torch.tensor([2.0, float("-inf"), 0.0], dtype=torch.float64), -1))
    assert w[1] == 0.0
    np.testing.assert_array_equal(attention_step_numbers([float("-inf")] * 3)["weights"], np.zeros(3))


def test_attention_numbers_refuse_bad_scores():
    with pytest.raises(ValueError, match=r"scores must be a non-empty 1-D sequence \(S,\), got shape \(2, 2\)"):
        attention_step_numbers([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match=r"got shape \(0,\)"):
        attention_step_numbers([])
    with pytest.raises(ValueError, match="scores must be finite or -inf"):
        attention_step_numbers([1.0, float("nan")])
    with pytest.raises(ValueError, match="scores must be finite or -inf"):
        attention_step_numbers([1.0, float("inf")])
    with pytest.raises(TypeError, match="scores must hold real numbers"):
        attention_step_numbers(["a", "b"])


# --- lesson 01 ------------------------------------------------------------------------------


def test_bottleneck_shows_tokens_states_and_the_context_box():
    src, tgt = ("the", "cat", "sleeps", "."), ("le", "chat", "dort", ".")
    fig = draw_seq2seq_bottleneck(src, tgt)
    assert isinstance(fig, Figure)
    got = labels(fig)
    assert all(t in got for t in src + tgt + ("<bos>",))
    assert [f"$h_{{{j}}}$" for j in range(1, 5)] == [t for t in got if t.startswith("$h_")]
    assert [f"$s_{{{t}}}$" for t in range(1, 5)] == [t for t in got if t.startswith("$s_")]
    assert sum("$c$ = final states" in t for t in got) == 1
    # c enters the first decoder step and, by thin arrows, every later one
    assert sum(1 for a in fig.axes[0].texts if a.get_text() == "" and getattr(a, "arrow_patch", None)) == 3
    # the decoder is fed <bos> then the target shifted right: "." is only an output
    assert got.count(".") == 2  # source "." and target output "."


def test_bottleneck_refuses_empty_sentences_and_shows_dollars_literally():
    with pytest.raises(ValueError, match="src_tokens must hold at least one token, got 0"):
        draw_seq2seq_bottleneck([], ["x"])
    with pytest.raises(ValueError, match="tgt_tokens must hold at least one token"):
        draw_seq2seq_bottleneck(["x"], [])
    assert r"\$5" in labels(draw_seq2seq_bottleneck(["$5"], ["x"]))


# --- lesson 02 ------------------------------------------------------------------------------


def test_attention_step_shows_the_numbers_it_computes():
    scores = [1.2, 3.1, 0.4, -0.8]
    fig = draw_attention_step(scores, ["the", "cat", "sleeps", "."], query_label="q_t")
    got = labels(fig)
    weights = attention_step_numbers(scores)["weights"]
    for e, a in zip(scores, weights, strict=True):
        assert f"{e:.2f}" in got and f"{a:.2f}" in got
    assert r"$\alpha_j = \mathrm{softmax}(e)_j$" in got and r"$c_t=\sum_j \alpha_j h_j$" in got
    assert any("q_t" in t for t in got)
    bars = sorted((p for p in fig.axes[0].patches if type(p).__name__ == "Rectangle"), key=lambda p: -p.get_y())
    lengths = np.array([p.get_width() for p in bars])  # top row first
    np.testing.assert_allclose(lengths / lengths.sum(), weights)


def test_attention_step_marks_masked_scores():
    got = labels(draw_attention_step(torch.tensor([0.0, float("-inf")]), ["a", "<pad>"]))
    assert r"$-\infty$" in got and "0.00" in got and "1.00" in got


def test_attention_step_needs_one_token_per_score():
    with pytest.raises(ValueError, match="src_tokens has 3 tokens but scores has S=4 entries"):
        draw_attention_step([1.0, 2.0, 3.0, 4.0], ["a", "b", "c"])


# --- lesson 06 ------------------------------------------------------------------------------


def test_decoder_block_has_cross_attention_and_encoder_block_does_not():
    enc, dec = labels(draw_transformer_block("encoder")), labels(draw_transformer_block("decoder"))
    assert not any("cross" in t for t in enc) and not any("masked" in t for t in enc)
    assert any("cross-attention" in t for t in dec) and any("masked" in t for t in dec)
    assert any("memory" in t for t in dec)
    assert enc.count("LayerNorm") == 2 and dec.count("LayerNorm") == 3
    assert enc.count("+") == 2 and dec.count("+") == 3  # one residual sum per sublayer


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_layernorm_goes_before_the_sublayer_in_pre_ln_and_after_the_sum_in_post_ln(kind):
    def order(norm):
        fig = draw_transformer_block(kind, norm)
        norms = y_of(fig, lambda t: t == "LayerNorm")
        attention = y_of(fig, lambda t: t.endswith("attention"))
        sums = y_of(fig, lambda t: t == "+")
        return norms, attention, sums

    norms, attention, sums = order("pre")
    assert norms[0] < attention[0] < sums[0]  # x -> LN -> attention -> +
    norms, attention, sums = order("post")
    assert attention[0] < sums[0] < norms[0]  # x -> attention -> + -> LN


def test_block_refuses_unknown_kind_and_norm():
    with pytest.raises(ValueError, match="kind must be one of 'encoder', 'decoder', got 'decode'"):
        draw_transformer_block("decode")
    with pytest.raises(ValueError, match="norm must be one of 'pre', 'post', got 'middle'"):
        draw_transformer_block("encoder", "middle")
    with pytest.raises(ValueError, match="norm must be one of 'pre', 'post', got True"):
        draw_encoder_decoder_stack(2, norm=True)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_stack_draws_every_layer_up_to_three(n):
    got = labels(draw_encoder_decoder_stack(n))
    for side in ("encoder", "decoder"):
        assert [t for t in got if t.startswith(f"{side} layer")] == [f"{side} layer {k}" for k in range(1, n + 1)]
    assert got.count(rf"$\times{n}$") == 2
    assert "memory" in got and "linear" in got and "softmax" in got


def test_deep_stack_shows_first_and_last_layer_with_an_ellipsis():
    fig = draw_encoder_decoder_stack(6)
    got = labels(fig)
    assert [t for t in got if t.startswith("decoder layer")] == ["decoder layer 1", "decoder layer 6"]
    assert got.count(r"$\vdots$") == 2 and got.count(r"$\times6$") == 2
    # the memory reaches each drawn decoder layer: one blue arrow into each
    arrows = [p for p in fig.axes[0].patches if type(p).__name__ == "FancyArrowPatch"]
    blue = [p for p in arrows if matplotlib.colors.to_hex(p.get_edgecolor()) == "#4a78a8"]
    assert len(blue) == 2


def test_final_layernorm_only_in_pre_ln_stacks():
    assert labels(draw_encoder_decoder_stack(2, norm="pre")).count("final LayerNorm") == 2
    assert "final LayerNorm" not in labels(draw_encoder_decoder_stack(2, norm="post"))


def test_stack_validates_n_layers():
    with pytest.raises(ValueError, match="n_layers must be >= 1, got 0"):
        draw_encoder_decoder_stack(0)
    with pytest.raises(TypeError, match="n_layers must be an int"):
        draw_encoder_decoder_stack("2")


# --- layout ---------------------------------------------------------------------------------

ALL_DIAGRAMS = {
    "bottleneck": lambda: draw_seq2seq_bottleneck(),
    "bottleneck_long": lambda: draw_seq2seq_bottleneck("a much longer English sentence .".split(), ["x"]),
    "attention_step": lambda: draw_attention_step([1.2, 3.1, 0.4, -0.8], ["the", "cat", "sleeps", "."]),
    "attention_step_masked": lambda: draw_attention_step([2.0, float("-inf")], ["internationalisation", "<pad>"]),
    "encoder_pre": lambda: draw_transformer_block("encoder", "pre"),
    "encoder_post": lambda: draw_transformer_block("encoder", "post"),
    "decoder_pre": lambda: draw_transformer_block("decoder", "pre"),
    "decoder_post": lambda: draw_transformer_block("decoder", "post"),
    "stack_2": lambda: draw_encoder_decoder_stack(2),
    "stack_6_post": lambda: draw_encoder_decoder_stack(6, norm="post"),
    "qkv": lambda: draw_qkv_projections(),
    "multihead_1": lambda: draw_multihead(1),
    "multihead_4": lambda: draw_multihead(4),
    "multihead_8": lambda: draw_multihead(8),
}


@pytest.mark.parametrize("name", ALL_DIAGRAMS)
def test_every_label_stays_inside_its_box_and_the_figure(name):
    fig = ALL_DIAGRAMS[name]()
    assert _layout_problems(fig) == []


@pytest.mark.parametrize("name", [n for n in ALL_DIAGRAMS if "long" not in n])
def test_lesson_figures_are_modest(name):
    w, h = ALL_DIAGRAMS[name]().get_size_inches()
    assert w <= 8 and h <= 7  # readable at dpi 80 without scrolling; long sentences may widen a figure


def test_layout_check_catches_overflow_and_collisions():
    fig = draw_transformer_block("encoder")
    ax = fig.axes[0]
    label = next(t for t in ax.texts if t.get_text() == "feed-forward")
    label.set_fontsize(30)  # now wider than its box
    problems = _layout_problems(fig)
    assert any("'feed-forward' overflows its box" in p for p in problems)
    ax.text(-1.0, 0.5, "far out", fontsize=9)
    assert any("'far out' leaves the figure" in p for p in _layout_problems(fig))
    ax.text(*next(t for t in ax.texts if t.get_text() == "output").get_position(), "clash", fontsize=9)
    assert any("overlaps" in p and "clash" in p for p in _layout_problems(fig))


def test_diagrams_draw_on_a_given_axes():
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 7))
    assert draw_transformer_block("encoder", ax=a) is fig
    assert draw_encoder_decoder_stack(1, ax=b) is fig
    assert len(fig.axes) == 2 and not a.axison


# --- lesson 02: the encoder-decoder with attention; lesson 03: the step order ------------------------


def test_attention_encoder_decoder_feeds_every_state_into_the_context_by_weight():
    from attnlab.viz.diagrams import draw_attention_encoder_decoder

    src, tgt = ("hello", "world"), ("bonjour", "le", "monde")
    fig = draw_attention_encoder_decoder(src, tgt, weights=[0.2, 0.8], step=1)
    got = labels(fig)
    assert all(t in got for t in src + tgt + ("<bos>",))
    assert [t for t in got if t.startswith("$h_")] == ["$h_{1}$", "$h_{2}$"]
    assert sum(t.startswith("$c_{2}") for t in got) == 1  # the context of the highlighted step (1-based)
    widths = [p.get_linewidth() for p in fig.axes[0].patches if p.get_gid() == "attention-weight"]
    assert len(widths) == 2 and widths[1] > widths[0]  # one arrow per encoder state, wider for a larger weight
    assert _layout_problems(fig) == []


def test_attention_encoder_decoder_refuses_bad_weights_and_steps():
    from attnlab.viz.diagrams import draw_attention_encoder_decoder

    with pytest.raises(ValueError, match=r"weights must have one entry per source token \(S=2\), got shape \(3,\)"):
        draw_attention_encoder_decoder(["a", "b"], ["x"], weights=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="weights must be non-negative and sum to 1"):
        draw_attention_encoder_decoder(["a", "b"], ["x"], weights=[0.2, 0.3])
    with pytest.raises(ValueError, match=r"step must be an int in \[0, 0\], got 3"):
        draw_attention_encoder_decoder(["a", "b"], ["x"], step=3)
    with pytest.raises(ValueError, match="src_tokens must hold at least one token"):
        draw_attention_encoder_decoder([], ["x"])


def test_step_order_puts_attention_before_the_rnn_step_for_bahdanau_and_after_for_luong():
    from attnlab.viz.diagrams import STEP_ORDER, draw_step_order

    fig = draw_step_order()
    got = labels(fig)
    for _, stages in STEP_ORDER.values():
        assert all(stage in got for stage in stages)
    bahdanau, luong = (stages for _, stages in STEP_ORDER.values())
    first = {name: next(i for i, s in enumerate(st) if "score" in s) for name, st in (("b", bahdanau), ("l", luong))}
    step = {name: next(i for i, s in enumerate(st) if "step" in s) for name, st in (("b", bahdanau), ("l", luong))}
    assert first["b"] < step["b"] and step["l"] < first["l"]  # attend then step; step then attend
    assert "input feeding (next step)" in got
    assert _layout_problems(fig) == []
# --- lessons 04-06 --------------------------------------------------------------------------


def test_qkv_diagram_shows_the_three_projections_and_the_softmax():
    text = " ".join(t.get_text() for t in texts(draw_qkv_projections()))
    for part in ("X W_Q", "X W_K", "X W_V", "softmax", "sqrt{d_k}", "\\alpha V"):
        assert part in text, part


@pytest.mark.parametrize(("h", "shown", "hidden"), [(1, ["head 0"], ["head 1"]), (4, ["head 0", "head 3"], ["..."]),
                                                   (8, ["head 0", "head 1", "head 7", "..."], ["head 2", "head 6"])])
def test_multihead_draws_up_to_four_heads_then_an_ellipsis(h, shown, hidden):
    text = " ".join(t.get_text() for t in texts(draw_multihead(h)))
    assert all(s in text for s in shown) and not any(s in text for s in hidden), text
    assert f"H = {h}" in text and "split" in text and "concat" in text


def test_multihead_refuses_a_bad_head_count():
    with pytest.raises(ValueError, match="num_heads"):
        draw_multihead(0)


@pytest.mark.numeric
def test_noam_rate_warms_up_linearly_then_decays_as_one_over_sqrt_step():
    steps = np.arange(1, 20_001)
    rate = noam_rate(steps, 512, 4000)
    assert int(steps[rate.argmax()]) == 4000
    np.testing.assert_allclose(rate[3999], 512**-0.5 * 4000**-0.5, rtol=1e-12)
    np.testing.assert_allclose(rate[:4000] / steps[:4000], rate[0], rtol=1e-12)  # linear warm-up
    np.testing.assert_allclose(rate[4000:] * np.sqrt(steps[4000:]), 512**-0.5, rtol=1e-12)  # then 1/sqrt(step)
    with pytest.raises(ValueError, match="steps start at 1"):
        noam_rate([0, 1])


def test_warmup_schedule_has_a_course_panel_only_with_a_curve():
    assert len(draw_warmup_schedule(steps=1000).axes) == 1
    curve = [{"step": 75 * i, "lr": 1e-3 * min(i, 25 - i)} for i in range(1, 21)]
    fig = draw_warmup_schedule(curve, steps=1000)
    assert len(fig.axes) == 2 and "peak at step 900" in fig.axes[1].get_title()
