"""Readings of lesson 10's ambiguous sentences and the F1 ceiling (attnlab.data.parse_ambiguity).

Each property is also run on a planted bug and must fail there.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest

from attnlab.data import parse_ambiguity as pa
from attnlab.data.corpus import english, french
from attnlab.data.corpus import grammar as g
from attnlab.data.corpus.english import _ADJ, _DET, _NOUN
from attnlab.data.parsing import Span, bracket_f1, bracket_spans, linearise, make_parse_test_split, spans_to_tokens
from attnlab.viz import pointers as ppics


def _realised(s):
    english.realise(s)
    return s


def _sample(n, lo, hi, seed):
    rng = random.Random(seed)
    return [_realised(g.build(rng, lo, hi, french.RESTRICTIONS)) for _ in range(n)]


SHORT = _sample(300, 8, 20, 3)


def _lesson_example():
    """Lesson 10's "she sees the dog in the garden ." (PP on the noun)."""
    garden = g.prep_phrase("in", g.noun_phrase("garden"))
    return _realised(g.sentence(g.clause(g.pronoun("she"), "see", g.noun_phrase("dog", pp=garden))))


def _unambiguous():
    """ "the dog in the garden sleeps ." -- a PP on the subject can go nowhere else."""
    dog = g.noun_phrase("dog", pp=g.prep_phrase("in", g.noun_phrase("garden")))
    return _realised(g.sentence(g.clause(dog, "sleep")))


# --- planted bugs ---------------------------------------------------------------------------------

READINGS = pa.readings  # the real one, for the planted bugs that build on it


def _moves_any_pp(s):
    """Bug: the readings plus every PP moved to any free host that takes it, words or not."""
    t = pa._Tree(s)
    out = READINGS(s)
    known = {r.hosts for r in out}
    for j in range(len(t.pps)):
        for k in range(len(t.hosts)):
            state = t.gold[:j] + (k,) + t.gold[j + 1 :]
            if k not in t.gold and pa._allowed(t.kind[k], t.hosts[k], t.pps[j]) and state not in known:
                if id(t.hosts[k]) not in t.subtree(t.pps[j]):
                    out.append(pa.Reading(pa.realise_hosts(s, state)[1], state, ()))
    return out


def _check_readings(s, readings_fn):
    words = english.realise(s)
    gold = linearise(s)
    rs = readings_fn(s)
    assert rs[0].tree == gold, "the gold tree comes first"
    for r in rs:
        w, tree = pa.realise_hosts(s, r.hosts)
        assert w == words, f"a reading changes the words: {' '.join(w)} != {' '.join(words)}"
        assert tree == r.tree
    assert len({r.tree for r in rs}) == len(rs)


def test_readings_realise_to_the_same_words_and_start_with_gold():
    for s in SHORT[:150]:
        _check_readings(s, pa.readings)
    with pytest.raises(AssertionError, match="changes the words"):
        for s in SHORT[:150]:
            _check_readings(s, _moves_any_pp)


def test_unambiguous_sentence_has_one_reading_and_the_lesson_example_two():
    s = _unambiguous()
    assert len(pa.readings(s)) == 1 and len(pa.brute_force_readings(s)) == 1
    assert len(_moves_any_pp(s)) > 1  # the planted bug would count an ambiguity that is not there
    ex = _lesson_example()
    on_verb = g.sentence(
        g.clause(g.pronoun("she"), "see", g.noun_phrase("dog"), pp=g.prep_phrase("in", g.noun_phrase("garden")))
    )
    english.realise(on_verb)
    assert {r.tree for r in pa.readings(ex)} == {linearise(ex), linearise(on_verb)}
    assert [kinds for kinds, _, _ in pa.readings(ex)[0].kinds] == [("np", "main")]
    original = pa._Tree.candidates
    pa._Tree.candidates = lambda self, j: [k for k in original(self, j) if self.kind[k] != "main"]  # planted bug
    try:
        assert len(pa.readings(ex)) == 1
    finally:
        pa._Tree.candidates = original


def test_of_never_goes_on_a_clause():
    dog = g.noun_phrase("dog", pp=g.prep_phrase("of", g.noun_phrase("girl")))
    s = _realised(g.sentence(g.clause(g.pronoun("she"), "see", dog)))
    assert len(pa.readings(s)) == 1


def test_readings_equal_a_brute_force_over_all_host_assignments():
    ambiguous = 0
    for s in SHORT:
        rs = pa.readings(s)
        assert {r.tree for r in rs} == pa.brute_force_readings(s)
        ambiguous += len(rs) > 1
    assert ambiguous >= 30  # the sample holds ambiguous sentences, relative clauses among the hosts
    assert any(len(k) > 1 and "rel" in k for s in SHORT for (k, _), _ in pa.attachment_configurations(s))

    original = pa._Tree.candidates

    def no_relative_hosts(self, j):  # planted bug: a PP never moves onto a relative clause
        return [k for k in original(self, j) if self.kind[k] != "rel" or k == self.host_of(self.pps[j])]

    pa._Tree.candidates = no_relative_hosts
    try:
        assert any({r.tree for r in pa.readings(s)} != pa.brute_force_readings(s) for s in SHORT)
    finally:
        pa._Tree.candidates = original


_CLASS = {f: "N" for fs in _NOUN.values() for f in fs}
_CLASS.update({f: "D" for fs in _DET.values() for f in fs if f} | {"an": "D"})
_CLASS.update({a: "A" for a in _ADJ.values()})


def _trees_outside_readings(sentences):
    """Group generated sentences by their words with nouns, determiners and adjectives replaced by their
    class (attachment rules never depend on them; "of" and every other word is kept): every tree seen for
    a group must be a reading of its first sentence. Returns the number of groups where one is not."""
    seen, first = defaultdict(set), {}
    for s in sentences:
        key = tuple(_CLASS.get(w, w) for w in english.realise(s))
        seen[key].add(linearise(s))
        first.setdefault(key, s)
    return sum(not trees <= {r.tree for r in pa.readings(first[k])} for k, trees in seen.items() if len(trees) > 1)


def test_trees_the_generator_draws_for_the_same_words_are_readings():
    sentences = _sample(4000, 6, 11, 11)
    assert _trees_outside_readings(sentences) == 0
    original = pa._Tree.candidates

    def no_main_hosts(self, j):  # planted bug: a PP never moves onto a main clause
        return [k for k in original(self, j) if self.kind[k] != "main" or k == self.host_of(self.pps[j])]

    pa._Tree.candidates = no_main_hosts
    try:
        assert _trees_outside_readings(sentences) > 0
    finally:
        pa._Tree.candidates = original


MODEL = pa.estimate_attachment_model(100, seed=5)


@pytest.mark.numeric
def test_ceiling_is_at_most_one_and_one_without_ambiguity():
    amb = [s for s in SHORT if len(pa.readings(s)) > 1][:40]
    plain = [s for s in SHORT if len(pa.readings(s)) == 1][:40]
    sc = pa.ceiling(amb, MODEL)
    assert 0.5 < sc.ceiling < 1 and 0.5 < sc.realised_f1 < 1 and sc.ambiguous == len(amb)
    assert pa.ceiling(plain, MODEL).ceiling == 1.0 == pa.ceiling(plain, MODEL).realised_f1
    assert pa.ceiling([_lesson_example()], MODEL).ceiling < 1

    original = pa.readings
    pa.readings = _moves_any_pp  # planted bug: counts ambiguity that is not there
    try:
        assert pa.ceiling(plain, MODEL).ceiling < 1.0
    finally:
        pa.readings = original

    original_choice = pa.bayes_choice

    def unweighted(rs, probs):  # planted bug: expected matches not weighted by the probabilities
        return 0, float(sum(pa._matched(rs[0].tree, q.tree) for q in rs))

    pa.bayes_choice = unweighted
    try:
        assert pa.ceiling(amb, MODEL).ceiling > 1.0
    finally:
        pa.bayes_choice = original_choice


@pytest.mark.numeric
def test_reading_probabilities_and_the_attachment_model():
    for s in SHORT[:60]:
        probs = pa.reading_probabilities(pa.readings(s), MODEL, "11-20")
        assert sum(probs) == pytest.approx(1.0) and all(p > 0 for p in probs)
    for (_, kinds, of), counts in MODEL.counts.items():
        assert not of or all(kinds[i] == "np" for i in counts), "'of' went on a clause"
    (b, kinds, of), _ = max(MODEL.counts.items(), key=lambda kv: (len(kv[0][1]), sum(kv[1].values())))
    assert len(kinds) > 1 and sum(MODEL.prob(b, kinds, of, i) for i in range(len(kinds))) == pytest.approx(1.0)
    assert MODEL.prob("31-40", ("np",) + ("rel",) * 6, False, 0) == pytest.approx(1 / 7)  # never seen: uniform


def test_blind_f1_is_at_least_the_standard_f1():
    trees = [[r.tree for r in pa.readings(s)] for s in SHORT[:80]]
    golds = [linearise(s) for s in SHORT[:80]]
    other = [rs[-1] for rs in trees]  # a reading that is not the gold one where there are several
    assert pa.blind_f1(other, trees)["f1"] == 1.0 > bracket_f1(other, golds).f1
    shifted = golds[1:] + golds[:1]  # wrong trees: blind F1 still >= standard F1
    assert pa.blind_f1(shifted, trees)["f1"] >= round(bracket_f1(shifted, golds).f1, 4)
    with pytest.raises(ValueError, match="as many"):
        pa.blind_f1(other[:3], trees)

    def worst_reading_f1(predicted, trees):  # planted bug: min instead of max over the readings
        m = sum(
            min(sum((bracket_spans(h)[0] & bracket_spans(r)[0]).values()) for r in rs)
            for h, rs in zip(predicted, trees, strict=True)
        )
        n = sum(
            sum(bracket_spans(h)[0].values()) + sum(bracket_spans(rs[0])[0].values())
            for h, rs in zip(predicted, trees, strict=True)
        )
        return 2 * m / n

    assert worst_reading_f1(other, trees) < 1.0


def test_test_sentences_are_the_parse_test_split():
    got = pa.parse_test_sentences(per_bucket=15)
    assert [p for p, _ in got] == make_parse_test_split(per_bucket=15)
    assert all(linearise(s) == p.tgt for p, s in got)


@pytest.mark.numeric
def test_the_fitted_loglinear_model_raises_the_conditional_likelihood():
    fitted = pa.estimate_attachment_model(60, seed=6, fit=True, buckets=((11, 20),))
    assert fitted.weights
    rng = random.Random("attnlab.parse_ambiguity/6")  # the very sentences the fit saw
    sample = [_realised(g.build(rng, 11, 20, french.RESTRICTIONS)) for _ in range(60)]

    def loglik(model):
        total = 0.0
        for s in sample:
            rs = pa.readings(s)
            total += math.log(pa.reading_probabilities(rs, model, "11-20")[0])
        return total

    product = pa.AttachmentModel(counts=fitted.counts, sentences=fitted.sentences)
    assert loglik(fitted) >= loglik(product) - 1e-9
    assert all(sum(pa.reading_probabilities(pa.readings(s), fitted, "11-20")) == pytest.approx(1) for s in sample)


def test_the_lesson_verdict_never_weakens_a_reachable_target():
    summary = {
        "by_bucket": {"31-40": {"ceiling_best": 0.93, "best_parser_f1": 0.92, "ambiguous_share": 0.66}},
        "runs": {f"r{k}": {"31-40": {"f1": 0.87 + k / 100, "f1_blind": 0.95}} for k in range(3)},
    }
    row = ppics.ceiling_rows(summary)["31-40"]
    assert row["f1"] == pytest.approx(0.88) and row["f1_sd"] == pytest.approx(0.01) and row["n"] == 3
    # a target above the ceiling gets no verdict, but the F1 reached and the gap it leaves
    text = ppics.target_verdict(row, 0.95)
    assert text.startswith("F1 0.880 on standard F1") and "above the estimated ceiling 0.930" in text
    assert "explains 29%" in text and "own errors the other 0.050" in text  # (0.95 - 0.93) / (0.95 - 0.88)
    assert " met" not in text
    # a target the ceiling allows gets its verdict, NOT met included
    reachable = ppics.target_verdict({**row, "ceiling": 0.97}, 0.95)
    assert reachable.startswith("target F1 >= 0.95: NOT met on standard F1 (0.880)") and "below the estimated" in reachable
    assert ppics.target_verdict({**row, "f1": 0.96, "ceiling": 0.97}, 0.95).startswith("target F1 >= 0.95: met on")


@pytest.mark.numeric
def test_majority_brackets_never_cross_and_score_at_most_one():
    amb = [s for s in SHORT if len(pa.readings(s)) > 2][:15]
    assert amb
    for s in amb:
        rs = pa.readings(s)
        probs = pa.reading_probabilities(rs, MODEL, "11-20")
        spans = [Span(a, b, lab) for lab, a, b in pa.majority_brackets(rs, probs)]
        spans_to_tokens(spans, s.i_end + 1)  # raises on crossing spans
    sc = pa.ceiling(amb, MODEL)
    assert 0.5 < sc.majority_ceiling <= 1 and 0.5 < sc.majority_realised_f1 <= 1
    # planted bug: every span of every reading (threshold 0) -- crossing brackets that no tree can write
    with pytest.raises(ValueError, match="cross"):
        for s in amb:
            rs = pa.readings(s)
            spans = {sp for r in rs for sp in bracket_spans(r.tree)[0]}
            spans_to_tokens([Span(a, b, lab) for lab, a, b in spans], s.i_end + 1)
