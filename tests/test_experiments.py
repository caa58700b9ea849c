"""Named experiments: every preset builds for both profiles; run/save/load plumbing end to end."""

import dataclasses
import json
import shutil

import pytest
import torch

from attnlab.core.profiles import get_profile
from attnlab.data.corpus import CORPUS_VERSION
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.vocab import build_vocabs
from attnlab.training import experiments, results
from attnlab.training import families as models
from attnlab.training.checkpoint import CheckpointError

from .conftest import copy_task_splits


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_every_preset_builds_and_runs_forward(name, profile):
    splits = copy_task_splits(n_train=50)
    src_vocab, tgt_vocab = build_vocabs(splits)
    exp = experiments.preset(name, profile)
    model = experiments.build_model(exp, src_vocab, tgt_vocab)
    assert models.family_of(model).name == exp.family
    assert (model.config.src_vocab_size, model.config.tgt_vocab_size) == (len(src_vocab), len(tgt_vocab))
    src, tgt_in, tgt_out = collate(encode_pairs(splits.test[:3], src_vocab, tgt_vocab))
    # eval mode: a supervised-attention preset needs gold links to train, not to score
    assert model.eval()(src, tgt_in).shape == (*tgt_out.shape, len(tgt_vocab))


def test_cpu_profile_is_the_smaller_one():
    for name in experiments.EXPERIMENTS:
        cpu, gpu = experiments.preset(name, "cpu"), experiments.preset(name, "gpu")
        width = lambda e: e.model.get("hid_dim", e.model.get("d_model"))  # noqa: E731
        assert width(cpu) <= width(gpu) and cpu.steps <= gpu.steps


def test_profile_override(monkeypatch):
    monkeypatch.setenv("ATTNLAB_PROFILE", "gpu")
    assert get_profile() == "gpu"
    monkeypatch.setenv("ATTNLAB_PROFILE", "tpu")
    with pytest.raises(ValueError, match="ATTNLAB_PROFILE='tpu'"):
        get_profile()


def test_unknown_experiment():
    with pytest.raises(KeyError, match="unknown experiment 'transformer_xl'"):
        experiments.preset("transformer_xl")
    with pytest.raises(KeyError, match="unknown experiment 'transformer_xl'"):
        experiments.main(["bahdanau", "transformer_xl"])  # refused before any corpus is generated


def test_run_saves_a_live_run_and_load_trained_prefers_it(tmp_data_dir):
    splits = copy_task_splits(n_train=500)
    data = (splits, *build_vocabs(splits))
    model, res = experiments.run("bahdanau", steps=20, curve_every=10, progress=False, data=data)
    ckpt, path = results.checkpoint_path("bahdanau", shipped=False), results.results_path("bahdanau", shipped=False)
    assert ckpt.with_suffix(".safetensors").exists() and path.parent == tmp_data_dir / "runs" / "results"
    assert json.loads(path.read_text()) == res
    assert json.loads(ckpt.with_suffix(".json").read_text())["metrics"] == res  # the same dict, written once each
    assert res["model"] == "bahdanau" and res["pair"] == "fr" and res["corpus_version"] == CORPUS_VERSION
    assert res["produced_by"] == "live run" and res["profile"] == "cpu" and res["torch_threads"] == 1
    assert res["train_steps"] == 20 and res["budget"] == "20 steps" and res["seed"] == 0
    # the learning curve: the snapshot at step 10 scored on the longest bucket, then the final model
    assert [c["step"] for c in res["learning_curve"]] == [10, 20]
    assert {c["bucket"] for c in res["learning_curve"]} == {"1-10"}  # the copy task's longest bucket
    assert res["learning_curve"][-1]["bleu"] == res["by_bucket"]["1-10"]["bleu"]
    assert [p["step"] for p in res["loss_curve"]] == [5, 10, 15, 20]  # train.curve_every_for(20) == 5
    assert {"params", "train_seconds", "tokens_per_second", "by_bucket", "align_content", "load_average"} <= res.keys()
    loaded, meta, source = experiments.load_trained("bahdanau")
    assert source == "live run" and meta["pair"] == "fr"
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a.cpu(), b)
    with pytest.raises(CheckpointError, match="no checkpoint of 'rnn_noattn'"):
        experiments.load_trained("rnn_noattn")

    # The shipped copy is the fallback, and the first choice with prefer_live=False.
    shipped = results.checkpoint_path("bahdanau", shipped=True)
    shipped.parent.mkdir(parents=True)
    for suffix in (".safetensors", ".json"):
        shutil.copy(ckpt.with_suffix(suffix), shipped.with_suffix(suffix))
    assert experiments.load_trained("bahdanau", prefer_live=False)[2] == "shipped"
    # A damaged live run is reported, never skipped in favour of the shipped model.
    ckpt.with_suffix(".safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="damaged or was replaced"):
        experiments.load_trained("bahdanau")
    ckpt.with_suffix(".safetensors").unlink()
    ckpt.with_suffix(".json").unlink()
    assert experiments.load_trained("bahdanau")[2] == "shipped"


def test_korean_pair_from_the_command_line(tmp_data_dir, monkeypatch, capsys):
    asked = []

    def fake_load_splits(**kwargs):  # the real one generates the Korean corpus: too slow for a unit test
        asked.append(kwargs)
        return copy_task_splits(n_train=300)

    monkeypatch.setattr(experiments, "load_splits", fake_load_splits)
    monkeypatch.setattr(experiments, "corpus_version", lambda pair="fr": f"test-{pair}")
    assert experiments.main(["rnn_noattn", "--pair", "ko", "--seconds", "1"]) == 0
    assert asked == [{"target": "ko"}]
    assert json.loads(capsys.readouterr().out)["model"] == "rnn_noattn_ko"
    res = results.read_result("rnn_noattn_ko", shipped=False)
    assert (res["model"], res["experiment"], res["pair"], res["corpus_version"]) == (
        "rnn_noattn_ko",
        "rnn_noattn",
        "ko",
        "test-ko",
    )
    assert not results.results_path("rnn_noattn", shipped=False).exists()
    _, meta, source = experiments.load_trained("rnn_noattn_ko")
    assert (meta["pair"], meta["corpus_version"], source) == ("ko", "test-ko", "live run")
    # A checkpoint of an older corpus version is not used.
    monkeypatch.setattr(experiments, "corpus_version", lambda pair="fr": f"test-{pair}-2")
    with pytest.raises(CheckpointError, match="live run: trained on corpus 'test-ko', now 'test-ko-2'"):
        experiments.load_trained("rnn_noattn_ko")


def test_unknown_pair():
    with pytest.raises(ValueError, match=r"pair must be one of \('fr', 'ko'\), got 'de'"):
        experiments.run("bahdanau", pair="de")
    with pytest.raises(SystemExit):
        experiments.main(["bahdanau", "--pair", "de"])
    assert [experiments.result_name("luong_dot", p) for p in experiments.PAIRS] == ["luong_dot", "luong_dot_ko"]
    with pytest.raises(ValueError, match=r"pair must be one of \('fr', 'ko'\), got 'en'"):
        experiments.result_name("luong_dot", "en")


def test_a_korean_run_end_to_end(tmp_data_dir):
    from attnlab.data.corpus import corpus_version, make_splits

    splits = make_splits(target="ko", n_train=400, n_valid=20, test_per_bucket=10)
    _, res = experiments.run("bahdanau", pair="ko", seconds=1, progress=False, data=(splits, *build_vocabs(splits)))
    assert (res["model"], res["pair"], res["corpus_version"]) == ("bahdanau_ko", "ko", corpus_version("ko"))
    assert corpus_version("ko") != CORPUS_VERSION
    assert isinstance(res["aer"], float) and isinstance(res["chrf"], float)  # Korean gold links: AER is defined
    assert results.read_result("bahdanau_ko", shipped=False) == res


def test_train_threads(monkeypatch):
    from attnlab.core.profiles import num_threads, train_threads

    monkeypatch.delenv("ATTNLAB_THREADS", raising=False)
    assert train_threads("cpu") == 1
    monkeypatch.setenv("ATTNLAB_THREADS", "2")
    assert train_threads("cpu") == 2
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv("ATTNLAB_THREADS", bad)
        with pytest.raises(ValueError, match=f"ATTNLAB_THREADS='{bad}' must be a positive integer"):
            train_threads("cpu")
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        with num_threads(0):
            pass
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
        for field in ("steps", "seconds", "bs", "lr", "label_smoothing"):
            assert getattr(base, field) == getattr(exp, field), field


def test_budgets_steps_or_seconds_never_both():
    exp = experiments.preset("bahdanau", "cpu")
    assert exp.steps == 1000 and exp.seconds is None and exp.budget == "1,000 steps"
    assert exp.with_budget(seconds=30).budget == "30 s" and exp.with_budget(seconds=30).steps is None
    assert exp.with_budget(steps=7).steps == 7 and exp.with_budget() is exp
    with pytest.raises(ValueError, match="give at most one of steps and seconds"):
        exp.with_budget(steps=5, seconds=5)
    with pytest.raises(ValueError, match="give exactly one of steps and seconds"):
        experiments.Experiment(name="x", family="rnn", steps=None)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        experiments.Experiment(name="x", family="rnn", steps=0)
    with pytest.raises(SystemExit):
        experiments.main(["bahdanau", "--steps", "5", "--seconds", "5"])


def test_use_shipped_loads_the_shipped_run_instead_of_training(tmp_data_dir, monkeypatch, capsys):
    splits = copy_task_splits(n_train=300)
    data = (splits, *build_vocabs(splits))
    monkeypatch.setattr(experiments, "preset", lambda name, profile=None: dataclasses.replace(
        experiments.EXPERIMENTS[name]["cpu"], steps=6))
    _, shipped = experiments.run("bahdanau", progress=False, ship=True, data=data)
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    model, res = experiments.run("bahdanau", progress=False, data=data)
    assert "loaded the shipped 'bahdanau' (6 steps), not trained" in capsys.readouterr().out
    assert res["source"].startswith("shipped") and {k: v for k, v in res.items() if k != "source"} == shipped
    assert not results.results_path("bahdanau", shipped=False).exists()  # nothing written as a live run
    # Any other budget or seed is trained as asked, since no shipped file holds it.
    _, other = experiments.run("bahdanau", steps=3, progress=False, save=False, data=data)
    assert other["train_steps"] == 3 and "source" not in other
    for bad in ("yes", "2", "true"):
        monkeypatch.setenv("ATTNLAB_USE_SHIPPED", bad)
        with pytest.raises(ValueError, match=f"ATTNLAB_USE_SHIPPED='{bad}' must be 1"):
            experiments.run("bahdanau", progress=False, data=data)


def test_use_course_threads(monkeypatch):
    from attnlab.core.profiles import use_course_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("ATTNLAB_THREADS", "2")
        assert use_course_threads("cpu") == 2 and torch.get_num_threads() == 2
        monkeypatch.delenv("ATTNLAB_THREADS")
        assert use_course_threads("cpu") == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


LESSON07_SWITCHES = {
    "coverage",
    "prev_conv",
    "monotonic",
    "hard",
    "temperature",
    "temperature_final",
    "coverage_loss",
    "align_loss",
    "fertility",
    "entropy_bonus",
    "reinforce_mix",
    "fertility_floor",
    "coverage_loss_from",
    "undertranslation_loss",
    "reinforce_baseline",  # lesson 08
}


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_every_lesson07_preset_is_the_bahdanau_preset_with_lesson07_switches_only(profile):
    """Lesson 07 compares variants of one model: each preset trains exactly as ``bahdanau`` does,
    and its model differs from it only in the switches of the lesson (each on, none copied)."""
    from attnlab.models.rnn import RNNConfig

    base = experiments.preset("bahdanau", profile)
    names = [n for n in experiments.EXPERIMENTS if n.startswith("bahdanau_")]
    assert {"bahdanau_fertility", "bahdanau_reinforce", "bahdanau_gumbel_annealed"} <= set(names)
    defaults = RNNConfig(src_vocab_size=5, tgt_vocab_size=5)
    for name in names:
        exp = experiments.preset(name, profile)
        assert dataclasses.replace(exp, name=base.name, description=base.description, model=base.model) == base, name
        changed = {k for k in exp.model if exp.model[k] != base.model.get(k, getattr(defaults, k))}
        assert changed and changed <= LESSON07_SWITCHES, (name, changed)
        RNNConfig(src_vocab_size=5, tgt_vocab_size=5, **exp.model)  # a valid config
