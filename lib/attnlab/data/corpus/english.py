"""English, the source side: abstract sentences (:mod:`~attnlab.data.corpus.grammar`) to tokens.

Word order follows the tree: ``det [pre-adj] [post-adj] noun [PP] [relative clause]``; subject,
(``do``/``does not``), frequency adverb, verb, manner adverb, object, ``to`` phrase, clause PP.
Relative clauses start with ``that``; conjunctions (and, but, because) precede their clause;
negation is "does not see" / "do not see" / "is not". The indefinite article is "an" before a
vowel. All tokens are lower case; the sentence ends in the token ".". The vocabulary is 135 word types.

:func:`realise` also writes each word's position into the tree (the ``i_*`` slots), which the
target realisers use for their alignments, so it must run before them.
"""

from __future__ import annotations

from attnlab.data.corpus import grammar as g

__all__ = ["realise", "VOWELS"]

VOWELS = frozenset("aeiou")  # "a" becomes "an" before these

_NOUN = {
    n: tuple(forms.split())
    for n, forms in zip(
        g.NOUNS,
        (
            "cat cats",
            "dog dogs",
            "bird birds",
            "horse horses",
            "elephant elephants",
            "rabbit rabbits",
            "boy boys",
            "child children",
            "mouse mice",
            "cow cows",
            "girl girls",
            "bee bees",
            "house houses",
            "tree trees",
            "garden gardens",
            "school schools",
            "apple apples",
            "egg eggs",
            "bone bones",
            "cheese cheeses",
        ),
        strict=True,
    )
}
_ADJ = {a: a.key for a in g.ADJS}
# third person singular, plural
_VERB = {
    v: tuple(forms.split())
    for v, forms in zip(
        g.VERBS,
        (
            "sleeps sleep",
            "runs run",
            "sings sing",
            "swims swim",
            "jumps jump",
            "waits wait",
            "arrives arrive",
            "sees see",
            "eats eat",
            "likes like",
            "watches watch",
            "finds find",
            "follows follow",
            "hears hear",
            "gives give",
            "shows show",
            "goes go",
            "talks talk",
            "is are",
        ),
        strict=True,
    )
}
_ADV = {a: a.key for a in g.ADVS}
# singular, plural (None: the determiner does not take that number)
_DET = {
    d: forms
    for d, forms in zip(
        g.DETS,
        (
            ("the", "the"),
            ("a", None),
            (None, "some"),
            (None, "two"),
            (None, "three"),
            ("my", "my"),
            ("his", "his"),
            ("her", "her"),
            ("your", "your"),
            ("this", "these"),
            ("every", None),
        ),
        strict=True,
    )
}
_PRON = {p: p.key for p in g.PRONOUNS}
_PREP = {p: tuple(p.key.split()) for p in g.PREPS.values()}
_CONJ = {c: c.key for c in g.CONJS}


def _np(np: g.NounPhrase, E: list[str]) -> None:
    if np.pron is not None:
        np.i_head = len(E)
        E.append(_PRON[np.pron])
        return
    pl = np.pl
    noun_en = _NOUN[np.noun][pl]
    det_en = _DET[np.det][pl]
    if det_en == "a":
        nxt = _ADJ[np.pre] if np.pre is not None else _ADJ[np.post] if np.post is not None else noun_en
        if nxt[0] in VOWELS:
            det_en = "an"
    np.i_det = len(E)
    E.append(det_en)
    if np.pre is not None:
        np.i_pre = len(E)
        E.append(_ADJ[np.pre])
    if np.post is not None:
        np.i_post = len(E)
        E.append(_ADJ[np.post])
    np.i_head = len(E)
    E.append(noun_en)
    if np.pp is not None:
        _pp(np.pp, E)
    if np.rel is not None:
        _clause(np.rel, E)


def _pp(pp: list, E: list[str]) -> None:
    pp[2] = len(E)
    E.extend(_PREP[pp[0]])
    _np(pp[1], E)


def _clause(c: g.Clause, E: list[str]) -> None:
    if c.gap:
        c.i_that = len(E)
        E.append("that")
    if c.gap != 1:
        _np(c.subj, E)
    pl = c.agr.pl
    verb, adv = c.verb, c.adv
    if verb.kind == g.COP:
        c.i_verb = len(E)
        E.append(_VERB[verb][pl])
        if c.neg:
            c.i_not = len(E)
            E.append("not")
        if adv is not None:
            c.i_adv = len(E)
            E.append(_ADV[adv])
        c.i_pred = len(E)
        E.append(_ADJ[c.pred])
    else:
        if c.neg:
            c.i_do = len(E)
            E.append("do" if pl else "does")
            c.i_not = len(E)
            E.append("not")
            form = _VERB[verb][1]
        else:
            form = _VERB[verb][pl]
        if adv is not None and not adv.manner:
            c.i_adv = len(E)
            E.append(_ADV[adv])
        c.i_verb = len(E)
        E.append(form)
        if adv is not None and adv.manner:
            c.i_adv = len(E)
            E.append(_ADV[adv])
        if c.obj is not None:
            _np(c.obj, E)
        if c.to is not None:
            c.i_to = len(E)
            E.append("to")
            _np(c.to, E)
    if c.pp is not None:
        _pp(c.pp, E)


def realise(s: g.Sentence) -> tuple[str, ...]:
    """The English tokens of ``s``; records every word's position in the tree.

    Args:
        s: an abstract sentence.

    Returns:
        The tokens, ending in ".".
    """
    E: list[str] = []
    for c in s.clauses:
        if c.conj is not None:
            c.i_conj = len(E)
            E.append(_CONJ[c.conj])
        _clause(c, E)
    s.i_end = len(E)
    E.append(".")
    return tuple(E)
