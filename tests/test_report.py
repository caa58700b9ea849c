"""The README's figures come from data/results, and stay in sync with them."""

import json
from pathlib import Path

import pytest

from attnlab.data import BUCKET_NAMES
from attnlab.report import END, START, load_all_results, results_table, update_readme

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {"bleu", "exact_match", "by_bucket", "params", "train_seconds", "tokens_per_second", "profile"}


def test_readme_block_matches_the_shipped_results():
    text = (ROOT / "README.md").read_text()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == results_table(), "run `python -m attnlab.report --readme` after changing data/results"


def test_shipped_results_have_the_foundation_format():
    results = load_all_results()
    assert results, "no shipped results in data/results"
    for name, r in results.items():
        assert REQUIRED <= r.keys(), f"{name} lacks {REQUIRED - r.keys()}"
        assert list(r["by_bucket"]) == list(BUCKET_NAMES), name
        for m in r["by_bucket"].values():
            assert 0 <= m["bleu"] <= 100 and 0 <= m["exact_match"] <= 1
        ckpt = ROOT / "data" / "checkpoints" / f"{name}.safetensors"
        assert ckpt.exists() and ckpt.stat().st_size <= 5_000_000, f"{ckpt} missing or over 5 MB"
        meta = json.loads(ckpt.with_suffix(".json").read_text())
        assert meta["metrics"]["bleu"] == r["bleu"], f"{name}: checkpoint JSON and results disagree"


def test_update_readme_rewrites_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{START}\nold\n{END}\noutro\n")
    assert update_readme(readme, table="| new |")
    assert readme.read_text() == f"intro\n{START}\n| new |\n{END}\noutro\n"
    assert not update_readme(readme, table="| new |")
    readme.write_text("no block")
    with pytest.raises(ValueError, match="no <!-- results:start -->"):
        update_readme(readme)
