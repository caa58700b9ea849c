"""French, the first target: abstract sentences to tokens with gold word alignments.

Every English sentence has exactly one French translation. The rules:

* Noun phrase ``det [pre-adj] noun [post-adj] [PP] [relative clause]``: colour/state adjectives
  follow the noun, "the small red cat" → "le petit chat rouge". Determiners le/un/des/deux/trois/
  mon/son/votre/ce/chaque; pre-noun adjectives petit, grand, vieux, jeune, bon, gros, beau;
  post-noun adjectives rouge, vert, noir, blanc, fatigué, content, malade.
* Agreement: determiner and adjectives agree with the noun in gender and number (le/la/les,
  petit/petite/petits/petites), verbs with their subject (mange/mangent), predicate adjectives with
  their subject (la souris est petite). Before a vowel: le/la → l', ce → cet, ma/sa → mon/son,
  beau/vieux → bel/vieil (masculine singular). "they" is always "ils" (one translation).
* Verbs: "sees the dog" → "voit le chien", "gives the bone to the dog" → "donne l'os au chien",
  "goes to the house" → "va à la maison", "is tired" → "est fatigué".
* Negation: "does not see" → "ne voit pas", "is not" → "n'est pas".
* Adverbs: frequency adverbs follow the French verb ("often eats" → "mange souvent", "does not
  always see" → "ne voit pas toujours"); manner adverbs follow it too ("runs quickly" → "court vite").
* Prepositions près de, dans, sur, sous, derrière, avec, devant, loin de, à côté de, de.
* Relative clauses: "the cat that sees the dog" → "le chat qui voit le chien", "the dog that the
  cat sees" → "le chien que le chat voit"; conjunctions et, mais, parce que.
* Elision and contraction, applied last: de/que/ne → d'/qu'/n' before a vowel; de le → du,
  de les → des, à le → au, à les → aux. Elided forms are separate tokens ("l'" "oiseau").

All tokens are lower case; the final "." is a token. The vocabulary is 183 French word types.

Alignment conventions
---------------------
French has only *sure* links (``Pair.align``; ``Pair.possible`` is None). ``align[t]`` is the
sorted tuple of English positions (0-based) that French token ``t`` translates. Every French
token has a non-empty alignment, and every English token is covered by some French token:

* word for word where the words correspond (det ↔ det, noun ↔ noun, adjective ↔ adjective, ...);
* ``do``/``does`` of negation align to the French verb, together with the English verb:
  "does not see" → "voit" ↔ (does, see); ``ne`` and ``pas`` both align to ``not``;
* a contraction aligns to the union of what it merges: "of the dog" → "du" ↔ (of, the);
  "near the dog" → "près" ↔ (near), "du" ↔ (near, the), since "près de" ↔ "near";
* elided tokens keep the alignment of the full word ("l'" ↔ the);
* multi-word prepositions: "devant" ↔ (in, front, of); "loin" ↔ far, "de" ↔ from; each of
  "à côté de" ↔ (next, to); "parce" and "que" ↔ because; relative "qui"/"que" ↔ that.

``Pair.content[t]`` is True for content words (nouns, lexical verbs, adjectives, adverbs) and False
for function words (determiners, pronouns, prepositions, conjunctions, relative pronouns, ne/pas,
the copula est/sont, punctuation, contractions).
"""

from __future__ import annotations

from attnlab.data.corpus import grammar as g

__all__ = ["CORPUS_VERSION", "RESTRICTIONS", "VOWELS", "realise"]

# Bump whenever the French pairs change in any way: caches, checkpoints and results key on it.
CORPUS_VERSION = "synth-enfr-1"
RESTRICTIONS = g.Restrictions()  # French renders every combination the grammar makes

VOWELS = frozenset("aeiouyàâäéèêëîïôöùûüœh")  # no h-/y-initial word exists; listed for safety

# singular plural gender
_NOUN_TABLE = """
chat chats m
chien chiens m
oiseau oiseaux m
cheval chevaux m
éléphant éléphants m
lapin lapins m
garçon garçons m
enfant enfants m
souris souris f
vache vaches f
fille filles f
abeille abeilles f
maison maisons f
arbre arbres m
jardin jardins m
école écoles f
pomme pommes f
œuf œufs m
os os m
fromage fromages m
"""
# noun -> (singular, plural, feminine)
_NOUN = {
    n: (sg, pl, gender == "f")
    for n, (sg, pl, gender) in zip(g.NOUNS, map(str.split, _NOUN_TABLE.strip().splitlines()), strict=True)
}

# m.sg f.sg m.pl f.pl, masculine singular before a vowel
_ADJ_TABLE = """
petit petite petits petites -
grand grande grands grandes -
vieux vieille vieux vieilles vieil
jeune jeune jeunes jeunes -
bon bonne bons bonnes -
gros grosse gros grosses -
beau belle beaux belles bel
rouge rouge rouges rouges -
vert verte verts vertes -
noir noire noirs noires -
blanc blanche blancs blanches -
fatigué fatiguée fatigués fatiguées -
content contente contents contentes -
malade malade malades malades -
"""
# adjective -> ((m.sg, f.sg, m.pl, f.pl), before-vowel form or None); index: 2 * plural + feminine
_ADJ = {
    a: (tuple(row[:4]), None if row[4] == "-" else row[4])
    for a, row in zip(g.ADJS, map(str.split, _ADJ_TABLE.strip().splitlines()), strict=True)
}

_VERB_TABLE = """
dort dorment
court courent
chante chantent
nage nagent
saute sautent
attend attendent
arrive arrivent
voit voient
mange mangent
aime aiment
regarde regardent
trouve trouvent
suit suivent
entend entendent
donne donnent
montre montrent
va vont
parle parlent
est sont
"""
_VERB = {v: tuple(row) for v, row in zip(g.VERBS, map(str.split, _VERB_TABLE.strip().splitlines()), strict=True)}
_ADV = {
    a: fr
    for a, fr in zip(g.ADVS, ("souvent", "toujours", "parfois", "rarement", "vite", "lentement", "bien"), strict=True)
}
# (m.sg, f.sg, m.pl, f.pl)
_DET = {
    d: forms
    for d, forms in zip(
        g.DETS,
        (
            ("le", "la", "les", "les"),
            ("un", "une", None, None),
            (None, None, "des", "des"),
            (None, None, "deux", "deux"),
            (None, None, "trois", "trois"),
            ("mon", "ma", "mes", "mes"),
            ("son", "sa", "ses", "ses"),
            ("son", "sa", "ses", "ses"),
            ("votre", "votre", "vos", "vos"),
            ("ce", "cette", "ces", "ces"),
            ("chaque", "chaque", None, None),
        ),
        strict=True,
    )
}
_DET_BEFORE_VOWEL = {"le": "l'", "la": "l'", "ce": "cet", "ma": "mon", "sa": "son"}
# pronoun -> (French, feminine)
_PRON = {p: fr for p, fr in zip(g.PRONOUNS, (("il", False), ("elle", True), ("ils", False)), strict=True)}
# preposition -> (French tokens, per French token the offsets into the English words it translates)
_PREP = {
    g.PREPS["near"]: (("près", "de"), ((0,), (0,))),
    g.PREPS["in"]: (("dans",), ((0,),)),
    g.PREPS["on"]: (("sur",), ((0,),)),
    g.PREPS["under"]: (("sous",), ((0,),)),
    g.PREPS["behind"]: (("derrière",), ((0,),)),
    g.PREPS["with"]: (("avec",), ((0,),)),
    g.PREPS["in front of"]: (("devant",), ((0, 1, 2),)),
    g.PREPS["far from"]: (("loin", "de"), ((0,), (1,))),
    g.PREPS["next to"]: (("à", "côté", "de"), ((0, 1), (0, 1), (0, 1))),
    g.PREPS["of"]: (("de",), ((0,),)),
}
_CONJ = {c: fr for c, fr in zip(g.CONJS, (("et",), ("mais",), ("parce", "que")), strict=True)}


def _fem(np: g.NounPhrase) -> bool:
    return _PRON[np.pron][1] if np.pron is not None else _NOUN[np.noun][2]


def _np(np: g.NounPhrase, F: list) -> None:
    if np.pron is not None:
        F.append((_PRON[np.pron][0], (np.i_head,), False))
        return
    pl = np.pl
    noun = _NOUN[np.noun]
    idx = 2 * pl + noun[2]
    noun_fr = noun[pl]
    pre = np.pre
    if pre is not None:
        forms, alt = _ADJ[pre]
        pre_fr = alt if idx == 0 and alt and noun_fr[0] in VOWELS else forms[idx]
        nxt = pre_fr
    else:
        nxt = noun_fr
    det_fr = _DET[np.det][idx]
    if nxt[0] in VOWELS:
        det_fr = _DET_BEFORE_VOWEL.get(det_fr, det_fr)
    F.append((det_fr, (np.i_det,), False))
    if pre is not None:
        F.append((pre_fr, (np.i_pre,), True))
    F.append((noun_fr, (np.i_head,), True))
    if np.post is not None:
        F.append((_ADJ[np.post][0][idx], (np.i_post,), True))
    if np.pp is not None:
        _pp(np.pp, F)
    if np.rel is not None:
        _clause(np.rel, F)


def _pp(pp: list, F: list) -> None:
    prep, sub, i0 = pp
    words, offsets = _PREP[prep]
    for w, offs in zip(words, offsets, strict=True):
        F.append((w, tuple(i0 + o for o in offs), False))
    _np(sub, F)


def _clause(c: g.Clause, F: list) -> None:
    if c.gap == 1:
        F.append(("qui", (c.i_that,), False))
    elif c.gap == 2:
        F.append(("que", (c.i_that,), False))
        _np(c.subj, F)
    else:
        _np(c.subj, F)
    agr, verb = c.agr, c.verb
    cop = verb.kind == g.COP
    verb_fr = _VERB[verb][agr.pl]
    if c.neg:
        F.append(("ne", (c.i_not,), False))
        F.append((verb_fr, (c.i_verb,) if cop else (c.i_do, c.i_verb), not cop))
        F.append(("pas", (c.i_not,), False))
    else:
        F.append((verb_fr, (c.i_verb,), not cop))
    if c.adv is not None:
        F.append((_ADV[c.adv], (c.i_adv,), True))
    if cop:
        F.append((_ADJ[c.pred][0][2 * agr.pl + _fem(agr)], (c.i_pred,), True))
    else:
        if c.obj is not None:
            _np(c.obj, F)
        if c.to is not None:
            F.append(("à", (c.i_to,), False))
            _np(c.to, F)
    if c.pp is not None:
        _pp(c.pp, F)


_CONTRACT = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}
_ELIDE = {"de": "d'", "que": "qu'", "ne": "n'"}
_ELIDE_OR_CONTRACT = frozenset(("de", "à", "que", "ne"))


def _surface(F: list) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], tuple[bool, ...]]:
    """Apply elision and contraction; returns (tokens, alignments, content flags).

    Only de/à/que/ne change, and each is followed by a word that never changes itself, so one
    pass over their positions (right to left, so deletions keep indices valid) is enough.
    """
    hits = [i for i, f in enumerate(F) if f[0] in _ELIDE_OR_CONTRACT]
    for i in reversed(hits):
        tok = F[i][0]
        nxt = F[i + 1]
        merged = _CONTRACT.get((tok, nxt[0]))
        if merged is not None:
            F[i] = (merged, tuple(sorted(set(F[i][1]) | set(nxt[1]))), False)
            del F[i + 1]
        elif tok in _ELIDE and nxt[0][0] in VOWELS:
            F[i] = (_ELIDE[tok], F[i][1], False)
    toks, align, content = zip(*F, strict=True)
    return toks, align, content


def realise(s: g.Sentence) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], tuple[bool, ...]]:
    """French tokens, sure alignments and content flags of ``s``.

    :func:`attnlab.data.corpus.english.realise` must have run on ``s`` first (it records the English
    positions the alignments point to).

    Args:
        s: an abstract sentence.

    Returns:
        ``(tokens, align, content)``, one entry per French token.
    """
    F: list[tuple[str, tuple[int, ...], bool]] = []
    for c in s.clauses:
        if c.conj is not None:
            for w in _CONJ[c.conj]:
                F.append((w, (c.i_conj,), False))
        _clause(c, F)
    F.append((".", (s.i_end,), False))
    return _surface(F)
