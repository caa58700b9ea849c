"""The decoding stepper of lesson 02, driven headless: recorded steps, views, and the UI wiring."""

import math

import numpy as np
import pytest
import torch

from attnlab.data.vocab import BOS, PAD, build_vocabs
from attnlab.models.decoding import greedy_decode
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.viz.widgets import decode_stepper
from attnlab.viz.widgets.decode_stepper import StepperState, attention_png, decode_steps, step_view

from .conftest import copy_task_splits


@pytest.fixture(scope="module")
def untrained():
    """A small random Bahdanau model on the copy-task vocabularies (no training: fast)."""
    splits = copy_task_splits(n_train=200)
    src_vocab, tgt_vocab = build_vocabs(splits)
    torch.manual_seed(0)
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention="bahdanau"))
    return model.eval(), splits, src_vocab, tgt_vocab


def test_steps_follow_greedy_decoding(copy_trained):
    from attnlab.models.decoding import translate

    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    pair = splits.test[0]
    labels, steps = decode_steps(model, pair.src, src_vocab, tgt_vocab, k=3)
    assert labels == [*pair.src, "<eos>"]
    assert steps[-1].token == "<eos>"
    hyp, _, _ = translate(model, [pair.src], src_vocab, tgt_vocab)
    assert [s.token for s in steps[:-1]] == hyp[0]
    for s in steps:
        assert s.attention.shape == (len(labels),)
        assert np.isclose(s.attention.sum(), 1, atol=1e-5)
        assert len(s.candidates) == 3 and s.candidates[0][0] == s.token
        probs = [p for _, p in s.candidates]
        assert probs == sorted(probs, reverse=True)


def test_steps_record_what_greedy_decode_does(untrained):
    """Token, attention and candidate probabilities of every step, against greedy_decode and the
    model's own step function; <pad> and <bos> are never candidates."""
    model, splits, src_vocab, tgt_vocab = untrained
    pair = splits.test[0]
    labels, steps = decode_steps(model, pair.src, src_vocab, tgt_vocab, k=4, max_len=12)
    src = torch.tensor([src_vocab.encode(list(pair.src), eos=True)])
    ref = greedy_decode(model, src, max_len=12)
    n = int(ref.lengths[0])
    assert [s.token for s in steps] == [tgt_vocab.itos[int(i)] for i in ref.tokens[0, :n]]
    for t, s in enumerate(steps):
        np.testing.assert_allclose(s.attention, ref.attn[0, t].numpy(), atol=1e-6)
    with torch.no_grad():  # the first step's candidates are the model's probabilities after <bos>
        memory = model.encode(src)
        logits, _, _ = model.step(memory, model.init_state(memory), torch.tensor([BOS]), 0)
    probs = torch.softmax(logits[0], -1)
    probs[[PAD, BOS]] = 0
    top_p, top_i = probs.topk(4)
    assert [tok for tok, _ in steps[0].candidates] == [tgt_vocab.itos[int(i)] for i in top_i]
    np.testing.assert_allclose([p for _, p in steps[0].candidates], top_p.numpy(), rtol=1e-5)
    assert all(tok not in ("<pad>", "<bos>") for s in steps for tok, _ in s.candidates)


def test_step_view_is_consistent(copy_trained):
    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    labels, steps = decode_steps(model, splits.test[1].src, src_vocab, tgt_vocab)
    for i in range(len(steps)):
        view = step_view(labels, steps, i)
        assert view["prefix"] == [s.token for s in steps[: i + 1]]
        assert view["focus"] == labels[int(np.argmax(steps[i].attention))]
        assert repr(view["token"]) in view["text"]


def test_step_view_errors(copy_trained):
    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    labels, steps = decode_steps(model, splits.test[2].src, src_vocab, tgt_vocab)
    with pytest.raises(IndexError, match="out of range"):
        step_view(labels, steps, len(steps))
    with pytest.raises(ValueError, match="no decoding steps"):
        step_view(labels, [], 0)
    with pytest.raises(ValueError, match="expected"):
        step_view(labels[:-1], steps, 0)
    with pytest.raises(ValueError, match="src_tokens is empty"):
        decode_steps(model, [], src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        decode_steps(model, ["a"], src_vocab, tgt_vocab, k=0)


def test_attention_png_draws_the_weights():
    one = attention_png(["a", "b", "<eos>"], np.array([0.7, 0.2, 0.1]))
    other = attention_png(["a", "b", "<eos>"], np.array([0.1, 0.2, 0.7]))
    assert one[:8] == b"\x89PNG\r\n\x1a\n" and other[:8] == b"\x89PNG\r\n\x1a\n"
    assert one != other
    with pytest.raises(ValueError, match=r"attention has shape \(2,\), expected \(3,\)"):
        attention_png(["a", "b", "<eos>"], np.array([0.5, 0.5]))


def test_stepper_state_select_and_move(untrained):
    model, splits, src_vocab, tgt_vocab = untrained
    pairs = [splits.test[0], splits.test[1], splits.test[0]]  # a sentence listed twice is offered once
    state = StepperState(model, pairs, src_vocab, tgt_vocab, max_len=10)
    assert state.options() == [(" ".join(splits.test[0].src), 0), (" ".join(splits.test[1].src), 1)]
    labels, steps = decode_steps(model, splits.test[0].src, src_vocab, tgt_vocab, max_len=10)
    assert state.last_step == len(steps) - 1 >= 2
    view = state.move(2)
    assert view["prefix"] == [s.token for s in steps[:3]] and view["labels"] == labels
    view = state.select(1)  # another sentence starts at its first step
    assert state.step == 0 and view["prefix"] == [step_view(*state.recorded(), 0)["token"]]
    with pytest.raises(IndexError, match=r"step 99 out of range: 0\.\."):
        state.move(99)
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        state.move(-1)
    with pytest.raises(IndexError, match=r"sentence 2 out of range: 0\.\.1"):
        state.select(2)
    with pytest.raises(ValueError, match="pairs is empty"):
        StepperState(model, [], src_vocab, tgt_vocab)


def test_stepper_draws_once_per_change(untrained, monkeypatch):
    """Lesson 02's defect: choosing a sentence after moving the slider drew twice (the slider reset
    drew, then the dropdown handler drew again). Now every change draws exactly once."""
    pytest.importorskip("ipywidgets")
    model, splits, src_vocab, tgt_vocab = untrained
    drawn = []

    def counting_png(labels, attention):
        drawn.append((tuple(labels), tuple(np.round(attention, 6))))
        return b"\x89PNG fake"

    monkeypatch.setattr(decode_stepper, "attention_png", counting_png)
    box = decode_stepper.stepper(model, splits.test[:3], src_vocab, tgt_vocab)
    choose, slider, text, _ = box.children
    assert len(drawn) == 1 and "step 0:" in text.value
    assert slider.max >= 2
    slider.value = 2
    assert len(drawn) == 2 and "step 2:" in text.value
    choose.value = 1
    assert len(drawn) == 3, "choosing a sentence must draw exactly once"
    assert slider.value == 0 and "step 0:" in text.value
    labels, steps = decode_steps(model, splits.test[1].src, src_vocab, tgt_vocab)
    assert slider.max == len(steps) - 1
    assert drawn[-1][0] == tuple(labels)
    np.testing.assert_allclose(drawn[-1][1], steps[0].attention, atol=1e-6)
    slider.value = 1
    assert len(drawn) == 4 and math.isclose(sum(drawn[-1][1]), 1, abs_tol=1e-5)
