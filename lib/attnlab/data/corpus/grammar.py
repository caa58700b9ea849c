"""The abstract sentences every language of the corpus is realised from: meanings and the builder.

This module knows *what* a sentence says, never how a language spells it. A sentence is a small
tree -- clauses, noun phrases, prepositional phrases, relative clauses -- whose leaves are
lexicon entries (a noun meaning "cat", a verb meaning "see"). The realisers
(:mod:`~attnlab.data.corpus.english`, :mod:`~attnlab.data.corpus.french`, :mod:`~attnlab.data.corpus.korean`)
turn one tree into tokens and alignments. Entries are named by an English gloss (``"cat"``,
``"in front of"``); the gloss is a key, the English realiser has its own table of forms.

The sentences
-------------
A sentence is 1-3 clauses joined by *and*/*but*/*because*. A clause is a subject (a noun phrase or
a pronoun he/she/they) and a verb phrase; present tense, singular or plural.

* Noun phrase: determiner, an optional "pre" adjective (small, big, ...) and "post" adjective
  (red, tired, ...; the two kinds sit on different sides of the noun in French), the noun, then
  at most one of a prepositional phrase and a relative clause (in "the cat near the girl that is
  happy" the clause could attach to either noun).
* Verb kinds: intransitive (sleep), transitive (see X), ditransitive (give X to Y), with a
  to-phrase (go to X), and the copula with a predicate adjective (is tired). Subjects of
  non-copular verbs are animate and "eat" takes food.
* Negation, frequency adverbs (often, always, ...) and manner adverbs (quickly, ...; only on
  intransitive and to-verbs), prepositional phrases on noun phrases and on clauses, relative
  clauses on the subject ("that sees the dog") or the object ("that the cat sees"), nestable.

Length control
--------------
Lengths are counted in **English tokens** (including the final "."): for each sentence the caller
picks a range, :class:`Builder` starts from a minimal clause and grows it by expansions whose
English cost is known in advance (an adjective +1, negation +2, a PP +3.., a relative clause +2..,
a coordinated clause +3..) until it reaches a target drawn inside the range. The costs below are
therefore English facts; :mod:`~attnlab.data.corpus.english` is tested to spell each entry with
exactly that many tokens.

Constraints inherited from the realisers
----------------------------------------
A few choices are restricted so that every language has one clean translation; they are part of
the grammar because changing them would change the sentences (and so every French pair):

* the object of a negated verb never takes a/some (French would need "pas de");
* after a preposition whose French form ends in "de" the determiner is never "some" (``no_some``);
* "sometimes"/"rarely" never modify a negated verb (odd English);
* :class:`Restrictions` switches off further combinations for one target language only
  (Korean drops frequency adverbs on negated verbs, see :mod:`~attnlab.data.corpus.korean`); the
  default restrictions leave the random stream -- and so the French corpus -- exactly as before.

Everything is driven by one ``random.Random``: same seed, same sentences, on any machine.

Building by hand
----------------
:func:`noun_phrase`, :func:`pronoun`, :func:`clause`, :func:`prep_phrase` and :func:`sentence`
build a tree from glosses, e.g. for documentation and tests::

    cat = noun_phrase("cat", det="the")
    s = sentence(clause(cat, "sleep"))
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "INTR",
    "TRANS",
    "DITR",
    "TO",
    "COP",
    "Noun",
    "Adj",
    "Verb",
    "Adv",
    "Det",
    "Pronoun",
    "Prep",
    "Conj",
    "NOUNS",
    "ADJS",
    "VERBS",
    "ADVS",
    "DETS",
    "PRONOUNS",
    "PREPS",
    "CONJS",
    "NounPhrase",
    "Clause",
    "Sentence",
    "Restrictions",
    "Builder",
    "build",
    "noun_phrase",
    "pronoun",
    "prep_phrase",
    "clause",
    "sentence",
]

# --------------------------------------------------------------------------------------------
# Lexicon: meanings only
# --------------------------------------------------------------------------------------------

INTR, TRANS, DITR, TO, COP = range(5)
_KIND_NAMES = {"intr": INTR, "trans": TRANS, "ditr": DITR, "to": TO, "cop": COP}


class Noun:
    """A noun meaning: ``anim`` (can see, sleep, give...), ``food`` (can be eaten)."""

    __slots__ = ("key", "anim", "food")

    def __init__(self, key: str, cls: str):
        self.key = key
        self.anim = cls == "anim"
        self.food = cls == "food"

    def __repr__(self) -> str:
        return f"Noun({self.key!r})"


# gloss class -- the order fixes the random choices: never reorder (it would change every pair)
_NOUN_TABLE = """
cat anim
dog anim
bird anim
horse anim
elephant anim
rabbit anim
boy anim
child anim
mouse anim
cow anim
girl anim
bee anim
house thing
tree thing
garden thing
school thing
apple food
egg food
bone food
cheese food
"""
NOUNS: tuple[Noun, ...] = tuple(Noun(*line.split()) for line in _NOUN_TABLE.strip().splitlines())
_ANIMATE = tuple(n for n in NOUNS if n.anim)
_FOOD = tuple(n for n in NOUNS if n.food)


class Adj:
    """An adjective meaning; ``pre``: one that precedes the noun in French (small, big, ...)."""

    __slots__ = ("key", "pre")

    def __init__(self, key: str, pos: str):
        self.key = key
        self.pre = pos == "pre"

    def __repr__(self) -> str:
        return f"Adj({self.key!r})"


_ADJ_TABLE = """
small pre
big pre
old pre
young pre
good pre
fat pre
beautiful pre
red post
green post
black post
white post
tired post
happy post
sick post
"""
ADJS: tuple[Adj, ...] = tuple(Adj(*line.split()) for line in _ADJ_TABLE.strip().splitlines())
_PRE_ADJS = tuple(a for a in ADJS if a.pre)
_POST_ADJS = tuple(a for a in ADJS if not a.pre)


class Verb:
    """A verb meaning: ``kind`` is one of INTR, TRANS, DITR, TO, COP; ``food``: its object is food."""

    __slots__ = ("key", "kind", "food")

    def __init__(self, key: str, kind: str, obj: str = "-"):
        self.key = key
        self.kind = _KIND_NAMES[kind]
        self.food = obj == "food"

    def __repr__(self) -> str:
        return f"Verb({self.key!r})"


_VERB_TABLE = """
sleep intr
run intr
sing intr
swim intr
jump intr
wait intr
arrive intr
see trans
eat trans food
like trans
watch trans
find trans
follow trans
hear trans
give ditr
show ditr
go to
talk to
be cop
"""
VERBS: tuple[Verb, ...] = tuple(Verb(*line.split()) for line in _VERB_TABLE.strip().splitlines())
_VERBS_BY_KIND = tuple(tuple(v for v in VERBS if v.kind == k) for k in range(5))
# How often each verb kind heads a clause (main clause / subject relative, object relative).
_KIND_POOL = (INTR,) * 6 + (TRANS,) * 8 + (DITR,) * 2 + (TO,) * 2 + (COP,) * 3
_OBJ_REL_KIND_POOL = (TRANS,) * 4 + (DITR,)
# English tokens a minimal verb phrase adds after the verb (object "det noun", "to det noun", ...).
_KIND_TAIL = {INTR: 0, TRANS: 2, DITR: 5, TO: 3, COP: 1}


class Adv:
    """An adverb meaning: ``manner`` (quickly) or frequency (often); ``neg_ok``: may modify a negated verb."""

    __slots__ = ("key", "manner", "neg_ok")

    def __init__(self, key: str, kind: str):
        self.key = key
        self.manner = kind == "manner"
        self.neg_ok = kind != "freq-"  # "does not sometimes see" is odd English

    def __repr__(self) -> str:
        return f"Adv({self.key!r})"


ADVS: tuple[Adv, ...] = (
    Adv("often", "freq"),
    Adv("always", "freq"),
    Adv("sometimes", "freq-"),
    Adv("rarely", "freq-"),
    Adv("quickly", "manner"),
    Adv("slowly", "manner"),
    Adv("well", "manner"),
)
_FREQ_ADVS = tuple(a for a in ADVS if not a.manner)
_FREQ_NEG_ADVS = tuple(a for a in _FREQ_ADVS if a.neg_ok)
_MANNER_ADVS = tuple(a for a in ADVS if a.manner)


class Det:
    """A determiner meaning: usable with singular (``sg``) and/or plural (``pl``) nouns.

    ``indef`` (a, some): never the object of a negated verb. ``number``: 2 or 3 for numerals, else 0.
    """

    __slots__ = ("key", "sg", "pl", "indef", "number")

    def __init__(self, key: str, sg: bool, pl: bool, indef: bool = False, number: int = 0):
        self.key, self.sg, self.pl, self.indef, self.number = key, sg, pl, indef, number

    def __repr__(self) -> str:
        return f"Det({self.key!r})"


# (weight, determiner): the weight is how often it is drawn
_DET_TABLE = (
    (4, Det("the", True, True)),
    (2, Det("a", True, False, indef=True)),
    (1, Det("some", False, True, indef=True)),
    (1, Det("two", False, True, number=2)),
    (1, Det("three", False, True, number=3)),
    (1, Det("my", True, True)),
    (1, Det("his", True, True)),
    (1, Det("her", True, True)),
    (1, Det("your", True, True)),
    (1, Det("this", True, True)),
    (1, Det("every", True, False)),
)
DETS: tuple[Det, ...] = tuple(d for _, d in _DET_TABLE)
_SOME = DETS[2]
# _DET_POOL[plural][forbid]: forbid 0 = any, 1 = not "some" (after a no_some preposition),
# 2 = not a/some (the object of a negated verb)
_DET_POOL = tuple(
    tuple(
        tuple(
            d
            for w, d in _DET_TABLE
            for _ in range(w)
            if (d.pl if pl else d.sg) and not (forbid == 1 and d is _SOME) and not (forbid == 2 and d.indef)
        )
        for forbid in range(3)
    )
    for pl in range(2)
)


class Pronoun:
    """A subject pronoun meaning (he, she, they); ``pl``: plural."""

    __slots__ = ("key", "pl")

    def __init__(self, key: str, pl: bool):
        self.key, self.pl = key, pl

    def __repr__(self) -> str:
        return f"Pronoun({self.key!r})"


PRONOUNS: tuple[Pronoun, ...] = (Pronoun("he", False), Pronoun("she", False), Pronoun("they", True))


class Prep:
    """A preposition meaning.

    ``cost``: its English tokens ("in front of" = 3). ``no_some``: its noun phrase never takes
    "some" (the French form ends in "de", and "de des" does not exist).
    """

    __slots__ = ("key", "cost", "no_some")

    def __init__(self, key: str, no_some: bool = False):
        self.key = key
        self.cost = len(key.split())
        self.no_some = no_some

    def __repr__(self) -> str:
        return f"Prep({self.key!r})"


PREPS: dict[str, Prep] = {
    p.key: p
    for p in (
        Prep("near", no_some=True),
        Prep("in"),
        Prep("on"),
        Prep("under"),
        Prep("behind"),
        Prep("with"),
        Prep("in front of"),
        Prep("far from", no_some=True),
        Prep("next to", no_some=True),
        Prep("of", no_some=True),
    )
}
_VP_PREPS = tuple(
    PREPS[k] for k in ("near", "in", "on", "under", "behind", "with", "in front of", "far from", "next to")
)
_NP_PREPS = _VP_PREPS + (PREPS["of"],) * 4


class Conj:
    """A clause conjunction meaning (and, but, because)."""

    __slots__ = ("key",)

    def __init__(self, key: str):
        self.key = key

    def __repr__(self) -> str:
        return f"Conj({self.key!r})"


_AND, _BUT, _BECAUSE = Conj("and"), Conj("but"), Conj("because")
CONJS: tuple[Conj, ...] = (_AND, _BUT, _BECAUSE)
_CONJ_POOL = (_AND, _AND, _BUT, _BECAUSE)

# --------------------------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------------------------


class NounPhrase:
    """A noun phrase, or a pronoun when ``pron`` is set.

    ``pp`` is ``[prep, NounPhrase, English start]`` or None; ``rel`` a :class:`Clause` with
    ``gap`` 1 or 2. The ``i_*`` slots are English positions, written by the English realiser.
    """

    __slots__ = ("pron", "noun", "pl", "det", "pre", "post", "pp", "rel")
    __slots__ += ("i_det", "i_pre", "i_post", "i_head")

    def __init__(self):
        self.pron = self.noun = self.det = self.pre = self.post = self.pp = self.rel = None


class Clause:
    """A clause. ``gap``: 0 = main clause, 1 = subject relative ("that sees"), 2 = object relative
    ("that X sees"). ``agr`` is the noun phrase the verb agrees with (the subject, or the head noun
    of a subject relative). ``conj`` joins a main clause to the one before it.

    The ``i_*`` slots are English positions, written by the English realiser.
    """

    __slots__ = ("gap", "subj", "agr", "verb", "obj", "to", "pred", "neg", "adv", "pp", "conj")
    __slots__ += ("i_that", "i_do", "i_not", "i_verb", "i_adv", "i_pred", "i_to", "i_conj")

    def __init__(self):
        self.subj = self.obj = self.to = self.pred = self.adv = self.pp = self.conj = None
        self.neg = False


class Sentence:
    """1-3 main clauses (each after the first has a ``conj``). ``i_end``: English position of "."."""

    __slots__ = ("clauses", "i_end")

    def __init__(self, clauses: list[Clause]):
        self.clauses = clauses


@dataclass(frozen=True)
class Restrictions:
    """Combinations a target language cannot render, switched off while building its sentences.

    Attributes:
        neg_freq_adverbs: allow a frequency adverb on a negated verb ("does not often eat").
    """

    neg_freq_adverbs: bool = True


_NO_RESTRICTIONS = Restrictions()

# --------------------------------------------------------------------------------------------
# Builder: a tree of clauses and noun phrases, grown toward a target length
# --------------------------------------------------------------------------------------------


class Builder:
    """Grows one sentence. Every expansion knows how many English tokens it adds.

    The order of the random draws is part of the corpus: the same draws in the same order give the
    same sentences, so any change here changes every generated pair (and ``CORPUS_VERSION``).
    """

    __slots__ = ("rnd", "nps", "clauses", "top", "neg_freq")

    def __init__(self, rng: random.Random, restrictions: Restrictions = _NO_RESTRICTIONS):
        self.rnd = rng.random
        self.nps: list[NounPhrase] = []  # noun phrases (not pronouns) that can still be modified
        self.clauses: list[Clause] = []
        self.top: list[Clause] = []
        self.neg_freq = restrictions.neg_freq_adverbs

    def pick(self, seq):
        # One random() call per choice: a little cheaper than rng.choice, which runs ~50 times per pair.
        return seq[int(self.rnd() * len(seq))]

    # -- building blocks -------------------------------------------------------------------
    def noun_np(self, pool, forbid=0) -> NounPhrase:
        rnd, pick = self.rnd, self.pick
        np = NounPhrase()
        np.noun = pick(pool)
        np.pl = pl = rnd() < 0.4
        np.det = pick(_DET_POOL[pl][forbid])
        self.nps.append(np)
        return np

    def pron_np(self) -> NounPhrase:
        np = NounPhrase()
        np.pron = p = self.pick(PRONOUNS)
        np.pl = p.pl
        return np

    def clause(self, budget: int, gap: int = 0, head: NounPhrase | None = None) -> tuple[Clause | None, int]:
        """A minimal clause of at most ``budget`` English tokens (None, 0 when none fits)."""
        rnd, pick = self.rnd, self.pick
        for _ in range(6):
            if gap == 2:
                kind = pick(_OBJ_REL_KIND_POOL)
            elif gap == 1 and not head.noun.anim:
                kind = COP  # only animate nouns see, sleep, give...
            else:
                kind = pick(_KIND_POOL)
            verb = pick(_VERBS_BY_KIND[kind])
            if gap == 2 and verb.food and not head.noun.food:
                continue
            pron = gap != 1 and rnd() < 0.25
            tail = _KIND_TAIL[kind] - (2 if gap == 2 else 0)  # the object is the gap
            cost = (0 if gap == 1 else 1 if pron else 2) + 1 + tail + (1 if gap else 0)
            if cost <= budget:
                break
        else:
            return None, 0
        c = Clause()
        c.gap, c.verb = gap, verb
        if gap == 1:
            c.agr = head
        else:
            c.subj = c.agr = self.pron_np() if pron else self.noun_np(NOUNS if kind == COP else _ANIMATE)
        if kind == COP:
            c.pred = pick(ADJS)
        elif kind != INTR:
            if kind != TO and gap != 2:
                c.obj = self.noun_np(_FOOD if verb.food else NOUNS)
            if kind != TRANS:
                c.to = self.noun_np(NOUNS)
        self.clauses.append(c)
        return c, cost

    # -- expansions: each returns the number of English tokens added (0 = not applicable) ----
    def x_pre(self, budget):
        np = self.pick(self.nps) if self.nps else None
        if np is None or np.pre is not None:
            return 0
        np.pre = self.pick(_PRE_ADJS)
        return 1

    def x_post(self, budget):
        np = self.pick(self.nps) if self.nps else None
        if np is None or np.post is not None:
            return 0
        np.post = self.pick(_POST_ADJS)
        return 1

    def x_adv(self, budget):
        rnd, pick = self.rnd, self.pick
        c = pick(self.clauses)
        if c.adv is not None:
            return 0
        if c.verb.kind in (INTR, TO) and rnd() < 0.5:
            c.adv = pick(_MANNER_ADVS)
        elif c.neg and not self.neg_freq:
            return 0
        else:
            c.adv = pick(_FREQ_NEG_ADVS if c.neg else _FREQ_ADVS)
        return 1

    def x_neg(self, budget):
        c = self.pick(self.clauses)
        cost = 1 if c.verb.kind == COP else 2  # "is not" / "does not see"
        adv = c.adv
        if c.neg or cost > budget or (adv is not None and not (adv.neg_ok and (self.neg_freq or adv.manner))):
            return 0
        c.neg = True
        if c.obj is not None and c.obj.det.indef:  # French would need "pas de"
            c.obj.det = self.pick(_DET_POOL[c.obj.pl][2])
        return cost

    def _pp(self, preps, budget):
        prep = self.pick(preps)
        cost = prep.cost + 2
        if cost > budget:
            return None, 0
        return [prep, self.noun_np(NOUNS, 1 if prep.no_some else 0), 0], cost

    def x_np_pp(self, budget):
        np = self.pick(self.nps) if self.nps else None
        if np is None or np.pp is not None or np.rel is not None:
            return 0
        np.pp, cost = self._pp(_NP_PREPS, budget)
        return cost

    def x_vp_pp(self, budget):
        c = self.pick(self.clauses)
        if c.pp is not None:
            return 0
        c.pp, cost = self._pp(_VP_PREPS, budget)
        return cost

    def x_rel(self, budget):
        rnd, pick = self.rnd, self.pick
        np = pick(self.nps) if self.nps else None
        # Never both a PP and a relative clause on one noun: in "the cat near the girl that is happy"
        # the clause could attach to either noun, and French would have to pick content/contente.
        if np is None or np.rel is not None or np.pp is not None:
            return 0
        np.rel, cost = self.clause(budget, 1 if rnd() < 0.6 else 2, np)
        return cost

    def x_coord(self, budget):
        if len(self.top) >= 3:
            return 0
        c, cost = self.clause(budget - 1)
        if c is None:
            return 0
        c.conj = self.pick(_CONJ_POOL)
        self.top.append(c)
        return cost + 1

    _EXPANSIONS = (
        (x_pre, 3),
        (x_post, 3),
        (x_adv, 2),
        (x_neg, 2),
        (x_np_pp, 3),
        (x_vp_pp, 2),
        (x_rel, 4),
        (x_coord, 1),
    )
    _EXPANSION_POOL = tuple(f for f, w in _EXPANSIONS for _ in range(w))

    def grow(self, lo: int, hi: int) -> bool:
        """Build a sentence of ``lo..hi`` English tokens; False when this attempt got stuck."""
        rnd, pick = self.rnd, self.pick
        first, n = self.clause(hi - 1)  # -1: the final "."
        if first is None:
            return False
        self.top.append(first)
        n += 1
        low = max(lo, n)
        target = low + int(rnd() * (hi - low + 1))
        pool = self._EXPANSION_POOL
        while n < target:
            for attempt in range(16):
                # Aim at the target first (even spread of lengths), then accept anything up to hi.
                added = pick(pool)(self, (target if attempt < 10 else hi) - n)
                if added:
                    n += added
                    break
            else:
                return False
        return lo <= n <= hi


def build(rng: random.Random, lo: int, hi: int, restrictions: Restrictions = _NO_RESTRICTIONS) -> Sentence:
    """One abstract sentence of ``lo..hi`` English tokens (including ".").

    Args:
        rng: the random generator; consumed in a fixed order.
        lo, hi: inclusive length range in English tokens; ``3 <= hi`` and ``lo <= hi <= 40`` always succeed.
        restrictions: combinations to avoid for the target language.

    Returns:
        A :class:`Sentence`.
    """
    for _ in range(1000):  # a retry happens in well under 1% of calls
        b = Builder(rng, restrictions)
        if b.grow(lo, hi):
            return Sentence(b.top)
    raise RuntimeError(f"could not generate a sentence of {lo}-{hi} tokens")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# Building by hand (documentation, tests)
# --------------------------------------------------------------------------------------------


def _lookup(table, key: str | None, what: str):
    if key is None:
        return None
    for entry in table:
        if entry.key == key:
            return entry
    raise ValueError(f"unknown {what} {key!r}; known: {', '.join(e.key for e in table)}")


def noun_phrase(
    noun: str,
    det: str = "the",
    *,
    pl: bool = False,
    pre: str | None = None,
    post: str | None = None,
    pp: list | None = None,
    rel: Clause | None = None,
) -> NounPhrase:
    """A noun phrase from glosses, e.g. ``noun_phrase("cat", "two", pl=True, pre="small")``.

    Args:
        noun: noun gloss.
        det: determiner gloss (``"this"`` also stands for "these").
        pl: plural.
        pre, post: adjective glosses (a "pre" and a "post" adjective, see :data:`ADJS`).
        pp: a :func:`prep_phrase`.
        rel: a :func:`clause` with ``gap`` 1 or 2 (its head is set to this noun phrase).

    Raises:
        ValueError: an unknown gloss, or a determiner that does not take this number.
    """
    np = NounPhrase()
    np.noun = _lookup(NOUNS, noun, "noun")
    np.det = d = _lookup(DETS, det, "determiner")
    if not (d.pl if pl else d.sg):
        raise ValueError(f"det {det!r} does not take a {'plural' if pl else 'singular'} noun")
    np.pl = pl
    np.pre = _lookup(_PRE_ADJS, pre, "pre adjective")
    np.post = _lookup(_POST_ADJS, post, "post adjective")
    np.pp = pp
    if rel is not None:
        if rel.gap == 1:
            rel.agr = np
        np.rel = rel
    return np


def pronoun(key: str) -> NounPhrase:
    """A pronoun subject from its gloss (``"he"``, ``"she"``, ``"they"``)."""
    np = NounPhrase()
    np.pron = p = _lookup(PRONOUNS, key, "pronoun")
    np.pl = p.pl
    return np


def prep_phrase(prep: str, np: NounPhrase) -> list:
    """A prepositional phrase ``[prep, np, 0]`` for :func:`noun_phrase` or :func:`clause`."""
    if prep not in PREPS:
        raise ValueError(f"unknown preposition {prep!r}; known: {', '.join(PREPS)}")
    return [PREPS[prep], np, 0]


def clause(
    subj: NounPhrase | None,
    verb: str,
    obj: NounPhrase | None = None,
    *,
    to: NounPhrase | None = None,
    pred: str | None = None,
    neg: bool = False,
    adv: str | None = None,
    pp: list | None = None,
    conj: str | None = None,
    gap: int = 0,
) -> Clause:
    """A clause from glosses, e.g. ``clause(noun_phrase("girl"), "give", noun_phrase("bone"), to=noun_phrase("dog"))``.

    Args:
        subj: the subject; None for a subject relative (``gap=1``).
        verb: verb gloss (``"be"`` for the copula, with ``pred``).
        obj: the object (None for intransitive verbs and object relatives).
        to: the to-phrase of ditransitive and to-verbs.
        pred: predicate adjective gloss of the copula.
        neg: negated.
        adv: adverb gloss.
        pp: a :func:`prep_phrase` on the clause.
        conj: ``"and"``/``"but"``/``"because"`` for a second or third main clause.
        gap: 0 main clause, 1 subject relative, 2 object relative.
    """
    c = Clause()
    c.gap = gap
    c.verb = _lookup(VERBS, verb, "verb")
    c.subj = subj
    c.agr = subj
    c.obj, c.to, c.neg, c.pp = obj, to, neg, pp
    c.pred = _lookup(ADJS, pred, "adjective")
    c.adv = _lookup(ADVS, adv, "adverb")
    c.conj = _lookup(CONJS, conj, "conjunction")
    return c


def sentence(*clauses: Clause) -> Sentence:
    """A :class:`Sentence` of the given main clauses."""
    return Sentence(list(clauses))
