"""Pointer networks (attnlab.models.pointer_net) and the sorting data (attnlab.data.sorting)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnlab.core.scores import AttentionScore
from attnlab.data.sorting import exact_order, pointer_batch, sorting_batches, sorting_examples, sorting_pairs
from attnlab.models.pointer_net import PointerNet, PointerNetConfig
from attnlab.training.pointer_experiments import evaluate_pointer, held_out_lists, run, run_name, train_pointer
from attnlab.viz.pointers import closing_gold, plot_closing_offsets, plot_exact_by_length


def tiny(**kw):
    torch.manual_seed(0)
    return PointerNet(PointerNetConfig(hid_dim=8, attn_dim=6, **kw)).eval()


def test_sorting_examples():
    ex = sorting_examples(50, lengths=(3, 6), seed=1)
    assert ex == sorting_examples(50, lengths=(3, 6), seed=1) and ex != sorting_examples(50, lengths=(3, 6), seed=2)
    for values, order in ex:
        assert 3 <= len(values) <= 6 and len(set(values)) == len(values)
        assert [values[i] for i in order] == sorted(values)
    pairs = sorting_pairs([((30, 4, 17), (1, 2, 0))])
    assert pairs[0].src == ("30", "4", "17") and pairs[0].tgt == ("4", "17", "30")
    x, order = pointer_batch([((99, 0), (1, 0)), ((5, 6), (0, 1))])
    assert x.shape == (2, 2, 1) and x[0, 0, 0] == 1.0 and x[0, 1, 0] == 0.0 and order.tolist() == [[1, 0], [0, 1]]
    x, order = next(sorting_batches(4, lengths=(7, 7)))
    assert x.shape == (4, 7, 1) and order.shape == (4, 7)


def test_sorting_bad_input():
    with pytest.raises(
        ValueError, match="lengths must be \\(shortest, longest\\) with shortest <= longest, got \\(6, 3\\)"
    ):
        sorting_examples(2, lengths=(6, 3))
    with pytest.raises(ValueError, match="needs n_values >= 12, got n_values=10"):
        sorting_examples(2, lengths=(5, 12), n_values=10)
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        sorting_examples(-1)
    with pytest.raises(ValueError, match="one length, got lengths \\[2, 3\\]"):
        pointer_batch([((1, 2), (0, 1)), ((3, 1, 2), (1, 2, 0))])
    with pytest.raises(ValueError, match="outputs and answers must be as many, got 1 and 2"):
        exact_order([[1]], [[1], [2]])
    assert exact_order([[1, 2], [2, 1]], [[1, 2], [1, 2]]) == 0.5


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="hid_dim must be >= 1, got 0"):
        PointerNetConfig(hid_dim=0)
    with pytest.raises(TypeError, match="mask_pointed must be a bool, got int"):
        PointerNetConfig(mask_pointed=1)
    with pytest.raises(TypeError, match="config must be a PointerNetConfig, got dict"):
        PointerNet({})
    m = tiny()
    with pytest.raises(ValueError, match=r"x must be \(B, N, D\), got shape \(2, 5\)"):
        m.decode(torch.rand(2, 5))
    with pytest.raises(ValueError, match="x must have input_dim=1 features \\(dim 2\\), got shape \\(2, 5, 3\\)"):
        m.decode(torch.rand(2, 5, 3))
    with pytest.raises(ValueError, match="targets holds position 5, outside the input \\[0, 5\\)"):
        m(torch.rand(2, 5, 1), torch.tensor([[0, 1, 2, 3, 5], [0, 1, 2, 3, 4]]))
    with pytest.raises(TypeError, match="targets must hold integer positions, got dtype torch.float32"):
        m(torch.rand(2, 5, 1), torch.zeros(2, 5))
    with pytest.raises(ValueError, match="steps must be <= N=5 when positions cannot repeat, got 6"):
        m.decode(torch.rand(2, 5, 1), steps=6)


@pytest.mark.numeric
def test_score_is_the_additive_score_of_the_course():
    """``v^T tanh(W1 e_j + W2 d)`` equals the course's ``concat`` score with the same weights (and no bias)."""
    m = tiny()
    ref = AttentionScore("concat", 8, 8, attn_dim=6)
    with torch.no_grad():
        ref.W_q.weight.copy_(m.W2.weight)
        ref.W_h.weight.copy_(m.W1.weight)
        ref.W_h.bias.zero_()
        ref.v.weight.copy_(m.v.weight)
    e, d = torch.randn(3, 5, 8), torch.randn(3, 8)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    torch.testing.assert_close(m.scores(m.W1(e), d, allowed), ref(d, e))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.booleans(), st.integers(0, 100))
def test_decoding_invariants(B, N, mask, seed):
    m = tiny(mask_pointed=mask)
    x = torch.rand(B, N, 1, generator=torch.Generator().manual_seed(seed))
    pointers, attn = m.decode(x)
    assert pointers.shape == (B, N) and attn.shape == (B, N, N)
    assert not torch.isnan(attn).any()
    torch.testing.assert_close(attn.sum(-1), torch.ones(B, N))
    if mask:  # a permutation; a position once pointed at gets exactly zero weight afterwards
        assert (pointers.sort(-1).values == torch.arange(N)).all()
        for b in range(B):
            for t in range(1, N):
                assert (attn[b, t, pointers[b, :t]] == 0).all()
    # the pointers are the argmax of the attention: the attention is the output
    assert (attn.argmax(-1) == pointers).all()


def test_teacher_forcing_matches_greedy_when_fed_its_own_pointers():
    m = tiny()
    x = torch.rand(3, 6, 1)
    pointers, attn = m.decode(x)
    logits = m(x, pointers)
    torch.testing.assert_close(torch.softmax(logits, -1), attn)
    assert torch.isinf(logits).sum() == 3 * (6 * 5 // 2)  # step t masks the t positions already pointed at


def test_a_short_training_learns_to_sort_short_lists():
    model, info = train_pointer(120, 0, config=PointerNetConfig(hid_dim=32, attn_dim=32), bs=64)
    assert info["steps"] == 120 and info["loss_curve"][-1]["loss"] < info["loss_curve"][0]["loss"]
    ex = {5: sorting_examples(100, lengths=(5, 5), seed=3)}
    res = evaluate_pointer(model, ex)
    assert res["by_length"]["5"] > 0.3 and res["test_length_2x"] == 5  # chance is 1 / 5! = 0.008


def test_run_names():
    assert run_name("pointer_sort") == "pointer_sort" and run_name("seq2seq_sort", 1) == "seq2seq_sort_seed1"
    with pytest.raises(KeyError, match="unknown sorting run 'sort'"):
        run_name("sort")


def test_lesson10_pictures():
    ax = plot_exact_by_length({"a": {"5": 1.0, "20": 0.5}, "b": {5: 0.9, 20: 0.0}}, 10)
    assert len(ax.lines) == 3 and list(ax.lines[0].get_xdata()) == [5, 20]
    ax = plot_closing_offsets({"0": 6, "1": 2, "-9": 2})
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == 0.2 and heights[5] == 0.6 and heights[6] == 0.2 and sum(heights) == 1.0
    plt.close("all")
    assert closing_gold(("(S", "(NP", "XX", ")NP", "XX", ")S")) == [[], [], [], [0], [], [1]]
    with pytest.raises(ValueError, match="curves is empty"):
        plot_exact_by_length({}, 10)
    with pytest.raises(ValueError, match="no closing bracket"):
        plot_closing_offsets({})


@pytest.mark.numeric
def test_the_shipped_pointer_network_loads_instead_of_training(monkeypatch):
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    model, res = run("pointer_sort")
    assert "not trained" in res["source"] and res["exact_order_2x"] >= 0.9 and res["test_length_2x"] == 20
    lists = {20: held_out_lists(50)[20]}
    assert evaluate_pointer(model, lists)["by_length"]["20"] >= 0.9
