"""Parsing as translation (lesson 10): the grammar's derivation trees, linearised, and bracketing F1.

The course's English sentences are generated from abstract trees (:mod:`attnlab.data.corpus.grammar`);
the English realiser writes every word's position into its tree, so each constituent's span of
English tokens is known exactly. :func:`constituents` reads those spans back, :func:`linearise`
writes them as a token sequence with labelled brackets, as Vinyals et al. (2015, "Grammar as a
Foreign Language") do::

    the dog sees a cat .   ->   (S (NP XX XX )NP (VP XX (NP XX XX )NP )VP XX )S

Labels (Penn-Treebank-like): ``S`` (the sentence; and each clause of a coordinated sentence),
``NP``, ``VP``, ``PP`` (also the "to" phrase), ``SBAR`` (a relative clause, from "that"). Like
Vinyals et al. every word -- their POS tags -- is normalised to ``XX``: the target says where
phrases begin and end, never which words they hold. Conjunctions and the final "." sit directly
in the sentence's ``S``.

:func:`make_parse_splits` draws the train / valid / test splits of the English->French corpus
(:func:`attnlab.data.corpus.make_splits`, same seeds: the very same English sentences, in the same
order) with the linearised tree as the target; the course's corpus files and models are untouched.

Scoring (:func:`bracket_spans`, :func:`bracket_f1`) follows EVALB: a tree is the multiset of its
labelled spans ``(label, first word, last word)``; precision = matched / predicted spans, recall =
matched / gold spans, F1 their harmonic mean, summed over a corpus. Two departures from EVALB's
usual parameter file: punctuation counts as a word (the "." is inside the top ``S``), and a
prediction whose word count differs from the gold one is scored, not refused (its shifted spans
simply fail to match; :class:`BracketScore` counts those sentences). A malformed prediction is
repaired as Vinyals et al. do with their rare invalid outputs, by adding or dropping brackets: a
closing bracket with no open bracket of its label is dropped, a closing bracket that skips open
ones closes them too, brackets still open at the end close after the last word, and spans without
a word are dropped.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.core.checks import check_int
from attnlab.data.corpus import english, french
from attnlab.data.corpus import grammar as g
from attnlab.data.corpus.splits import BUCKETS, Pair, Splits, _check_buckets, _draw

__all__ = [
    "PARSE_VERSION",
    "LABELS",
    "WORD",
    "Span",
    "constituents",
    "linearise",
    "spans_to_tokens",
    "bracket_spans",
    "BracketScore",
    "bracket_f1",
    "closing_brackets",
    "parse_pair",
    "make_parse_splits",
    "make_parse_test_split",
]

PARSE_VERSION = "synth-enparse-1"  # the English->French corpus's sources with their trees; checkpoints key on it
LABELS = ("S", "SBAR", "NP", "VP", "PP")
WORD = "XX"  # every word (its POS tag) normalised, as Vinyals et al. (2015)


@dataclass(frozen=True, order=True)
class Span:
    """A labelled constituent over English tokens ``first`` .. ``last`` (both inclusive, 0-based)."""

    first: int
    last: int
    label: str


def _at(node, *slots: str) -> list[int]:
    """The English positions the realiser wrote into ``node``'s ``slots`` (unset slots are skipped)."""
    return [i for i in (getattr(node, name, None) for name in slots) if i is not None]


def _np_spans(np: g.NounPhrase, out: list) -> tuple[int, int]:
    lo = hi = np.i_head
    for i in _at(np, "i_det", "i_pre", "i_post") if np.pron is None else ():
        lo = min(lo, i)
    if np.pron is None and np.pp is not None:
        hi = max(hi, _pp_spans(np.pp[2], np.pp[1], out)[1])
    if np.pron is None and np.rel is not None:
        hi = max(hi, _clause_spans(np.rel, out, "SBAR")[1])
    out.append(Span(lo, hi, "NP"))
    return lo, hi


def _pp_spans(first: int, np: g.NounPhrase, out: list) -> tuple[int, int]:
    _, hi = _np_spans(np, out)
    out.append(Span(first, hi, "PP"))
    return first, hi


def _clause_spans(c: g.Clause, out: list, label: str | None) -> tuple[int, int]:
    """The clause's spans; ``label``: "S", "SBAR" or None (the clause is the sentence itself)."""
    vp = _at(c, "i_do", "i_not", "i_verb", "i_adv", "i_pred")
    if c.obj is not None:
        vp.extend(_np_spans(c.obj, out))
    if c.to is not None:
        vp.extend(_pp_spans(c.i_to, c.to, out))
    if c.pp is not None:
        vp.extend(_pp_spans(c.pp[2], c.pp[1], out))
    out.append(Span(min(vp), max(vp), "VP"))
    lo, hi = min(vp), max(vp)
    if c.gap != 1:
        lo = min(lo, _np_spans(c.subj, out)[0])
    if c.gap:
        lo = c.i_that
    if label is not None:
        out.append(Span(lo, hi, label))
    return lo, hi


def constituents(s: g.Sentence, n_tokens: int | None = None) -> tuple[Span, ...]:
    """The labelled spans of a realised sentence (:func:`attnlab.data.corpus.english.realise` must have run).

    Args:
        s: an abstract sentence, realised in English.
        n_tokens: its number of English tokens (default: ``s.i_end + 1``).

    Returns:
        The spans sorted by first word, then widest first (a parent before its children).
    """
    if getattr(s, "i_end", None) is None:
        raise ValueError("s must be realised in English first (english.realise(s)); its positions are unset")
    n = s.i_end + 1 if n_tokens is None else n_tokens
    out: list[Span] = [Span(0, n - 1, "S")]
    several = len(s.clauses) > 1
    for c in s.clauses:
        _clause_spans(c, out, "S" if several else None)
    return tuple(sorted(out, key=lambda sp: (sp.first, -sp.last, _DEPTH[sp.label])))


_DEPTH = {"S": 0, "SBAR": 1, "NP": 2, "VP": 2, "PP": 2}


def spans_to_tokens(spans: Sequence[Span], n_words: int, words: Sequence[str] | None = None) -> tuple[str, ...]:
    """Write properly nested spans over ``n_words`` words as a bracketed token sequence.

    Args:
        spans: the constituents (any order; same-extent spans open in the order given).
        n_words: the sentence length.
        words: the tokens to write for the words (default: :data:`WORD` for every one).

    Raises:
        ValueError: a span outside the sentence, or two spans that cross.
    """
    check_int("n_words", n_words, minimum=1)
    if words is not None and len(words) != n_words:
        raise ValueError(f"words must have n_words={n_words} entries, got {len(words)}")
    order = sorted(range(len(spans)), key=lambda k: (spans[k].first, -spans[k].last, k))
    out: list[str] = []
    stack: list[Span] = []
    nxt = 0
    for p in range(n_words):
        while stack and stack[-1].last < p:
            out.append(")" + stack.pop().label)
        while nxt < len(order) and spans[order[nxt]].first == p:
            sp = spans[order[nxt]]
            if not 0 <= sp.first <= sp.last < n_words:
                raise ValueError(f"span {sp} lies outside a sentence of n_words={n_words} words")
            if stack and sp.last > stack[-1].last:
                raise ValueError(f"spans {stack[-1]} and {sp} cross")
            out.append("(" + sp.label)
            stack.append(sp)
            nxt += 1
        out.append(WORD if words is None else words[p])
    if nxt < len(order):
        raise ValueError(f"span {spans[order[nxt]]} lies outside a sentence of n_words={n_words} words")
    out.extend(")" + sp.label for sp in reversed(stack))
    return tuple(out)


def linearise(s: g.Sentence, words: Sequence[str] | None = None) -> tuple[str, ...]:
    """The linearised tree of a realised sentence: ``("(S", "(NP", "XX", ..., ")S")``.

    Args:
        s: an abstract sentence, realised in English.
        words: write these tokens for the words instead of ``XX`` (e.g. the English ones, to read it).
    """
    spans = constituents(s)
    return spans_to_tokens(spans, s.i_end + 1, words)


def bracket_spans(tokens: Sequence[str]) -> tuple[Counter, int, bool]:
    """Read a (possibly malformed) bracketed sequence back into labelled spans.

    Every token that is not a bracket is a word. Repairs (see the module docstring): unmatched
    closing brackets are dropped, a closing bracket closes the open ones above its own, brackets
    left open close after the last word, spans with no word are dropped.

    Args:
        tokens: e.g. ``["(S", "(NP", "XX", ")NP", "XX", ")S"]``.

    Returns:
        ``(spans, n_words, repaired)``: a ``Counter`` of ``(label, first, last)``, the number of
        words, and whether any repair was needed.
    """
    if isinstance(tokens, str):
        raise TypeError("tokens must be a sequence of tokens, got a str (split it first)")
    spans: Counter = Counter()
    stack: list[tuple[str, int]] = []
    pos, repaired = 0, False

    def close(label: str, first: int) -> None:
        nonlocal repaired
        if pos > first:
            spans[(label, first, pos - 1)] += 1
        else:
            repaired = True

    for tok in tokens:
        if len(tok) > 1 and tok[0] == "(":
            stack.append((tok[1:], pos))
        elif len(tok) > 1 and tok[0] == ")":
            label = tok[1:]
            depth = next((k for k in range(len(stack) - 1, -1, -1) if stack[k][0] == label), None)
            if depth is None:
                repaired = True
                continue
            if depth != len(stack) - 1:
                repaired = True
            while len(stack) > depth:
                close(*stack.pop())
        else:
            pos += 1
    if stack:
        repaired = True
    while stack:
        close(*stack.pop())
    return spans, pos, repaired


@dataclass(frozen=True)
class BracketScore:
    """Labelled bracketing scores summed over a corpus (EVALB-style).

    Attributes:
        matched: spans in both (as multisets). predicted, gold: spans in each.
        sentences: sentences scored. exact: sentences whose span multisets are equal.
        repaired: predictions that needed a bracket added or dropped. length_mismatch: predictions
            whose word count differs from the gold one.
    """

    matched: int
    predicted: int
    gold: int
    sentences: int
    exact: int
    repaired: int
    length_mismatch: int

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        """The counts and the three scores (rounded to 4 digits) for a results file."""
        return {
            "f1": round(self.f1, 4),
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "exact": round(self.exact / self.sentences, 4) if self.sentences else 0.0,
            "sentences": self.sentences,
            "repaired": self.repaired,
            "length_mismatch": self.length_mismatch,
        }


def bracket_f1(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> BracketScore:
    """Labelled bracketing precision, recall and F1 of predicted trees against gold ones.

    Args:
        predicted: one bracketed token sequence per sentence (a model's output; may be malformed).
        gold: the gold sequences, same order and number.

    Raises:
        ValueError: the two lists differ in length, or a gold tree is malformed.
    """
    if len(predicted) != len(gold):
        raise ValueError(f"predicted and gold must hold as many trees, got {len(predicted)} and {len(gold)}")
    matched = n_pred = n_gold = exact = repaired = mismatch = 0
    for k, (hyp, ref) in enumerate(zip(predicted, gold, strict=True)):
        g_spans, g_words, g_bad = bracket_spans(ref)
        if g_bad:
            raise ValueError(f"gold tree {k} is malformed: {' '.join(ref)}")
        p_spans, p_words, p_bad = bracket_spans(hyp)
        matched += sum((p_spans & g_spans).values())
        n_pred += sum(p_spans.values())
        n_gold += sum(g_spans.values())
        exact += p_spans == g_spans
        repaired += p_bad
        mismatch += p_words != g_words
    return BracketScore(matched, n_pred, n_gold, len(gold), exact, repaired, mismatch)


def closing_brackets(tokens: Sequence[str]) -> list[tuple[int, str, int]]:
    """Every closing bracket of a well-formed sequence with the last word of its span.

    Returns:
        ``(index in tokens, label, last word)`` per closing bracket, in order.
    """
    out, pos = [], 0
    for t, tok in enumerate(tokens):
        if len(tok) > 1 and tok[0] == ")":
            out.append((t, tok[1:], pos - 1))
        elif not (len(tok) > 1 and tok[0] == "("):
            pos += 1
    return out


# --------------------------------------------------------------------------------------------
# Splits: the English->French corpus's English sentences with their trees as the target
# --------------------------------------------------------------------------------------------


def parse_pair(rng: random.Random, lo: int, hi: int) -> Pair:
    """One English sentence of ``lo``-``hi`` tokens and its linearised tree (draws as the English->French corpus)."""
    s = g.build(rng, lo, hi, french.RESTRICTIONS)
    src = english.realise(s)
    return Pair(src, linearise(s))


def make_parse_test_split(*, seed: int = 0, per_bucket: int = 500, buckets=BUCKETS) -> list[Pair]:
    """The test split of :func:`make_parse_splits` alone (cheap: no training sentences are drawn)."""
    check_int("per_bucket", per_bucket, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    rng = random.Random(f"attnlab.data/test/{seed}")
    held: set = set()
    out: list[Pair] = []
    for b in bs:
        part = _draw(rng, per_bucket, (b,), held, True, "test", parse_pair)
        held.update(p.src for p in part)
        out.extend(part)
    return out


def make_parse_splits(
    *, n_train: int = 100_000, n_valid: int = 2_000, test_per_bucket: int = 500, seed: int = 0, buckets=BUCKETS
) -> Splits:
    """Train / valid / test splits of English -> linearised tree.

    Same draws as :func:`attnlab.data.corpus.make_splits` with ``target="fr"``: for the same
    arguments the sources are those of the English->French splits, pair for pair.

    Args:
        n_train, n_valid, test_per_bucket, seed, buckets: as :func:`attnlab.data.corpus.make_splits`.
    """
    check_int("n_train", n_train, minimum=0)
    check_int("n_valid", n_valid, minimum=0)
    bs = _check_buckets(buckets)
    test = make_parse_test_split(seed=seed, per_bucket=test_per_bucket, buckets=bs)
    held = {p.src for p in test}
    valid = _draw(random.Random(f"attnlab.data/valid/{seed}"), n_valid, bs, held, True, "valid", parse_pair)
    held.update(p.src for p in valid)
    train = _draw(random.Random(f"attnlab.data/train/{seed}"), n_train, bs, held, False, "train", parse_pair)
    return Splits(train=train, valid=valid, test=test)
