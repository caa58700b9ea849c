"""The lessons' text tables: each reproduces, character for character, what the lesson printed before it moved here."""

import pandas as pd
import pytest
import torch

from attnlab.data.corpus import BUCKET_NAMES
from attnlab.viz.tables import (
    bucket_table,
    bucket_table_by_pair,
    checkpoint_table,
    claims_table,
    course_table,
    mean_sd_table,
    side_by_side,
    tier_text,
)


def run(bleu_by_bucket, bleu, **extra):
    by = {b: {"bleu": v, "exact_match": v / 100} for b, v in zip(BUCKET_NAMES, bleu_by_bucket, strict=True)}
    return {"by_bucket": by, "bleu": bleu, "exact_match": bleu / 100, **extra}


BASE = run([83.4, 44.6, 23.4, 15.1], 29.4)
ATTN = run([99.5, 99.2, 99.2, 98.5], 98.9)


def test_bucket_table_is_lesson_02s_table():
    text = bucket_table({"no attn": BASE, "Bahdanau": ATTN}, "bleu", overall_note="   (paper)")
    assert text.splitlines() == [
        "  bucket  no attn  Bahdanau",
        "    1-10     83.4      99.5",
        "   11-20     44.6      99.2",
        "   21-30     23.4      99.2",
        "   31-40     15.1      98.5",
        " overall     29.4      98.9   (paper)",
    ]


def test_bucket_table_errors():
    with pytest.raises(ValueError, match="runs is empty"):
        bucket_table({})
    with pytest.raises(ValueError, match="'x' has no 'by_bucket'"):
        bucket_table({"x": {"bleu": 1.0}})
    with pytest.raises(TypeError, match="runs must be a mapping"):
        bucket_table([BASE])


def test_bucket_table_by_pair_spans_a_pair_over_its_columns():
    by_pair = {"English→French": {"rnn_noattn": BASE, "bahdanau": ATTN}, "English→Korean": {"rnn_noattn": BASE, "bahdanau": ATTN}}
    lines = bucket_table_by_pair(by_pair, {"rnn_noattn": "no attn", "bahdanau": "Bahdanau"}).splitlines()
    assert lines[0] == "BLEU by source length      English→French      English→Korean"
    assert lines[1] == "               bucket   no attn  Bahdanau   no attn  Bahdanau"
    assert lines[2] == "                 1-10      83.4      99.5      83.4      99.5"
    assert len(lines) == 2 + len(BUCKET_NAMES)
    with pytest.raises(ValueError, match=r"lacks the runs \['bahdanau'\]"):
        bucket_table_by_pair({"p": {"rnn_noattn": BASE}}, {"rnn_noattn": "a", "bahdanau": "b"})


SUMMARY = {
    "luong_dot": {"mean": {"bleu": 97.34, "aer": 0.094}, "sd": {"bleu": 0.32, "aer": 0.023}, "params": 145019},
    "luong_concat": {"mean": {"bleu": 99.21, "aer": 0.084}, "sd": {"bleu": 0.05, "aer": 0.005}, "params": 151227},
}
COLUMNS = {"bleu": ("BLEU", 2), "aer": ("AER", 3)}


def test_mean_sd_table_with_paper_column_and_single_runs():
    lines = mean_sd_table(SUMMARY, COLUMNS, names=["luong_dot", "luong_concat"], short=lambda n: n[6:],
                          paper={"luong_dot": "18.6"}, singles={"no attention": ({"bleu": 29.45, "aer": None}, 229979)}
                          ).splitlines()
    assert lines[0] == "variant                   BLEU            AER  params  paper"
    assert lines[1] == "-" * len(lines[0])
    assert lines[2] == "dot               97.34 ± 0.32  0.094 ± 0.023  145019   18.6"
    assert lines[3] == "concat            99.21 ± 0.05  0.084 ± 0.005  151227      -"
    # a single run keeps its mean where the rows above have theirs; a missing figure is a dash
    assert lines[4] == f"{'no attention *':15s}{'29.45' + ' ' * 7:>15s}{'-' + ' ' * 8:>15s}{229979:8d}"


def test_mean_sd_table_without_paper_and_errors():
    lines = mean_sd_table(SUMMARY, COLUMNS).splitlines()
    assert lines[0].endswith("params") and len(lines[1]) == len(lines[0]) and lines[2].startswith("luong_dot ")
    with pytest.raises(ValueError, match=r"names \['luong_x'\] are not in rows"):
        mean_sd_table(SUMMARY, COLUMNS, names=["luong_x"])
    with pytest.raises(ValueError, match="columns is empty"):
        mean_sd_table(SUMMARY, {})


def test_mean_sd_table_percent_columns():
    rows = {"m": {"mean": {"share": 0.9823, "aer": 0.094}, "sd": {"share": 0.0071, "aer": 0.023}, "params": 7}}
    lines = mean_sd_table(rows, {"share": ("on gold", 1), "aer": ("AER", 3)}, percent={"share"},
                          singles={"one": ({"share": 0.5}, 7)}).splitlines()
    assert lines[2] == f"{'m':15s}{'98.2% ± 0.7':>15s}{'0.094 ± 0.023':>15s}{7:8d}"
    assert lines[3] == f"{'one *':15s}{'50.0%' + ' ' * 6:>15s}{'-' + ' ' * 8:>15s}{7:8d}"
    with pytest.raises(ValueError, match=r"percent names figures \['bleu'\] that are not columns"):
        mean_sd_table(rows, {"share": ("on gold", 1)}, percent=["bleu"])


def test_checkpoint_table():
    curve = {"step": [200, 500, 1000], "bleu": [18.5, 87.8, 95.8]}
    lines = checkpoint_table({"English→French": {"luong_dot": curve}}, (200, 500, 1000), short=lambda n: n[6:]).splitlines()
    assert lines == [f"{'variant':13s}{'English→French':>24s}", f"{'dot':13s}{'18.5 /  87.8 /  95.8':>24s}"]
    with pytest.raises(ValueError, match=r"no point at steps \[300\]"):
        checkpoint_table({"p": {"m": curve}}, [300])
    with pytest.raises(ValueError, match="steps is empty"):
        checkpoint_table({"p": {"m": curve}}, [])


def test_claims_table_and_tier_text():
    text = claims_table([("dot beats general", "18.6 vs 17.3", ["tie", "holds"])], ["fr BLEU", "ko BLEU"], title="claim")
    assert text.splitlines()[1] == f"{'dot beats general':39s} {'18.6 vs 17.3':>15s}{'tie':>13s}{'holds':>13s}"
    with pytest.raises(ValueError, match="has 1 verdicts for 2 headers"):
        claims_table([("c", "-", ["tie"])], ["a", "b"])
    means = {"a": 1.0, "b": 0.5, "c": 0.25}
    assert tier_text("BLEU", ["a", "b"], ["c"], means, digits=2) == (
        "  BLEU      best: a; level with it: b\n            behind: c 0.25")
    assert tier_text("AER", ["a"], [], means) == "  AER       best: a; level with it: none"
    with pytest.raises(ValueError, match="level is empty"):
        tier_text("BLEU", [], ["c"], means)


def test_side_by_side_rounds_both_columns():
    text = side_by_side({"weights": (torch.tensor([0.00304, 0.96671]), [0.0028, 0.968])}, ("exact", "published"))
    assert text.splitlines() == [f"{'':14s} {'exact':>26s}   {'published':>26s}",
                                 f"{'weights':14s} {'[0.003, 0.9667]':>26s}   {'[0.0028, 0.968]':>26s}"]
    with pytest.raises(ValueError, match="headers must name 2 columns"):
        side_by_side({"w": ([1], [2])}, ("a",))
    with pytest.raises(ValueError, match=r"rows\['w'\] must be \(left, right\)"):
        side_by_side({"w": ([1],)}, ("a", "b"))


def test_course_table_drops_columns_no_model_records():
    rows = {"no attention": {**BASE, "params": 229979, "budget": "1,000 steps"},
            "Bahdanau": {**ATTN, "params": 156731, "budget": "1,000 steps", "aer": 0.106}}
    table = course_table(rows)
    assert isinstance(table, pd.DataFrame) and list(table.index) == ["no attention", "Bahdanau"]
    assert "chrF" not in table.columns and table.loc["no attention", "AER"] == "–" and table.loc["Bahdanau", "AER"] == "0.11"
    assert table.loc["Bahdanau", "BLEU 31-40"] == "98.5" and table.loc["no attention", "params"] == "229,979"
    with pytest.raises(ValueError, match="rows is empty"):
        course_table({})
