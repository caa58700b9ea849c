"""Named experiments: every preset builds for both profiles; run/save/load plumbing end to end."""

import json

import pytest
import torch

from attnlab import experiments
from attnlab.checkpoint import CheckpointError
from attnlab.data import build_vocabs, collate, encode_pairs
from attnlab.profiles import get_profile

from .conftest import copy_task_splits


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_every_preset_builds_and_runs_forward(name, profile):
    splits = copy_task_splits(n_train=50)
    src_vocab, tgt_vocab = build_vocabs(splits)
    exp = experiments.preset(name, profile)
    assert exp.seconds > 0 and exp.bs > 0 and exp.lr > 0
    model = experiments.build_model(exp, src_vocab, tgt_vocab)
    src, tgt_in, tgt_out = collate(encode_pairs(splits.test[:3], src_vocab, tgt_vocab))
    assert model(src, tgt_in).shape == (*tgt_out.shape, len(tgt_vocab))


def test_cpu_profile_is_the_smaller_one():
    for name in experiments.EXPERIMENTS:
        cpu, gpu = experiments.preset(name, "cpu"), experiments.preset(name, "gpu")
        width = lambda e: e.model.get("hid_dim", e.model.get("d_model"))  # noqa: E731
        assert width(cpu) <= width(gpu) and cpu.seconds <= gpu.seconds


def test_profile_override(monkeypatch):
    monkeypatch.setenv("ATTNLAB_PROFILE", "gpu")
    assert get_profile() == "gpu"
    monkeypatch.setenv("ATTNLAB_PROFILE", "tpu")
    with pytest.raises(ValueError, match="ATTNLAB_PROFILE='tpu'"):
        get_profile()


def test_unknown_experiment():
    with pytest.raises(KeyError, match="unknown experiment 'transformer_xl'"):
        experiments.preset("transformer_xl")


def test_run_saves_a_live_run_and_load_trained_prefers_it(tmp_data_dir):
    splits = copy_task_splits(n_train=500)
    data = (splits, *build_vocabs(splits))
    model, res = experiments.run("bahdanau", seconds=2, progress=False, data=data)
    ckpt, results = experiments.paths("bahdanau", shipped=False)
    assert ckpt.with_suffix(".safetensors").exists() and results.exists()
    assert json.loads(results.read_text())["bleu"] == res["bleu"]
    assert res["produced_by"] == "live run" and res["profile"] == "cpu"
    assert {"params", "train_seconds", "tokens_per_second", "by_bucket", "align_content"} <= res.keys()
    loaded, meta, source = experiments.load_trained("bahdanau")
    assert source == "live run"
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a.cpu(), b)
    with pytest.raises(CheckpointError, match="no checkpoint of 'rnn_noattn'"):
        experiments.load_trained("rnn_noattn")


def test_train_threads(monkeypatch):
    from attnlab.profiles import num_threads, train_threads

    monkeypatch.delenv("ATTNLAB_THREADS", raising=False)
    assert train_threads("cpu") == 1
    monkeypatch.setenv("ATTNLAB_THREADS", "2")
    assert train_threads("cpu") == 2
    monkeypatch.setenv("ATTNLAB_THREADS", "0")
    with pytest.raises(ValueError, match="positive integer"):
        train_threads("cpu")
    before = torch.get_num_threads()
    with num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_cpu_baseline_is_not_narrower_than_the_attention_models():
    # Lesson 02 argues that attention wins against a baseline with at least as much capacity.
    base = experiments.preset("rnn_noattn", "cpu")
    for name in ("bahdanau", "luong_dot"):
        exp = experiments.preset(name, "cpu")
        assert base.model["hid_dim"] >= exp.model["hid_dim"]
        for field in ("seconds", "bs", "lr", "label_smoothing"):
            assert getattr(base, field) == getattr(exp, field), field
