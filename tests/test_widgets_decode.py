"""The decoding stepper of lesson 02, driven headless."""

import time

import numpy as np
import pytest

from attnlab.widgets.decode_stepper import decode_steps, step_view


def test_steps_follow_greedy_decoding(copy_trained):
    from attnlab.evaluate import translate

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


def test_step_view_is_fast_and_consistent(copy_trained):
    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    labels, steps = decode_steps(model, splits.test[1].src, src_vocab, tgt_vocab)
    for i in range(len(steps)):
        start = time.perf_counter()
        view = step_view(labels, steps, i)
        assert time.perf_counter() - start < 0.1
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
