"""Parsing as translation (attnlab.data.parsing, attnlab.training.parsing_experiments): trees, linearisation, bracketing F1."""

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data.corpus import grammar as g
from attnlab.data.corpus import make_splits
from attnlab.data.corpus.english import realise
from attnlab.data.parsing import (
    WORD,
    Span,
    bracket_f1,
    bracket_spans,
    closing_brackets,
    constituents,
    linearise,
    make_parse_splits,
    make_parse_test_split,
    parse_pair,
    spans_to_tokens,
)
from attnlab.training.parsing_experiments import bucket_summary, closing_offsets, run_name


def lin(s):
    realise(s)
    return " ".join(linearise(s))


def toks(text):
    return tuple(text.split())


def test_hand_built_trees():
    cat = g.noun_phrase("cat", det="the")
    assert lin(g.sentence(g.clause(cat, "sleep"))) == "(S (NP XX XX )NP (VP XX )VP XX )S"
    dog = g.noun_phrase("dog", det="a")
    s = g.sentence(g.clause(g.pronoun("she"), "see", dog, pp=g.prep_phrase("in", g.noun_phrase("garden"))))
    assert lin(s) == "(S (NP XX )NP (VP XX (NP XX XX )NP (PP XX (NP XX XX )NP )PP )VP XX )S"
    # "the girl that sees the dog runs and he sleeps ."
    rel = g.clause(None, "see", g.noun_phrase("dog"), gap=1)
    girl = g.noun_phrase("girl", rel=rel)
    s = g.sentence(g.clause(girl, "run"), g.clause(g.pronoun("he"), "sleep", conj="and"))
    assert realise(s) == toks("the girl that sees the dog runs and he sleeps .")
    assert " ".join(linearise(s)) == (
        "(S (S (NP XX XX (SBAR XX (VP XX (NP XX XX )NP )VP )SBAR )NP (VP XX )VP )S XX (S (NP XX )NP (VP XX )VP )S XX )S"
    )
    # the words instead of XX, to read it
    assert linearise(s, words=realise(s))[:4] == ("(S", "(S", "(NP", "the")


def test_constituents_need_a_realised_sentence():
    with pytest.raises(ValueError, match="realised in English first"):
        constituents(g.sentence(g.clause(g.pronoun("he"), "sleep")))


def test_generated_trees_are_well_formed_and_cover_the_sentence():
    rng = random.Random(3)
    for lo, hi in ((1, 10), (11, 20), (21, 30), (31, 40)):
        for _ in range(50):
            p = parse_pair(rng, lo, hi)
            spans, n, repaired = bracket_spans(p.tgt)
            assert not repaired and n == len(p.src) and p.tgt.count(WORD) == len(p.src)
            assert ("S", 0, len(p.src) - 1) in spans
            assert set(lab for lab, _, _ in spans) <= {"S", "SBAR", "NP", "VP", "PP"}


def test_parse_splits_have_the_english_french_sources():
    sizes = dict(n_train=60, n_valid=15, test_per_bucket=4)
    ps, fs = make_parse_splits(**sizes), make_splits(**sizes)
    for a, b in ((ps.train, fs.train), (ps.valid, fs.valid), (ps.test, fs.test)):
        assert [p.src for p in a] == [p.src for p in b]
    assert [p.src for p in make_parse_test_split(per_bucket=4)] == [p.src for p in fs.test]


def test_spans_to_tokens_round_trip_and_errors():
    spans = [Span(0, 3, "S"), Span(0, 1, "NP"), Span(2, 2, "VP")]
    t = spans_to_tokens(spans, 4)
    assert " ".join(t) == "(S (NP XX XX )NP (VP XX )VP XX )S"
    assert bracket_spans(t)[0] == Counter({("S", 0, 3): 1, ("NP", 0, 1): 1, ("VP", 2, 2): 1})
    with pytest.raises(ValueError, match="cross"):
        spans_to_tokens([Span(0, 2, "NP"), Span(1, 3, "VP")], 4)
    with pytest.raises(ValueError, match="outside a sentence of n_words=2"):
        spans_to_tokens([Span(0, 2, "NP")], 2)
    with pytest.raises(ValueError, match="n_words must be >= 1, got 0"):
        spans_to_tokens([], 0)
    with pytest.raises(ValueError, match="words must have n_words=2 entries, got 1"):
        spans_to_tokens([], 2, words=["a"])


def test_bracket_f1_hand_examples():
    gold = toks("(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S")
    assert bracket_f1([gold], [gold]).f1 == 1.0
    # the object NP attached one word too wide: 3 of 4 spans right on both sides
    hyp = toks("(S (NP XX XX )NP (VP XX (NP XX XX )NP )VP )S")
    sc = bracket_f1([hyp], [gold])
    assert (sc.matched, sc.predicted, sc.gold) == (2, 4, 4)  # S and NP(0,1) match; VP and NP end later
    assert sc.precision == sc.recall == sc.f1 == 0.5 and sc.exact == 0
    # a missing span: precision 1, recall 3/4
    hyp = toks("(S (NP XX XX )NP (VP XX XX )VP XX )S")
    sc = bracket_f1([hyp], [gold])
    assert sc.precision == 1.0 and sc.recall == 0.75 and sc.f1 == pytest.approx(6 / 7)
    # labels count: NP for VP is wrong
    hyp = toks("(S (NP XX XX )NP (NP XX (NP XX )NP )NP XX )S")
    assert bracket_f1([hyp], [gold]).matched == 3
    d = bracket_f1([gold, hyp], [gold, gold]).as_dict()
    assert d["sentences"] == 2 and d["exact"] == 0.5 and d["repaired"] == 0 and d["length_mismatch"] == 0


def test_malformed_output_is_repaired():
    # unmatched closing bracket dropped; the open NP closes at the end
    spans, n, rep = bracket_spans(toks("(S (NP XX )VP XX"))
    assert rep and n == 2 and spans == Counter({("S", 0, 1): 1, ("NP", 0, 1): 1})
    # a closing bracket that skips an open one closes both
    spans, n, rep = bracket_spans(toks("(S (NP XX (PP XX )NP XX )S"))
    assert rep and spans == Counter({("S", 0, 2): 1, ("NP", 0, 1): 1, ("PP", 1, 1): 1})
    # empty spans are dropped; an empty output scores 0, never fails
    spans, n, rep = bracket_spans(toks("(S (NP )NP XX )S"))
    assert rep and spans == Counter({("S", 0, 0): 1})
    sc = bracket_f1([()], [toks("(S XX )S")])
    assert sc.f1 == 0.0 and sc.predicted == 0 and sc.length_mismatch == 1
    with pytest.raises(ValueError, match="gold tree 0 is malformed"):
        bracket_f1([toks("(S XX )S")], [toks("(S XX")])
    with pytest.raises(ValueError, match="predicted and gold must hold as many trees, got 1 and 2"):
        bracket_f1([()], [(), ()])
    with pytest.raises(TypeError, match="a str"):
        bracket_spans("(S XX )S")


def _trees(n):
    rng = random.Random(n)
    return [parse_pair(rng, 3, 40).tgt for _ in range(6)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.data())
def test_f1_properties(seed, data):
    trees = _trees(seed)
    # a tree against itself: 1; F1 is symmetric and precision / recall swap with the arguments
    assert bracket_f1(trees, trees).f1 == 1.0
    other = [trees[-1], *trees[:-1]]
    ab, ba = bracket_f1(trees, other), bracket_f1(other, trees)
    assert ab.f1 == pytest.approx(ba.f1) and ab.precision == pytest.approx(ba.recall)
    assert 0.0 <= ab.f1 <= 1.0
    # invariant to the order of the sentences, and to what the words are (only brackets count)
    perm = data.draw(st.permutations(range(len(trees))))
    assert bracket_f1([trees[i] for i in perm], [other[i] for i in perm]) == ab
    words = [tuple("w" if t == WORD else t for t in tree) for tree in trees]
    assert bracket_f1(words, other) == ab
    # deleting tokens from a prediction never raises; its F1 stays in [0, 1]
    cut = data.draw(st.integers(0, len(trees[0])))
    sc = bracket_f1([trees[0][:cut]], [trees[0]])
    # only trailing closing brackets are restored exactly by the repair (they all close after the last word)
    only_closing = all(t.startswith(")") for t in trees[0][cut:])
    assert 0.0 <= sc.f1 <= 1.0 and only_closing == (sc.f1 == 1.0)


def test_closing_brackets_and_offsets():
    tgt = toks("(S (NP XX XX )NP (VP XX )VP XX )S")
    assert closing_brackets(tgt) == [(4, "NP", 1), (7, "VP", 2), (9, "S", 3)]
    src = toks("the cat sleeps .")
    a = np.zeros((len(tgt), len(src)))
    a[4, 2] = a[7, 2] = a[9, 3] = 1.0  # NP looks at the word after it, VP at its last word, S at its last word
    pair = type("P", (), {"src": src, "tgt": tgt})()
    assert closing_offsets([a], [pair]) == Counter({1: 1, 0: 2})
    with pytest.raises(ValueError, match="attention has 3 rows for a target of 10 tokens"):
        closing_offsets([a[:3]], [pair])


def test_run_names():
    assert run_name("parse_bahdanau") == "parse_bahdanau" and run_name("parse_noattn", 2) == "parse_noattn_seed2"
    with pytest.raises(KeyError, match="unknown parsing run 'parse_x'"):
        run_name("parse_x")


def test_bucket_summary_reads_shipped_seeds(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path))
    (tmp_path / "results").mkdir()
    for seed, f1 in ((0, 0.9), (1, 0.8)):
        res = {"by_bucket": {"31-40": {"f1": f1}}}
        (tmp_path / "results" / f"{run_name('parse_noattn', seed)}.json").write_text(json.dumps(res))
    s = bucket_summary("parse_noattn", "31-40")
    assert s["n"] == 2 and s["mean"]["f1"] == pytest.approx(0.85) and s["sd"]["f1"] == pytest.approx(0.0707, abs=1e-4)
    assert bucket_summary("parse_bahdanau", "31-40") is None
    with pytest.raises(ValueError, match="bucket must be one of"):
        bucket_summary("parse_noattn", "41-50")
