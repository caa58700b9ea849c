"""Lesson 11's sampling explorer, driven headless: the pure update, its text, and the UI wiring."""

import pytest
import torch

from attnlab.data.vocab import build_vocabs
from attnlab.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from attnlab.models.decoding import greedy_decode
from attnlab.viz.widgets.sampling_explorer import describe_sampling, plot_sampling, sampling_widget, update_sampling

from .conftest import copy_task_splits


@pytest.fixture(scope="module")
def untrained():
    splits = copy_task_splits(n_train=200)
    src_vocab, tgt_vocab = build_vocabs(splits)
    torch.manual_seed(0)
    model = DecoderOnly(DecoderOnlyConfig(len(src_vocab), len(tgt_vocab), d_model=16, num_heads=2, num_layers=2))
    return model.eval(), splits, src_vocab, tgt_vocab


def test_update_is_renormalised_and_reproducible(untrained):
    model, splits, sv, tv = untrained
    pair = splits.test[0]
    a = update_sampling(model, pair.src, pair.tgt[:1], sv, tv, temperature=1.5, top_p=0.5, seed=3)
    assert a == update_sampling(model, pair.src, pair.tgt[:1], sv, tv, temperature=1.5, top_p=0.5, seed=3)
    assert 1 <= a["kept"] < len(tv)
    assert abs(sum(a["probs"]) - 1) < 1e-5 or a["kept"] > len(a["tokens"])
    assert a["raw"] == sorted(a["raw"], reverse=True)
    assert "<pad>" not in a["tokens"][: a["kept"]] and "<bos>" not in a["tokens"][: a["kept"]]


def test_top_k_one_continues_greedily(untrained):
    model, splits, sv, tv = untrained
    pair = splits.test[1]
    r = update_sampling(model, pair.src, [], sv, tv, temperature=2.0, top_k=1, max_len=12)
    assert r["kept"] == 1 and r["probs"][0] == 1.0
    src = torch.tensor([sv.encode(list(pair.src), eos=True)])
    greedy = tv.decode(greedy_decode(model, src, max_len=12).tokens[0].tolist(), strip=True)
    assert r["continuation"] == greedy[: len(r["continuation"])]


def test_describe_and_plot(untrained):
    model, splits, sv, tv = untrained
    r = update_sampling(model, splits.test[0].src, splits.test[0].tgt[:2], sv, tv, top_k=3)
    text = describe_sampling(r)
    assert "top-k 3" in text and "3 token(s) can be drawn" in text and "|" in text
    fig = plot_sampling(r)
    assert len(fig.axes[0].patches) == 2 * len(r["tokens"])


def test_bad_knobs_are_refused(untrained):
    model, splits, sv, tv = untrained
    with pytest.raises(ValueError, match="temperature"):
        update_sampling(model, splits.test[0].src, [], sv, tv, temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        update_sampling(model, splits.test[0].src, [], sv, tv, top_p=1.2)


def test_widget_moves(untrained):
    model, splits, sv, tv = untrained
    w = sampling_widget(model, splits.test[:3], sv, tv)
    choice, (prefix, knobs) = w.children[0], w.children[1].children  # the sentence on a row of its own
    controls = {c.description: c for c in (choice, prefix, *knobs.children)}
    assert set(controls) == {"sentence", "prefix", "temperature", "top-k", "top-p"}
    before = w.result["prefix"]
    controls["prefix"].value += 1
    assert len(w.result["prefix"]) == len(before) + 1
    controls["top-k"].value = 1
    assert w.result["kept"] == 1
    controls["top-p"].value = 0.5
    controls["temperature"].value = 3.0
    assert w.result["top_p"] == 0.5 and w.result["temperature"] == pytest.approx(3.0)
