"""``python -m attnlab.training.train``: one course model, trained through experiments.run, written in the foundation's format."""

import json

import pytest
import torch

from attnlab.training import cli, experiments, results
from attnlab.training.checkpoint import load_checkpoint

TINY = ["--bs", "8", "--model", "emb_dim=8", "--model", "hid_dim=16", "--model", "attn_dim=8"]
SMALL_CORPUS = ["--n-train", "200", "--n-valid", "20", "--test-per-bucket", "3"]


def _cli(*args):
    return cli.main(["bahdanau", *TINY, *SMALL_CORPUS, *args])


def test_the_command_trains_and_writes_checkpoint_and_results(tmp_data_dir, capsys):
    assert _cli("--steps", "3") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("training bahdanau (GRU + Bahdanau (additive) attention) on 1 process(es), batch 8 x 1")
    printed = json.loads(out[-1])
    res = results.read_result("bahdanau", shipped=False)  # the preset's name without --out
    assert printed["results"] == str(results.results_path("bahdanau", shipped=False))
    assert printed["checkpoint"] == str(tmp_data_dir / "runs" / "checkpoints" / "bahdanau.safetensors")
    assert (printed["model"], printed["bleu"], printed["train_steps"]) == ("bahdanau", res["bleu"], 3)
    assert (res["train_steps"], res["budget"], res["world_size"], res["batch_size"], res["global_batch"]) == (
        3, "3 steps", 1, 8, 8)
    assert res["model_config"] == {"emb_dim": 8, "hid_dim": 16, "attn_dim": 8}
    assert res["produced_by"] == "python -m attnlab.training bahdanau " + " ".join([*TINY, *SMALL_CORPUS, "--steps", "3"])
    assert res["corpus_version"] == "synth-enfr-1" and res["by_bucket"]["31-40"]["n"] == 3  # the sizes asked for
    model, meta = load_checkpoint(results.checkpoint_path("bahdanau", shipped=False))
    assert (model.config.hid_dim, model.config.emb_dim, meta["metrics"]) == (16, 8, res)
    assert meta["experiment"]["bs"] == 8 and meta["experiment"]["model"]["attn_dim"] == 8


def test_out_names_the_files_and_ship_writes_the_committed_folders(tmp_data_dir, capsys):
    assert _cli("--steps", "2", "--out", "tiny_bahdanau", "--ship", "--seed", "1") == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["model"] == "tiny_bahdanau"
    for path in (tmp_data_dir / "checkpoints" / "tiny_bahdanau.safetensors", tmp_data_dir / "results" / "tiny_bahdanau.json"):
        assert path.exists(), path
    assert not (tmp_data_dir / "runs").exists() and not (tmp_data_dir / "results" / "bahdanau.json").exists()
    res = results.read_result("tiny_bahdanau")
    assert (res["model"], res["experiment"], res["seed"]) == ("tiny_bahdanau", "bahdanau", 1)


def test_the_same_code_path_as_the_lessons(tmp_data_dir, capsys):
    """The command and experiments.run (what a lesson calls) train the same model, bit for bit."""
    assert _cli("--steps", "2", "--out", "cli") == 0
    data = experiments.synthetic_data("fr", n_train=200, n_valid=20, test_per_bucket=3)
    model, res = experiments.run(
        "bahdanau", steps=2, progress=False, data=data, out="lesson", bs=8,
        model_config={"emb_dim": 8, "hid_dim": 16, "attn_dim": 8},
    )
    cli, _ = load_checkpoint(results.checkpoint_path("cli", shipped=False))
    for (k, a), b in zip(cli.state_dict().items(), model.cpu().state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert {k: v for k, v in results.read_result("cli", shipped=False).items() if k in ("bleu", "loss_curve")} == {
        k: res[k] for k in ("bleu", "loss_curve")}


def _error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_steps_and_seconds_are_exclusive(capsys):
    err = _error(capsys, "bahdanau", "--steps", "5", "--seconds", "5")
    assert "argument --seconds: not allowed with argument --steps" in err


def test_unknown_preset_lists_the_choices(capsys):
    err = _error(capsys, "transformer_xl", "--steps", "5")
    assert "unknown preset 'transformer_xl'; choose one of: " + ", ".join(sorted(experiments.EXPERIMENTS)) in err


def test_bad_options_are_refused_before_any_data_is_made(tmp_data_dir, capsys):
    err = _error(capsys, "bahdanau", "--model", "hidden=64")
    assert "['hidden'] not fields of RNNConfig; known: [" in err and "'hid_dim'" in err
    assert "--model takes KEY=VALUE (e.g. hid_dim=256), got 'hid_dim'" in _error(capsys, "bahdanau", "--model", "hid_dim")
    assert "bs must be >= 1, got 0" in _error(capsys, "bahdanau", "--bs", "0")
    assert "out must be a bare file name" in _error(capsys, "bahdanau", "--out", "../elsewhere")
    assert "do not apply to --corpus" in _error(capsys, "bahdanau", "--corpus", "x.tsv", "--n-train", "10")
    assert not (tmp_data_dir / "corpus").exists()


def test_seconds_refused_with_several_processes(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert "--seconds cannot be used with 2 processes" in _error(capsys, "bahdanau", "--seconds", "5")


def test_max_steps_caps_every_step_budget(tmp_data_dir, monkeypatch):
    data = experiments.synthetic_data("fr", n_train=200, n_valid=20, test_per_bucket=3)
    tiny = {"emb_dim": 8, "hid_dim": 16, "attn_dim": 8}
    monkeypatch.setenv("ATTNLAB_MAX_STEPS", "3")
    assert experiments.max_steps() == 3
    # the preset's own budget (1,000 steps) and an explicit one are both capped
    for steps in (None, 50):
        _, res = experiments.run("bahdanau", steps=steps, progress=False, save=False, data=data, bs=8, model_config=tiny)
        assert (res["train_steps"], res["budget"], res["budget_capped_by"]) == (3, "3 steps", "ATTNLAB_MAX_STEPS=3")
    # a budget under the cap is left alone and says nothing
    _, res = experiments.run("bahdanau", steps=2, progress=False, save=False, data=data, bs=8, model_config=tiny)
    assert res["train_steps"] == 2 and "budget_capped_by" not in res
    monkeypatch.delenv("ATTNLAB_MAX_STEPS")
    assert experiments.max_steps() is None


@pytest.mark.parametrize("bad", ["0", "-3", "three", "2.5"])
def test_max_steps_bad_value(monkeypatch, capsys, bad):
    monkeypatch.setenv("ATTNLAB_MAX_STEPS", bad)
    message = f"ATTNLAB_MAX_STEPS='{bad}' must be a positive integer"
    with pytest.raises(ValueError, match=message):
        experiments.run("bahdanau", steps=2, progress=False, save=False)
    assert message in _error(capsys, "bahdanau", "--steps", "2")


def test_experiments_command_still_trains(tmp_data_dir, monkeypatch, capsys):
    """``python -m attnlab.training.experiments`` goes through the same run(); capped here so it takes seconds."""
    monkeypatch.setenv("ATTNLAB_MAX_STEPS", "2")
    monkeypatch.setattr(experiments, "load_splits", _small)  # the course's 100,000 pairs take too long here
    assert experiments.main(["rnn_noattn"]) == 0
    assert json.loads(capsys.readouterr().out)["train_steps"] == 2


def _small(**kwargs):
    from attnlab.data.corpus import make_splits

    return make_splits(n_train=200, n_valid=20, test_per_bucket=3, **kwargs)


def _tsv(path, n=600):
    """A small English<TAB>French file (generated sentences, as text)."""
    from attnlab.data.corpus import generate_pairs

    path.write_text("".join(" ".join(p.src) + "\t" + " ".join(p.tgt) + "\n" for p in generate_pairs(n, seed=3)))
    return path


TSV_TINY = ["--steps", "2", "--bs", "8", "--model", "d_model=16", "--model", "dim_feedforward=32",
            "--n-valid", "20", "--n-test", "10"]


def test_corpus_trains_on_a_tsv_with_its_subwords_beside_the_checkpoint(tmp_data_dir, tmp_path, capsys):
    tsv = _tsv(tmp_path / "pairs.tsv")
    assert cli.main(["transformer", "--corpus", str(tsv), *TSV_TINY, "--subword-vocab", "100", "--out", "tsv"]) == 0
    res = results.read_result("tsv", shipped=False)
    prepared = tmp_data_dir / "runs" / "checkpoints" / "tsv.corpus"
    assert (prepared / "tokenizer_src.model").is_file() and (prepared / "tokenizer_tgt.model").is_file()
    corpus = res["corpus"]
    assert (corpus["path"], corpus["prepared"], corpus["subword_vocab"]) == (str(tsv), str(prepared), 100)
    assert (corpus["pairs"]["valid"], corpus["pairs"]["test"]) == (20, 10) and 0 < corpus["pairs"]["train"] <= 570
    assert res["corpus_version"].startswith("tsv:pairs.tsv:") and res["corpus_version"].endswith(":unigram100:seed0")
    assert "tok:13a" in res["bleu_signature"] and res["n_test"] == 10  # sacrebleu on detokenized text
    model, meta = load_checkpoint(results.checkpoint_path("tsv", shipped=False))
    assert (model.config.src_vocab_size, model.config.tgt_vocab_size) == (100, 100)
    assert meta["corpus_version"] == res["corpus_version"] and meta["experiment"]["subword_vocab"] == 100


def test_corpus_errors(tmp_data_dir, tmp_path, capsys):
    tsv = _tsv(tmp_path / "pairs.tsv")
    assert "--corpus nowhere.tsv: no such file" in _error(capsys, "transformer", "--corpus", "nowhere.tsv")
    err = _error(capsys, "bahdanau_supervised", "--corpus", str(tsv))
    assert "trains on gold alignments, which a real corpus does not have" in err
    assert "a real corpus has no buckets" in _error(capsys, "transformer_short_rope", "--corpus", str(tsv))
    assert "--pair ko does not apply" in _error(capsys, "transformer", "--corpus", str(tsv), "--pair", "ko")
    assert "--subword-vocab applies to --corpus only" in _error(capsys, "transformer", "--subword-vocab", "100")
    assert "--n-test is the test split held out of --corpus" in _error(capsys, "transformer", "--n-test", "5")
    # the preset's 8,000 pieces do not fit 600 sentences: refused with the size that would
    err = _error(capsys, "transformer", "--corpus", str(tsv), *TSV_TINY)
    assert f"--corpus {tsv}: vocab_size=8000 is too large" in err and "use vocab_size <=" in err
