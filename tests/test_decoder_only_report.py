"""Lesson 11's measurements and tables on small inputs: per-head AER, first-token mass, windows, the seed table."""

import numpy as np
import pytest
import torch

from attnlab.course.lesson11 import seed_table, window_table
from attnlab.data.corpus import Pair
from attnlab.data.vocab import build_vocabs
from attnlab.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.training.decoder_only_report import (
    first_token_mass,
    head_aer,
    seed_names,
    source_attention,
    window_scores,
)

from .conftest import copy_task_splits

PAIRS = [Pair(("a", "b", "c"), ("x", "y", "z"), ((0,), (2,), (1,)), (True, True, True))]


def test_head_aer_scores_each_head_on_its_own():
    good = np.zeros((3, 3))
    good[[0, 1, 2], [0, 2, 1]] = 1  # the gold links
    bad = np.roll(good, 1, axis=1)  # every link one off
    maps = [np.stack([np.stack([good, bad]), np.stack([bad, good])])]  # (N=2, H=2, T, S)
    grid = head_aer(maps, PAIRS)
    assert grid.shape == (2, 2)
    np.testing.assert_allclose(grid, [[0.0, 1.0], [1.0, 0.0]])


@pytest.fixture(scope="module")
def copy_models():
    splits = copy_task_splits(n_train=200)
    sv, tv = build_vocabs(splits)
    torch.manual_seed(0)
    dec = DecoderOnly(DecoderOnlyConfig(len(sv), len(tv), d_model=16, num_heads=2, num_layers=2)).eval()
    ed = Transformer(TransformerConfig(len(sv), len(tv), d_model=16, num_heads=2, dim_feedforward=32)).eval()
    return splits, sv, tv, dec, ed


def test_source_attention_shapes(copy_models):
    splits, sv, tv, dec, ed = copy_models
    pairs = splits.test[:5]
    for model, n in ((dec, 2), (ed, 2)):
        maps = source_attention(model, pairs, sv, tv, bs=2)
        assert [m.shape for m in maps] == [(n, 2, len(p.tgt), len(p.src)) for p in pairs]
    assert all((m.sum(-1) <= 1 + 1e-5).all() for m in source_attention(dec, pairs, sv, tv))


def test_first_token_mass_and_windows(copy_models):
    splits, sv, tv, dec, _ = copy_models
    pairs = splits.test[:4]
    mass = first_token_mass(dec, pairs, sv, tv)
    assert len(mass["first"]) == 2 and all(0 <= m <= 1 for m in mass["first"]) and 0 < mass["uniform"] < 1
    rows = window_scores(dec, pairs, sv, tv, [(None, 0), (2, 1)])
    assert [(r["window"], r["sinks"]) for r in rows] == [(None, 0), (2, 1)]
    assert window_table({"m": rows}).splitlines()[1].split()[:2] == ["full", "0"]


def test_seed_names():
    assert seed_names("decoder_only", "fr") == ["decoder_only", "decoder_only_seed1", "decoder_only_seed2"]
    assert seed_names("transformer", "ko", (0, 2)) == ["transformer_ko", "transformer_seed2_ko"]


def _summary(mean, sd, n=3):
    return {"runs": list(range(n)), "params": 10, "mean": {"bleu": mean}, "sd": {"bleu": sd}}


def test_seed_table_applies_the_difference_rule():
    assert "a ahead" in seed_table({"a": _summary(99.0, 0.1), "b": _summary(98.0, 0.2)}, ("bleu",))
    assert "tie" in seed_table({"a": _summary(99.0, 0.5), "b": _summary(98.8, 0.5)}, ("bleu",))
    assert "unknown" in seed_table({"a": _summary(99.0, None, 1), "b": _summary(98.0, 0.2)}, ("bleu",))


def test_seed_table_rows_fit_a_notebook_output():
    """The lesson prints this table; a row wider than a 1280 px JupyterLab window wraps (the browser stage checks)."""
    wide = {"mean": dict.fromkeys(("bleu", "exact_match", "em 31-40"), 99.257), "sd": dict.fromkeys(
        ("bleu", "exact_match", "em 31-40"), 0.189), "runs": [0, 1, 2], "params": 149_043}
    table = seed_table({"decoder-only (prefix LM)": wide, "encoder-decoder": wide}, ("bleu", "exact_match", "em 31-40"))
    assert max(len(line) for line in table.splitlines()) <= 100, table
