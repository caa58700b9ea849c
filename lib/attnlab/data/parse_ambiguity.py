"""How far below F1 = 1 a perfect parser of lesson 10's grammar must stay: readings and a ceiling.

The grammar (:mod:`attnlab.data.corpus.grammar`) is ambiguous: a prepositional phrase (PP) goes on
a noun phrase (``x_np_pp``: right after the head noun, only on an NP with no PP and no relative
clause) or on a clause, main or relative (``x_vp_pp``: at the very end of the clause, at most one
per clause; never "of"), and the English realiser can write both with the same words:
"she sees the dog in the garden ." The *readings* of a sentence are all the trees the generator
could have drawn with exactly its words.

Which moves keep the words (derived from the realiser, checked by re-realising every reading):
a PP always ends its host's span. Take a PP out (words ``a..b``); put it back on a node X that, in
the tree without it, ends at word ``a - 1`` and takes a PP (a noun NP with no PP and no relative
clause -- its last word is then its noun --, or a clause with no PP; not a clause for "of"). The
realiser then writes the PP right after word ``a - 1``: the same words. Those X are the nodes
ending at ``a - 1`` outside the PP and the nodes that hold the PP and end at ``b``. :func:`readings`
closes the gold tree under such moves (PPs inside a moved PP move with it); the tests compare it
with a brute force over every assignment of hosts and with the trees the generator draws for a
same word string. Relative clauses do not float: one goes right after its noun, and an NP never
has both a PP and a relative clause, so the noun before "that" is its only host. Adverbs, "to"
phrases, negation and coordination have fixed places.

All readings have the same number of spans (a move changes where spans end, not how many there
are), so a parser that outputs a reading has precision = recall, and the corpus F1 is the matched
spans over the gold spans: the best expected F1 among parsers that write a tree of the grammar picks,
sentence by sentence, the reading with the most expected matched spans under P(reading | words)
(:func:`bayes_choice`). A parser may also leave uncertain brackets out: :func:`majority_brackets`
keeps the spans more likely than not (they never cross), which trades recall for precision;
:func:`ceiling` scores both.

P(reading | words) is not computed exactly (the generator's probability of a tree sums over its
orders of expansion and budgets). :class:`AttachmentModel` estimates it from generated sentences:
each PP's host given its *configuration* -- the kinds of the hosts it could take in that tree
(``"np"``, ``"rel"`` a relative clause, ``"main"`` a main clause; innermost first), whether the
preposition is "of" and the length bucket -- counted over a large sample; a reading's probability
is taken proportional to the product of its PPs' conditional frequencies. That is the assumption
behind :func:`ceiling`'s figure; its ``realised`` figure (the Bayes choice scored against the gold
trees) is what one concrete parser that sees only the words gets, a lower bound on the best.
Measured on 3,000 fresh generated sentences of 31-40 tokens, the product model expects about 0.01
more F1 for its tree choice than that choice gets (it is somewhat overconfident: PPs interact); a
log-linear fit of the same features (``fit=True``) or the sentence's numbers of noun phrases and
clauses (``context=True``) move the figures by a few thousandths. The majority brackets are better
calibrated (expected and realised F1 within 0.002 on the test split's 31-40 bucket).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy
from scipy.optimize import minimize

from attnlab.core.checks import check_int
from attnlab.data.corpus import english, french
from attnlab.data.corpus import grammar as g
from attnlab.data.corpus.splits import BUCKETS, Pair, _check_buckets, _draw, bucket_name
from attnlab.data.parsing import bracket_spans, linearise

__all__ = [
    "MAX_READINGS",
    "Reading",
    "pp_hosts",
    "readings",
    "realise_hosts",
    "brute_force_readings",
    "attachment_configurations",
    "AttachmentModel",
    "sentence_context",
    "estimate_attachment_model",
    "reading_probabilities",
    "bayes_choice",
    "CeilingScore",
    "majority_brackets",
    "ceiling",
    "blind_f1",
    "parse_test_sentences",
]

MAX_READINGS = 20_000  # a safety stop for the closure (the test split's sentences have far fewer)


@dataclass(frozen=True)
class Reading:
    """One tree of a sentence's words.

    Attributes:
        tree: its linearised tree (words as ``XX``), as :func:`attnlab.data.parsing.linearise`.
        hosts: per PP (in the gold tree's order) the index of its host in the sentence's host list.
        kinds: per PP ``(kinds of its possible hosts innermost first, index of the one it takes,
            whether the preposition is "of")``.
    """

    tree: tuple[str, ...]
    hosts: tuple[int, ...]
    kinds: tuple = field(compare=False)


class _Tree:
    """A realised sentence's PPs and the nodes that can host one (noun NPs, clauses)."""

    def __init__(self, s: g.Sentence):
        self.s = s
        self.hosts: list = []  # NounPhrase or Clause objects
        self.kind: list[str] = []  # "np", "rel", "main"
        self.pps: list[list] = []  # the [prep, NounPhrase, start] lists
        self.inside: list[set[int]] = []  # per PP: ids of the nodes in its subtree (current attachments)
        for c in s.clauses:
            self._clause(c, "main")
        self.gold = tuple(self.host_of(p) for p in self.pps)

    def _np(self, np: g.NounPhrase) -> None:
        if np.pron is not None:
            return
        self.hosts.append(np)
        self.kind.append("np")
        if np.pp is not None:
            self.pps.append(np.pp)
            self._np(np.pp[1])
        if np.rel is not None:
            self._clause(np.rel, "rel")

    def _clause(self, c: g.Clause, kind: str) -> None:
        self.hosts.append(c)
        self.kind.append(kind)
        for np in (c.subj if c.gap != 1 else None, c.obj, c.to):
            if np is not None:
                self._np(np)
        if c.pp is not None:
            self.pps.append(c.pp)
            self._np(c.pp[1])

    def host_of(self, pp: list) -> int:
        return next(k for k, h in enumerate(self.hosts) if h.pp is pp)

    def apply(self, hosts: Sequence[int]) -> tuple[str, ...]:
        """Attach every PP to ``hosts[k]``, realise; returns the English words."""
        for h in self.hosts:
            h.pp = None
        for pp, k in zip(self.pps, hosts, strict=True):
            self.hosts[k].pp = pp
        return english.realise(self.s)

    def extents(self) -> dict[int, tuple[int, int]]:
        """``id(node) -> (first, last)`` word of every host and PP list (after :meth:`apply`)."""
        out: dict[int, tuple[int, int]] = {}

        def np_ext(np) -> tuple[int, int]:
            if np.pron is not None:
                return np.i_head, np.i_head
            lo, hi = np.i_det, np.i_head
            if np.pp is not None:
                b = np_ext(np.pp[1])[1]
                out[id(np.pp)] = (np.pp[2], b)
                hi = b
            if np.rel is not None:
                hi = clause_ext(np.rel)[1]
            out[id(np)] = (lo, hi)
            return lo, hi

        def clause_ext(c) -> tuple[int, int]:
            slots = ("i_that", "i_do", "i_not", "i_verb", "i_adv", "i_pred", "i_to")
            pos = [i for i in (getattr(c, n, None) for n in slots) if i is not None]
            for np in (c.subj if c.gap != 1 else None, c.obj, c.to):
                if np is not None:
                    pos.extend(np_ext(np))
            if c.pp is not None:
                b = np_ext(c.pp[1])[1]
                out[id(c.pp)] = (c.pp[2], b)
                pos.append(b)
            out[id(c)] = (min(pos), max(pos))
            return out[id(c)]

        for c in self.s.clauses:
            clause_ext(c)
        return out

    def subtree(self, pp: list) -> set[int]:
        """ids of the nodes inside ``pp`` (with the current attachments)."""
        ids: set[int] = set()

        def np_walk(np) -> None:
            ids.add(id(np))
            if np.pron is None and np.pp is not None:
                np_walk(np.pp[1])
            if np.pron is None and np.rel is not None:
                clause_walk(np.rel)

        def clause_walk(c) -> None:
            ids.add(id(c))
            for np in (c.subj if c.gap != 1 else None, c.obj, c.to):
                if np is not None:
                    np_walk(np)
            if c.pp is not None:
                np_walk(c.pp[1])

        np_walk(pp[1])
        return ids

    def takes(self, k: int, pp: list) -> bool:
        """Host ``k`` could take ``pp`` by the generator's rules (ignoring the one it holds now)."""
        h = self.hosts[k]
        if self.kind[k] == "np":
            return (h.pp is None or h.pp is pp) and h.rel is None
        return (h.pp is None or h.pp is pp) and pp[0].key != "of"

    def candidates(self, j: int) -> list[int]:
        """Hosts PP ``j`` can move to keeping the words (current attachments), innermost first."""
        pp = self.pps[j]
        ext = self.extents()
        a, b = ext[id(pp)]
        inside = self.subtree(pp)
        out = []
        for k, h in enumerate(self.hosts):
            if id(h) in inside or not self.takes(k, pp):
                continue
            lo, hi = ext[id(h)]
            if h.pp is pp:  # its current host: ends at a - 1 once the PP is out
                lo, hi = lo, a - 1
            elif lo < a and hi == b:  # holds the PP at its right edge
                hi = a - 1
            if hi == a - 1:
                out.append((-lo, k))
        return [k for _, k in sorted(out)]  # innermost (latest start) first


def pp_hosts(s: g.Sentence) -> list[tuple[str, str]]:
    """Each PP of a realised sentence as ``(preposition, kind of its host)``, in tree order (for reading a tree)."""
    t = _Tree(s)
    return [(pp[0].key, t.kind[k]) for pp, k in zip(t.pps, t.gold, strict=True)]


def realise_hosts(s: g.Sentence, hosts: Sequence[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The English words and linearised tree of ``s`` with its PPs on ``hosts`` (see :class:`Reading`).

    ``s`` is left as it was. Raises ValueError if ``hosts`` does not give one host per PP, or puts two
    PPs on one host.
    """
    t = _Tree(s)
    if len(hosts) != len(t.pps) or len(set(hosts)) != len(hosts) or not all(0 <= k < len(t.hosts) for k in hosts):
        raise ValueError(f"hosts must give {len(t.pps)} distinct hosts of 0..{len(t.hosts) - 1}, got {tuple(hosts)}")
    try:
        words = t.apply(hosts)
        return words, linearise(s)
    finally:
        t.apply(t.gold)


def _closure(s: g.Sentence) -> tuple[_Tree, dict[tuple[int, ...], tuple], tuple[str, ...]]:
    if getattr(s, "i_end", None) is None:
        raise ValueError("s must be realised in English first (english.realise(s)); its positions are unset")
    t = _Tree(s)
    words = english.realise(s)
    seen: dict[tuple[int, ...], tuple] = {}
    todo = [t.gold]
    try:
        while todo:
            state = todo.pop()
            if state in seen:
                continue
            if len(seen) >= MAX_READINGS:
                raise RuntimeError(f"more than {MAX_READINGS} readings of {' '.join(words)}")
            if t.apply(state) != words:  # pragma: no cover - the derivation above says it cannot happen
                raise AssertionError(f"a re-attachment changed the words of {' '.join(words)}")
            kinds = []
            for j in range(len(t.pps)):
                cands = t.candidates(j)
                kinds.append((tuple(t.kind[k] for k in cands), cands.index(state[j]), t.pps[j][0].key == "of"))
                for k in cands:
                    if k != state[j] and t.hosts[k].pp is None:
                        todo.append(state[:j] + (k,) + state[j + 1 :])
            seen[state] = (linearise(s), tuple(kinds))
    finally:
        t.apply(t.gold)
    return t, seen, words


def readings(s: g.Sentence) -> list[Reading]:
    """Every tree of the grammar with exactly ``s``'s English words, the gold one first.

    Args:
        s: an abstract sentence, realised in English (:func:`attnlab.data.corpus.english.realise`).
            It is left as it was (attachments and positions).

    Returns:
        The readings: the gold tree first, then the others in a fixed order.
    """
    t, seen, _ = _closure(s)
    out = [Reading(tree, st, kinds) for st, (tree, kinds) in seen.items()]
    out.sort(key=lambda r: (r.hosts != t.gold, r.hosts))
    return out


def _allowed(kind: str, host, pp: list) -> bool:
    """The generator's rules: an NP with a relative clause takes no PP, a clause never takes "of"."""
    return host.rel is None if kind == "np" else pp[0].key != "of"


def brute_force_readings(s: g.Sentence) -> set[tuple[str, ...]]:
    """The readings by brute force: every assignment of the PPs to hosts the generator allows, kept
    when it realises to the same words (exponential: for tests on short sentences)."""
    t = _Tree(s)
    words = english.realise(s)
    # a node's owner: the PP whose noun phrase holds it with every PP detached (-1: none)
    for h in t.hosts:
        h.pp = None
    owner = {}
    for j, pp in enumerate(t.pps):
        for nid in t.subtree(pp):
            owner[nid] = j
    out: set[tuple[str, ...]] = set()
    try:
        choices = []
        for pp in t.pps:
            own = {id(pp[1])} | t.subtree(pp)
            choices.append([k for k, h in enumerate(t.hosts) if id(h) not in own and _allowed(t.kind[k], h, pp)])

        def rec(j: int, state: tuple[int, ...]) -> None:
            if j == len(t.pps):
                # acyclic: following host -> owning PP -> its host ... must reach the top
                for start in range(len(state)):
                    cur, steps = start, 0
                    while cur != -1:
                        cur = owner.get(id(t.hosts[state[cur]]), -1)
                        steps += 1
                        if steps > len(state):
                            return
                if t.apply(state) == words:
                    out.add(linearise(s))
                return
            for k in choices[j]:
                if k not in state:
                    rec(j + 1, state + (k,))

        rec(0, ())
    finally:
        t.apply(t.gold)
        english.realise(s)
    return out


def attachment_configurations(s: g.Sentence) -> list[tuple[tuple, int]]:
    """Each PP of the gold tree as ``((host kinds innermost first, is "of"), index of its host)``."""
    t, seen, _ = _closure(s)
    return [((kinds, of), idx) for kinds, idx, of in seen[t.gold][1]]


@dataclass
class AttachmentModel:
    """Empirical P(host | configuration, length bucket) of the generator's PPs.

    Attributes:
        counts: ``{(bucket, kinds, is_of): Counter(index of the host taken)}`` over the sample.
        fine: the same keyed ``(bucket, context, kinds, is_of)``, ``context`` the sentence's
            :func:`sentence_context` (used when ``context`` is True).
        sentences: per bucket, the number of generated sentences counted.
        context: condition on the sentence's numbers of noun phrases and clauses as well.
        weights: when fitted (``estimate_attachment_model(fit=True)``), a log-linear model:
            P(reading | words) proportional to exp(sum of the weights of its PPs' (configuration,
            host) features); features never seen fall back to the log of :meth:`prob`.
    """

    counts: dict = field(default_factory=lambda: defaultdict(Counter))
    fine: dict = field(default_factory=lambda: defaultdict(Counter))
    sentences: Counter = field(default_factory=Counter)
    context: bool = False
    weights: dict = field(default_factory=dict)

    def prob(self, bucket: str, kinds: tuple, of: bool, idx: int, ctx: tuple | None = None) -> float:
        """P(host ``idx`` | configuration): add-one smoothed (never seen: uniform); with ``context``,
        the counts of the same ``ctx`` shrunk toward that (5 pseudo-counts)."""
        c = self.counts.get((bucket, kinds, of), Counter())
        base = (c[idx] + 1) / (sum(c.values()) + len(kinds))
        if not self.context or ctx is None:
            return base
        f = self.fine.get((bucket, ctx, kinds, of), Counter())
        return (f[idx] + 5 * base) / (sum(f.values()) + 5)

    def table(self, bucket: str) -> list[tuple[tuple, bool, int, list[int]]]:
        """Ambiguous configurations: ``(kinds, is_of, times seen, counts per host index)``, most seen first."""
        rows = [
            (kinds, of, sum(c.values()), [c[i] for i in range(len(kinds))])
            for (b, kinds, of), c in self.counts.items()
            if b == bucket and len(kinds) > 1
        ]
        return sorted(rows, key=lambda r: -r[2])


def sentence_context(s: g.Sentence) -> tuple[int, int]:
    """``(noun phrases, clauses)`` of a sentence: the same for all its readings (PPs only move)."""
    t = _Tree(s)
    n_np = t.kind.count("np")
    return n_np, len(t.kind) - n_np


def estimate_attachment_model(
    n_per_bucket: int = 20_000, *, seed: int = 1, buckets=BUCKETS, context: bool = False, fit: bool = False
) -> AttachmentModel:
    """Count every PP's host given its configuration in ``n_per_bucket`` generated sentences per bucket.

    The sentences are drawn as the parse corpus draws them (:func:`attnlab.data.corpus.grammar.build`
    with French's restrictions, a length uniform in the bucket's range) from
    ``random.Random(f"attnlab.parse_ambiguity/{seed}")`` -- a stream of its own, not the test split's.
    ``context``: the model conditions on :func:`sentence_context` too (see :class:`AttachmentModel`).
    ``fit``: also fit :attr:`AttachmentModel.weights`, a log-linear model of P(reading | words) with
    the same features, by maximum conditional likelihood of the gold reading among the readings of
    each ambiguous sample sentence (calibrated where the product of frequencies is not: PPs interact).
    """
    check_int("n_per_bucket", n_per_bucket, minimum=1)
    model = AttachmentModel(context=context)
    rng = random.Random(f"attnlab.parse_ambiguity/{seed}")
    data: list[list[list[tuple]]] = []  # per ambiguous sentence, per reading: its features
    for lo, hi in buckets:
        name = bucket_name(lo)
        for _ in range(n_per_bucket):
            s = g.build(rng, lo, hi, french.RESTRICTIONS)
            english.realise(s)
            rs = readings(s)
            ctx = sentence_context(s)
            for kinds, idx, of in rs[0].kinds:
                model.counts[(name, kinds, of)][idx] += 1
                model.fine[(name, ctx, kinds, of)][idx] += 1
            model.sentences[name] += 1
            if fit and len(rs) > 1:
                data.append([_features(r, name, ctx if context else None) for r in rs])
    if fit:
        model.weights = _fit_loglinear(data, model)
    return model


def _features(r: Reading, bucket: str, ctx: tuple | None) -> list[tuple]:
    return [(bucket, ctx, kinds, of, idx) for kinds, idx, of in r.kinds if len(kinds) > 1]


def _fit_loglinear(data: list[list[list[tuple]]], model: AttachmentModel, l2: float = 1.0) -> dict:
    """Weights maximising sum log P(gold reading | readings), P = softmax of summed weights, started at
    (and shrunk toward, ``l2``) the log of the product-of-frequencies model."""
    keys = sorted({f for sent in data for r in sent for f in r}, key=repr)
    index = {k: i for i, k in enumerate(keys)}
    theta0 = numpy.array([numpy.log(model.prob(b, kinds, of, idx, ctx)) for b, ctx, kinds, of, idx in keys])
    rows, cols, seg = [], [], []
    n_rows = 0
    for j, sent in enumerate(data):
        for r in sent:
            for f in r:
                rows.append(n_rows)
                cols.append(index[f])
            seg.append(j)
            n_rows += 1
    X = numpy.zeros((n_rows, len(keys)))
    numpy.add.at(X, (numpy.array(rows, dtype=int), numpy.array(cols, dtype=int)), 1.0)
    seg_a = numpy.array(seg)
    starts = numpy.flatnonzero(numpy.r_[True, seg_a[1:] != seg_a[:-1]])  # each sentence's gold row (its first)

    def loss(theta):
        z = X @ theta
        m = numpy.maximum.reduceat(z, starts)
        e = numpy.exp(z - numpy.repeat(m, numpy.diff(numpy.r_[starts, n_rows])))
        tot = numpy.add.reduceat(e, starts)
        lse = m + numpy.log(tot)
        p = e / numpy.repeat(tot, numpy.diff(numpy.r_[starts, n_rows]))
        d = theta - theta0
        val = -(z[starts].sum() - lse.sum()) + l2 * d @ d
        grad = -(X[starts].sum(0) - p @ X) + 2 * l2 * d
        return val, grad

    res = minimize(loss, theta0, jac=True, method="L-BFGS-B")
    return {k: float(w) for k, w in zip(keys, res.x, strict=True)}


def _matched(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    return sum((bracket_spans(a)[0] & bracket_spans(b)[0]).values())


def reading_probabilities(
    rs: Sequence[Reading], model: AttachmentModel, bucket: str, ctx: tuple | None = None
) -> list[float]:
    """P(reading | words) under ``model``: proportional to the product of its PPs' host probabilities
    (or, for a fitted model, to exp of the sum of its features' weights).

    ``ctx``: the sentence's :func:`sentence_context` (for a model with ``context``)."""
    c = ctx if model.context else None
    logw = []
    for r in rs:
        total = 0.0
        for kinds, idx, of in r.kinds:
            if len(kinds) > 1:
                key = (bucket, c, kinds, of, idx)
                w = model.weights.get(key) if model.weights else None
                total += w if w is not None else math.log(model.prob(bucket, kinds, of, idx, ctx))
        logw.append(total)
    top = max(logw)
    w = [math.exp(x - top) for x in logw]
    z = sum(w)
    return [x / z for x in w]


def bayes_choice(rs: Sequence[Reading], probs: Sequence[float]) -> tuple[int, float]:
    """The reading with the most expected matched spans: ``(its index, expected matched spans)``."""
    best, best_e = 0, -1.0
    for i, r in enumerate(rs):
        e = sum(p * _matched(r.tree, q.tree) for q, p in zip(rs, probs, strict=True))
        if e > best_e + 1e-12:
            best, best_e = i, e
    return best, best_e


@dataclass(frozen=True)
class CeilingScore:
    """The best F1 on a set of sentences (see :func:`ceiling`).

    Attributes:
        sentences: sentences scored. ambiguous: those with more than one reading.
        readings: readings summed over the sentences.
        gold: gold spans. expected: expected matched spans of the Bayes choice under the model.
        realised: matched spans of the Bayes choice against the gold trees.
        majority_predicted, majority_expected, majority_realised: the same for the *majority
            brackets* (every span whose probability under the model is above 1/2, whichever reading
            holds it: a parser that may leave out uncertain brackets; such spans never cross).
    """

    sentences: int
    ambiguous: int
    readings: int
    gold: int
    expected: float
    realised: int
    majority_predicted: int = 0
    majority_expected: float = 0.0
    majority_realised: int = 0

    @property
    def ceiling(self) -> float:
        """The estimated best expected F1 of a parser that writes a tree of the grammar (precision = recall)."""
        return self.expected / self.gold if self.gold else 0.0

    @property
    def realised_f1(self) -> float:
        """F1 of the Bayes-choice parser on these gold trees (a parser that reads only the words)."""
        return self.realised / self.gold if self.gold else 0.0

    @property
    def majority_ceiling(self) -> float:
        """Expected F1 of the majority brackets (precision and recall differ: fewer brackets)."""
        n = self.majority_predicted + self.gold
        return 2 * self.majority_expected / n if n else 0.0

    @property
    def majority_realised_f1(self) -> float:
        """F1 of the majority brackets against the gold trees."""
        n = self.majority_predicted + self.gold
        return 2 * self.majority_realised / n if n else 0.0

    def as_dict(self) -> dict:
        return {
            "ceiling": round(self.ceiling, 4),
            "bayes_parser_f1": round(self.realised_f1, 4),
            "ceiling_majority_brackets": round(self.majority_ceiling, 4),
            "majority_brackets_f1": round(self.majority_realised_f1, 4),
            "ambiguous_share": round(self.ambiguous / self.sentences, 4) if self.sentences else 0.0,
            "mean_readings": round(self.readings / self.sentences, 3) if self.sentences else 0.0,
            "sentences": self.sentences,
            "gold_spans": self.gold,
        }


def majority_brackets(rs: Sequence[Reading], probs: Sequence[float]) -> Counter:
    """The spans whose probability (the summed probabilities of the readings holding them) is above 1/2.

    Two such spans never cross (some reading, a tree, holds both), so they can be written as a tree.
    """
    marg: Counter = Counter()
    for r, p in zip(rs, probs, strict=True):
        for sp in bracket_spans(r.tree)[0]:
            marg[sp] += p
    return Counter({sp: 1 for sp, q in marg.items() if q > 0.5})


def ceiling(sentences: Sequence[g.Sentence], model: AttachmentModel) -> CeilingScore:
    """The estimated best F1 any parser can reach on realised ``sentences`` (their gold trees).

    For each sentence: its :func:`readings`, their probabilities under ``model``
    (:func:`reading_probabilities`, the sentence's length bucket), the Bayes choice
    (:func:`bayes_choice`) and the :func:`majority_brackets`. A sentence with one reading counts all
    its spans as matched.
    """
    amb = n_read = gold = realised = maj_pred = maj_real = 0
    expected = maj_exp = 0.0
    for s in sentences:
        rs = readings(s)
        n = sum(bracket_spans(rs[0].tree)[0].values())
        gold += n
        n_read += len(rs)
        if len(rs) == 1:
            expected += n
            realised += n
            maj_pred += n
            maj_exp += n
            maj_real += n
            continue
        amb += 1
        probs = reading_probabilities(rs, model, bucket_name(s.i_end + 1), sentence_context(s))
        best, e = bayes_choice(rs, probs)
        expected += e
        realised += _matched(rs[best].tree, rs[0].tree)
        maj = majority_brackets(rs, probs)
        maj_pred += sum(maj.values())
        maj_exp += sum(p * sum((maj & bracket_spans(r.tree)[0]).values()) for r, p in zip(rs, probs, strict=True))
        maj_real += sum((maj & bracket_spans(rs[0].tree)[0]).values())
    return CeilingScore(len(sentences), amb, n_read, gold, expected, realised, maj_pred, maj_exp, maj_real)


def blind_f1(predicted: Sequence[Sequence[str]], trees: Sequence[Sequence[tuple[str, ...]]]) -> dict:
    """Attachment-blind F1: each prediction scored against its best-matching reading.

    Args:
        predicted: one bracketed token sequence per sentence (may be malformed, as in ``bracket_f1``).
        trees: per sentence its readings' linearised trees (the gold one among them).

    Returns:
        ``{"f1", "matched", "predicted", "gold", "sentences"}`` summed over the corpus.
    """
    if len(predicted) != len(trees):
        raise ValueError(f"predicted and trees must have as many entries, got {len(predicted)} and {len(trees)}")
    matched = n_pred = n_gold = 0
    for hyp, rs in zip(predicted, trees, strict=True):
        if not rs:
            raise ValueError("every sentence needs at least one reading (its gold tree)")
        h = bracket_spans(hyp)[0]
        spans = [bracket_spans(r)[0] for r in rs]
        matched += max(sum((h & sp).values()) for sp in spans)
        n_pred += sum(h.values())
        n_gold += sum(spans[0].values())
    f1 = 2 * matched / (n_pred + n_gold) if n_pred + n_gold else 0.0
    return {"f1": round(f1, 4), "matched": matched, "predicted": n_pred, "gold": n_gold, "sentences": len(trees)}


def parse_test_sentences(*, seed: int = 0, per_bucket: int = 500, buckets=BUCKETS) -> list[tuple[Pair, g.Sentence]]:
    """The pairs of :func:`attnlab.data.parsing.make_parse_test_split` with the abstract sentence of each.

    The same draws in the same order (the split is rebuilt, keeping the tree each pair came from).
    """
    check_int("per_bucket", per_bucket, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    trees: dict[int, g.Sentence] = {}

    def make(rng: random.Random, lo: int, hi: int) -> Pair:
        s = g.build(rng, lo, hi, french.RESTRICTIONS)
        p = Pair(english.realise(s), linearise(s))
        trees[id(p)] = s
        return p

    rng = random.Random(f"attnlab.data/test/{seed}")
    held: set = set()
    out: list[tuple[Pair, g.Sentence]] = []
    for b in bs:
        part = _draw(rng, per_bucket, (b,), held, True, "test", make)
        held.update(p.src for p in part)
        out.extend((p, trees[id(p)]) for p in part)
    return out
