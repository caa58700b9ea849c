"""attnlab.training.results: one owner for where models and results live, and for reading and writing results."""

import json

import pytest

from attnlab.data import paths
from attnlab.training import results


def test_locations_follow_the_data_dir(tmp_data_dir):
    assert paths.data_dir() == tmp_data_dir
    assert results.checkpoint_path("bahdanau", shipped=True) == tmp_data_dir / "checkpoints" / "bahdanau"
    assert results.results_path("bahdanau_ko", shipped=False) == tmp_data_dir / "runs" / "results" / "bahdanau_ko.json"


def test_shipped_else_live_and_the_reverse(tmp_data_dir):
    with pytest.raises(FileNotFoundError, match=r"no results for 'm'; looked at .*results/m.json, .*runs/results/m.json"):
        results.find_result("m")
    results.write_result("m", {"bleu": 1.0}, shipped=False)
    assert results.find_result("m") == ({"bleu": 1.0}, "live run")
    results.write_result("m", {"bleu": 2.0}, shipped=True)
    assert results.find_result("m") == ({"bleu": 2.0}, "shipped")
    assert results.find_result("m", prefer_live=True) == ({"bleu": 1.0}, "live run")
    assert results.read_result("m", shipped=False) == {"bleu": 1.0}
    assert sorted(p.name for p in (tmp_data_dir / "results").iterdir()) == ["m.json"]  # no temporary file left


def test_unreadable_results_name_the_file(tmp_data_dir):
    with pytest.raises(FileNotFoundError, match="no results for 'x' at"):
        results.read_result("x")
    path = results.write_result("x", {}, shipped=True)
    path.write_text("{oops")
    with pytest.raises(results.ResultsError, match=r"x.json is not valid JSON"):
        results.read_result("x")
    path.write_text("[1]")
    with pytest.raises(results.ResultsError, match="x.json must hold a JSON object, found list"):
        results.find_result("x")


def test_load_all_results_order(tmp_data_dir):
    for name in ("c", "a", "b"):
        results.write_result(name, {"model": name}, shipped=True)
    assert list(results.load_all_results(order=("b", "zz"))) == ["b", "a", "c"]
    assert results.load_all_results(shipped=False) == {}


def test_provenance_records_how_a_result_came_about():
    import torch

    p = results.provenance(produced_by="test", profile="cpu", threads=3, load_before=1.234)
    assert p["produced_by"] == "test" and p["torch_threads"] == 3 and p["profile"] == "cpu"
    assert p["load_average"]["before"] == 1.23 and p["torch_version"] == torch.__version__
    assert json.loads(json.dumps(p)) == p  # JSON-ready
    assert results.provenance(produced_by="t", profile="cpu", threads=1, load_before=None)["load_average"]["before"] is None


def test_results_files_are_strict_json(tmp_data_dir):
    res = {"bleu": 1.0, "align_function": float("nan"), "by_bucket": {"1-10": {"x": [float("inf"), 2]}}}
    with pytest.raises(ValueError, match="not JSON compliant"):
        results.write_result("n", res, shipped=False)
    assert not results.results_path("n", shipped=False).exists()
    clean = results.json_ready(res)
    assert clean == {"bleu": 1.0, "align_function": None, "by_bucket": {"1-10": {"x": [None, 2]}}}
    results.write_result("n", clean, shipped=False)
    assert results.read_result("n", shipped=False) == clean
