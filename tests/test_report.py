"""The README's figures come from data/results, stay in sync with them, and agree with the checkpoints."""

import json
import math
from pathlib import Path

import pytest

from attnlab.data.corpus import BUCKET_NAMES
from attnlab.training import results
from attnlab.training.experiments import result_name
from attnlab.training.report import (
    END,
    README,
    START,
    load_all_results,
    readme_block,
    results_table,
    task_tables,
    update_readme,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = load_all_results()


def test_readme_block_matches_the_shipped_results():
    text = (ROOT / "README.md").read_text()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == readme_block(), "run `python -m attnlab.training.report --readme` after changing data/results"
    assert block.startswith(results_table())  # the translation tables first, unchanged; lesson 10's after them


def test_the_report_updates_the_repository_readme():
    """``python -m attnlab.training.report --readme`` writes the README beside ``lib/`` (it looked in ``lib/``
    once the library moved into packages)."""
    assert README == ROOT / "README.md"


def test_every_shipped_checkpoint_has_results():
    weights = {p.stem for p in (ROOT / "data" / "checkpoints").glob("*.safetensors")}
    every = results.load_all_results(shipped=True)
    assert weights == set(every)
    metas = {n: json.loads((ROOT / "data" / "checkpoints" / f"{n}.json").read_text()) for n in weights}
    # a toy run (lessons 5 and 6: attnlab.course.toys) may be a Transformer, but its results carry a task
    translation = {n for n, m in metas.items() if m["kind"] in ("rnn", "transformer", "agreement", "decoder_only") and not m.get("task")}
    assert translation == set(SHIPPED)  # the README's tables hold every translation model, and only those
    for name in weights - translation:  # lesson 13's models, the toy runs: the checkpoint keeps the same metrics
        meta = json.loads((ROOT / "data" / "checkpoints" / f"{name}.json").read_text())
        assert meta["metrics"] == every[name] and every[name]["task"], name


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_results_agree_with_their_checkpoint(name):
    r = SHIPPED[name]
    assert r["model"] == name
    # the preset's file name, or a run of it saved under its own name (``experiments.run(out=...)``:
    # another seed, a longer budget, a changed field), which starts with the preset's; or, for the
    # second pair, that own name with the pair's suffix (``result_name("transformer_seed1", "ko")``)
    experiment, pair = r.get("experiment", name), r.get("pair", "fr")
    preset_file = result_name(experiment, pair)
    own = name.removesuffix(f"_{pair}") if pair != "fr" and name.endswith(f"_{pair}") else None
    assert name == preset_file or name.startswith(preset_file + "_") or (own or "").startswith(experiment + "_"), (
        name, preset_file)
    ckpt = ROOT / "data" / "checkpoints" / f"{name}.safetensors"
    assert ckpt.stat().st_size <= 5_000_000, f"{ckpt} is over 5 MB"
    meta = json.loads(ckpt.with_suffix(".json").read_text())
    assert meta["metrics"] == r, "the checkpoint's copy of the metrics and the results file disagree"
    assert meta["corpus_version"] == r["corpus_version"]
    assert r["params"] == sum(math.prod(s) for s in meta["shapes"].values())
    assert meta["experiment"]["name"] == r.get("experiment", name)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_results_are_consistent(name):
    r = SHIPPED[name]
    assert list(r["by_bucket"]) == list(BUCKET_NAMES)
    assert sum(b["n"] for b in r["by_bucket"].values()) == r["n_test"]
    # overall exact match is the size-weighted mean of the buckets' (each rounded to 4 decimals)
    weighted = sum(b["exact_match"] * b["n"] for b in r["by_bucket"].values()) / r["n_test"]
    assert weighted == pytest.approx(r["exact_match"], abs=1e-4)
    assert isinstance(r["train_steps"], int) and r["train_steps"] > 0
    assert math.isfinite(r["tokens_per_second"]) and r["tokens_per_second"] > 0
    assert r["torch_threads"] >= 1 and r["profile"] in ("cpu", "gpu")


def _result(name, pair, bleu, **more):
    bb = {b: {"bleu": bleu, "exact_match": 0.5, "n": 1} for b in BUCKET_NAMES}
    run = {"params": 1234, "train_seconds": 120.0, "train_steps": 1500, "tokens_per_second": 9999.4, "profile": "cpu"}
    return {"model": name, "pair": pair, "bleu": bleu, "exact_match": 0.5, "by_bucket": bb, **run, **more}


def test_one_table_per_pair_with_the_metrics_it_has():
    table = results_table(
        {
            "bahdanau": _result("bahdanau", "fr", 99.0),
            "bahdanau_ko": _result("bahdanau_ko", "ko", 80.04, chrf=90.25, aer=0.1234),
        }
    )
    fr, ko = table.split("\n\n**English→Korean**\n\n")
    assert fr.startswith("**English→French**\n\n| model | BLEU | exact |") and "chrF" not in fr and "AER" not in fr
    assert fr.splitlines()[-1] == (
        "| `bahdanau` | 99.0 | 0.500 | 99.0 | 99.0 | 99.0 | 99.0 | 0.500 | – | 1,234 | 120 | 1,500 | 9999 | cpu |"
    )
    assert ko.startswith("| model | BLEU | chrF | exact |") and "| AER |" in ko.splitlines()[0]
    assert ko.splitlines()[-1] == (
        "| `bahdanau_ko` | 80.0 | 90.2 | 0.500 | 80.0 | 80.0 | 80.0 | 80.0 | 0.500 | – | 0.123 | 1,234 | 120 | 1,500 "
        "| 9999 | cpu |"
    )
    assert "Korean" not in results_table({"bahdanau": _result("bahdanau", "fr", 99.0)})


def test_load_all_results_orders_pairs_then_lessons(tmp_data_dir):
    for name, pair, exp in (
        ("bahdanau_ko", "ko", "bahdanau"),
        ("luong_dot", "fr", "luong_dot"),
        ("bahdanau", "fr", "bahdanau"),
        ("rnn_noattn_ko", "ko", "rnn_noattn"),
        ("rnn_noattn", "fr", "rnn_noattn"),
    ):
        results.write_result(name, {**_result(name, pair, 1.0), "experiment": exp}, shipped=True)
    assert list(load_all_results()) == ["rnn_noattn", "bahdanau", "luong_dot", "rnn_noattn_ko", "bahdanau_ko"]
    results.write_result("odd", _result("odd", "de", 1.0), shipped=True)
    with pytest.raises(ValueError, match=r"results of 'odd': pair must be one of \('fr', 'ko'\), got 'de'"):
        load_all_results()


def test_update_readme_rewrites_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\nold\n{END}\noutro\n")
    assert update_readme(readme, table="| new |")
    assert readme.read_text() == f"intro\n{START}\n| new |\n{END}\noutro\n"
    assert not update_readme(readme, table="| new |")
    readme.write_text("no block")
    with pytest.raises(ValueError, match="no <!-- results:start -->"):
        update_readme(readme)


def _copy_result(name, pair, seed, bleu, names, p_gen=(0.1, 0.9)):
    return {
        "model": name, "pair": pair, "task": "copy", "seed": seed, "bleu": bleu, "train_steps": 1000,
        "copy_accuracy": {"name": names, "number": 0.5, "all": 0.6}, "pointer_all": 0.75,
        "p_gen": None if p_gen is None else {"copied": p_gen[0], "other": p_gen[1]},
    }


def test_lesson_10_runs_have_tables_of_their_own():
    """Each task's own figures, mean ± sample sd over the seeds present (the value alone for one seed); a
    figure no seed records (p_gen of a model without copying) is an en dash; other tasks are left out."""
    runs = {
        "pointer_gen": _copy_result("pointer_gen", "fr", 0, 80.0, 0.9),
        "pointer_gen_seed1": _copy_result("pointer_gen_seed1", "fr", 1, 84.0, 0.8),
        "pointer_gen_seed1_ko": _copy_result("pointer_gen_seed1_ko", "ko", 1, 50.0, 0.7),
        "pointer_nocopy": _copy_result("pointer_nocopy", "fr", 0, 70.0, 0.0, p_gen=None),
        "parse_bahdanau": {"task": "parsing", "f1": 0.9, "by_bucket": {"31-40": {"f1": 0.8}}, "train_steps": 1000},
        "parse_bahdanau_seed2": {"task": "parsing", "f1": 0.7, "by_bucket": {"31-40": {"f1": 0.6}}, "train_steps": 1000},
        "pointer_sort": {"task": "sorting", "exact_order_2x": 1.0, "test_length_2x": 20, "train_steps": 1000},
        "captioner": {"task": "caption", "bleu": 1.0},
    }
    copy, parsing, sorting = task_tables(runs).split("\n\n**")
    assert copy.splitlines()[2] == (
        "| run | pair | seeds | BLEU | copy names | copy numbers | pointer | p_gen (copied) | p_gen (other) | steps |"
    )
    assert copy.splitlines()[4:] == [
        "| `pointer_gen` | fr | 0, 1 | 82.0 ± 2.8 | 0.850 ± 0.071 | 0.500 ± 0.000 | 0.750 ± 0.000 | 0.100 ± 0.000 "
        "| 0.900 ± 0.000 | 1,000 |",
        "| `pointer_nocopy` | fr | 0 | 70.0 | 0.000 | 0.500 | 0.750 | – | – | 1,000 |",
        "| `pointer_gen_ko` | ko | 1 | 50.0 | 0.700 | 0.500 | 0.750 | 0.100 | 0.900 | 1,000 |",
    ]
    assert parsing.startswith("Lesson 10, parsing") and parsing.splitlines()[-1] == (
        "| `parse_bahdanau` | 0, 2 | 0.800 ± 0.141 | 0.700 ± 0.141 | 1,000 |"
    )
    assert sorting.splitlines()[-1] == "| `pointer_sort` | 0 | 1.000 | 20 | 1,000 |"
    assert "captioner" not in task_tables(runs) and task_tables({}) == ""


def test_a_lesson_10_table_refuses_seeds_that_disagree():
    """A figure recorded by some seeds of a run and missing in others is an error that names the run, the
    figure and the seeds (an average over a subset would pass for the run's); so is a file name that is not
    the course's seed convention, or a seed field that contradicts the name."""
    one = _copy_result("pointer_gen", "fr", 0, 80.0, 0.9)
    two = _copy_result("pointer_gen_seed1", "fr", 1, 84.0, 0.8)
    del two["copy_accuracy"]["number"]
    with pytest.raises(ValueError, match=r"copy run 'pointer_gen' \(fr\): 'copy_accuracy.number' is missing in "
                       r"seed\(s\) \[1\] but recorded in the others"):
        task_tables({"pointer_gen": one, "pointer_gen_seed1": two})
    old_name = _copy_result("pointer_gen_ko_seed1", "ko", 1, 50.0, 0.7)
    with pytest.raises(ValueError, match=r"'pointer_gen_ko_seed1': the name must be seed_result_name.*'pointer_gen_ko_seed1_ko'"):
        task_tables({"pointer_gen_ko_seed1": old_name})
    with pytest.raises(ValueError, match="its seed field is 0, its name says seed 1"):
        task_tables({"pointer_gen_seed1": {**two, "seed": 0}})
