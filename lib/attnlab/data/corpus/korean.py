"""Korean, the second target: the same abstract sentences, verb-final, with sure and possible links.

Korean reverses English word order at every level: the verb comes last, postpositions follow
their noun, and relative clauses and genitives precede the noun they modify, so "the cat that
sees the dog" becomes "개 를 보는 고양이" (dog-OBJ seeing cat) and attention has to run backwards
over whole phrases. Tokens are split at particles ("고양이 가 개 를 본다 ."), which keeps the
alignments clean; :func:`join_surface` gives the written form ("고양이가 개를 본다.").

The rules
---------
* Style: plain present declarative (-ㄴ다/-는다): 잔다, 먹는다, 피곤하다.
* Clause: ``subject-이/가  [clause PP]  [dative-에게]  [object-을/를]  [adverb]  [안]  verb``:
  SOV, dative before accusative, adverbs and negation right before the verb.
* Negation is 안 before the verb ("does not see" → "안 본다"). For a noun+하다 verb 안 goes before
  하다 ("does not sing" → "노래 안 한다"); the lexicon stores where such a verb splits.
* Noun phrase: ``[relative clause | PP modifier]  [determiner]  [adjectives]  noun  [들 | numeral
  counter]  particle``. Relative clauses end in the adnominal form (보는, 피곤한) and precede the
  noun; a PP on a noun becomes a genitive-like modifier before it ("the cat of the girl" →
  "소녀 의 고양이", "the cat near the tree" → "나무 근처 의 고양이", "the girl with the dog" →
  "개 와 함께 있는 소녀", "far from X" → "X 에서 먼").
* Determiners: the/a/an have no Korean word; some → 몇몇; this/these → 이 (+들); my/his/her/your →
  내/그의/그녀의/너의; every → 모든; two/three → a numeral and a counter *after* the noun
  ("two cats" → "고양이 두 마리"; counters 마리 animals, 명 people, 채 houses, 그루 trees, 개 things).
  Plural nouns take 들 ("the cats" → "고양이 들"), except after a numeral.
* Particles follow the last syllable of the token before them, read from the Hangul code point
  (:func:`final_consonant`): 이/가, 을/를, 은/는, 와/과, 으로/로 (로 also after ㄹ: "말 로"). 에게
  (animate) / 에 (thing) mark the to-phrase of give/show/talk; "go to" a thing is 으로/로.
* Clause PPs are postpositions after the noun: "under the tree" → "나무 아래 에서", "with the dog"
  → "개 와 함께", "in front of" → "앞 에서", "next to" → "옆 에서", "far from" → "에서 먼 곳 에서".
* Joining clauses: "A and B" → "A-고 B", "A but B" → "A-지만 B"; "A because B" → "B-기 때문에 A":
  the reason clause moves in front of the clause it explains (in "A and B because C", in front of
  B: "A-고 C-기 때문에 B").
* Irregular forms are stored, never derived: the adnominal forms of ㅎ/ㅂ-irregular adjectives
  (빨간, 하얀, 아름다운), the ㄹ-stem 멀다 → 먼, and "old", which is 늙은/늙었다 for animate nouns
  and 오래된/오래되었다 for things. Regular forms are built from the stem.

Dropped from the Korean side
----------------------------
A frequency adverb on a negated verb ("does not often eat", "is not always happy") has no fixed-
rule rendering with 안: "자주 안 먹는다" means "often does not eat", the opposite scope. The
Korean corpus never builds that combination (:data:`RESTRICTIONS`; the grammar then makes
another sentence of the same length). Everything else the grammar makes has a Korean sentence.

Alignment conventions
---------------------
Links follow Och & Ney: ``Pair.align[t]`` holds the *sure* links of Korean token ``t``,
``Pair.possible[t]`` the links that are only *possible* (the two sets never overlap). A token may
have no sure link; every Korean token has at least one link of either kind.

* Sure: noun ↔ noun, adjective ↔ adjective, verb ↔ verb, adverb ↔ adverb, pronoun ↔ pronoun,
  determiner ↔ determiner (몇몇, 이, 내, 모든, the numeral 두/세), 안 ↔ not, 때문에 ↔ because,
  a postposition ↔ its preposition (아래 ↔ under; 앞 ↔ in front of; 먼 ↔ far, 에서 ↔ from;
  와/과 and 함께 ↔ with), 에게/에/으로 ↔ "to", 의 ↔ "of", "." ↔ ".". A split 하다 verb has both
  parts ↔ the verb. A predicate adjective (피곤하다) ↔ the adjective.
* Possible: a case particle (이/가, 을/를, 에게, 와/과, 의 after a noun phrase) ↔ the noun it
  follows; 들 ↔ the plural noun; a counter ↔ the numeral and the noun; a particle after a
  postposition (아래 에서) ↔ the preposition; the verb ↔ does/do of negation, ↔ "that" of its
  relative clause, ↔ the and/but its ending expresses (자고 ↔ and); a predicate ↔ "is"/"are".
* No link at all: English the/a/an.

``Pair.content[t]`` is True for nouns, verbs, adjectives and adverbs (each has a sure link) and
False for particles, 들, counters, determiners, pronouns, postpositions, 안, 때문에 and ".".
"""

from __future__ import annotations

from collections.abc import Sequence

from attnlab.data.corpus import grammar as g

__all__ = [
    "CORPUS_VERSION",
    "RESTRICTIONS",
    "PARTICLES",
    "final_consonant",
    "particle",
    "realise",
    "join_surface",
]

# Bump whenever the Korean pairs change in any way: caches, checkpoints and results key on it.
CORPUS_VERSION = "synth-enko-1"
RESTRICTIONS = g.Restrictions(neg_freq_adverbs=False)

# --------------------------------------------------------------------------------------------
# Hangul and particles
# --------------------------------------------------------------------------------------------

_SYLLABLE_FIRST, _SYLLABLE_LAST = 0xAC00, 0xD7A3
_N_FINALS = 28  # 27 final consonants + "none"
_FINAL_NIEUN, _FINAL_RIEUL = 4, 8  # ㄴ, ㄹ


def final_consonant(token: str) -> int:
    """Index of the final consonant (batchim) of the token's last syllable; 0 when it has none.

    A precomposed Hangul syllable is ``0xAC00 + (initial * 21 + vowel) * 28 + final``, so the
    final is ``(code - 0xAC00) % 28``: 0 none, 4 ㄴ, 8 ㄹ, ...

    Raises:
        ValueError: the token does not end in a Hangul syllable.
    """
    code = ord(token[-1]) if token else 0
    if not _SYLLABLE_FIRST <= code <= _SYLLABLE_LAST:
        raise ValueError(f"token must end in a Hangul syllable, got {token!r}")
    return (code - _SYLLABLE_FIRST) % _N_FINALS


# particle -> (after a consonant, after a vowel); 으로/로 is special-cased for ㄹ
PARTICLES = {
    "subject": ("이", "가"),
    "object": ("을", "를"),
    "topic": ("은", "는"),
    "with": ("과", "와"),
    "direction": ("으로", "로"),
}


def particle(kind: str, before: str) -> str:
    """The form of particle ``kind`` after the token ``before``.

    Args:
        kind: one of :data:`PARTICLES` (``"subject"``, ``"object"``, ``"topic"``, ``"with"``,
            ``"direction"``).
        before: the token the particle follows.

    Returns:
        e.g. ``particle("subject", "곰") == "이"``, ``particle("direction", "말") == "로"``.
    """
    try:
        after_consonant, after_vowel = PARTICLES[kind]
    except KeyError:
        raise ValueError(f"kind must be one of {', '.join(PARTICLES)}, got {kind!r}") from None
    final = final_consonant(before)
    if final == 0 or (final == _FINAL_RIEUL and kind == "direction"):
        return after_vowel
    return after_consonant


def _add_final(syllables: str, final: int) -> str:
    """``syllables`` with consonant ``final`` added to its last (open) syllable: 자 + ㄴ → 잔."""
    if final_consonant(syllables) != 0:
        raise ValueError(f"{syllables!r} already ends in a consonant")
    return syllables[:-1] + chr(ord(syllables[-1]) + final)


# --------------------------------------------------------------------------------------------
# Lexicon
# --------------------------------------------------------------------------------------------

DECL, ADN, NOM, AND, BUT = range(5)  # verb endings: -다, adnominal, -기, -고, -지만


def _forms(stem: str, adnominal: str, decl: str) -> tuple[str, ...]:
    return (decl, adnominal, stem + "기", stem + "고", stem + "지만")


def _verb_forms(stem: str) -> tuple[str, ...]:
    """Regular action verb: 자 → 잔다, 자는; 먹 → 먹는다, 먹는."""
    final = final_consonant(stem)
    if final == _FINAL_RIEUL:
        raise ValueError(f"ㄹ-stem {stem!r} is irregular: store its forms")
    decl = _add_final(stem, _FINAL_NIEUN) + "다" if final == 0 else stem + "는다"
    return _forms(stem, stem + "는", decl)


def _adj_forms(stem: str, adnominal: str | None = None) -> tuple[str, ...]:
    """Descriptive verb: 작 → 작다, 작은; 크 → 크다, 큰; an irregular adnominal is given."""
    if adnominal is None:
        if final_consonant(stem) == _FINAL_RIEUL:
            raise ValueError(f"ㄹ-stem {stem!r} is irregular: store its adnominal form")
        adnominal = _add_final(stem, _FINAL_NIEUN) if final_consonant(stem) == 0 else stem + "은"
    return _forms(stem, adnominal, stem + "다")


# noun counter
_NOUN_TABLE = """
고양이 마리
개 마리
새 마리
말 마리
코끼리 마리
토끼 마리
소년 명
아이 명
쥐 마리
소 마리
소녀 명
벌 마리
집 채
나무 그루
정원 개
학교 개
사과 개
달걀 개
뼈 개
치즈 개
"""
_NOUN = {n: tuple(row) for n, row in zip(g.NOUNS, map(str.split, _NOUN_TABLE.strip().splitlines()), strict=True)}

# adjective -> (forms for animate nouns, forms for things); one stem for most
_ADJ_FORMS = {
    "small": _adj_forms("작"),
    "big": _adj_forms("크"),
    "young": _adj_forms("어리"),
    "good": _adj_forms("좋"),
    "fat": _adj_forms("뚱뚱하"),
    "beautiful": _adj_forms("아름답", "아름다운"),  # ㅂ-irregular
    "red": _adj_forms("빨갛", "빨간"),  # ㅎ-irregular
    "green": _adj_forms("푸르"),
    "black": _adj_forms("검"),
    "white": _adj_forms("하얗", "하얀"),  # ㅎ-irregular
    "tired": _adj_forms("피곤하"),
    "happy": _adj_forms("행복하"),
    "sick": _adj_forms("아프"),
}
_OLD_ANIMATE = _adj_forms("늙었", "늙은")  # "is old" is a state: 늙었다
_OLD_THING = _adj_forms("오래되었", "오래된")
_ADJ = {a: (_OLD_ANIMATE, _OLD_THING) if a.key == "old" else (_ADJ_FORMS[a.key],) * 2 for a in g.ADJS}


class _Verb:
    """Korean forms of a verb: ``forms[ending]``; ``split`` = (noun, forms of 하다) for noun+하다 verbs."""

    __slots__ = ("forms", "split", "to_thing")

    def __init__(self, stem: str, split: str | None = None, to_thing: str = "에"):
        self.forms = _verb_forms(stem)
        self.split = None if split is None else (split, _verb_forms(stem[len(split) :]))
        self.to_thing = to_thing  # particle of a to-phrase naming a thing (animate: 에게)


_VERB = {
    v: _Verb(*spec) if spec else None
    for v, spec in zip(
        g.VERBS,
        (
            ("자",),
            ("달리",),
            ("노래하", "노래"),
            ("헤엄치",),
            ("뛰어오르",),
            ("기다리",),
            ("도착하", "도착"),
            ("보",),
            ("먹",),
            ("좋아하",),
            ("지켜보",),
            ("찾",),
            ("따라가",),
            ("듣",),  # ㄷ-irregular only before a vowel ending; ours all start with a consonant
            ("주",),
            ("보여주",),
            ("가", None, "direction"),
            ("말하", "말"),
            (),  # the copula has no word: its clause ends in the predicate adjective (피곤하다)
        ),
        strict=True,
    )
}
_ADV = {a: ko for a, ko in zip(g.ADVS, ("자주", "항상", "가끔", "드물게", "빨리", "천천히", "잘"), strict=True)}
# determiner -> word before the noun, or (for numerals) after it
_DET_KO = (None, None, "몇몇", "두", "세", "내", "그의", "그녀의", "너의", "이", "모든")
_DET = {d: ko for d, ko in zip(g.DETS, _DET_KO, strict=True)}
_PRON = {p: ko for p, ko in zip(g.PRONOUNS, ("그", "그녀", "그들"), strict=True)}
_CONJ_ENDING = {c: e for c, e in zip(g.CONJS, (AND, BUT, NOM), strict=True)}
_BECAUSE = g.CONJS[2]

# Postpositions: per Korean token after the noun phrase (token, sure offsets, possible offsets,
# possible link to the noun) with offsets into the English preposition's words; a token naming a
# PARTICLES kind takes its batchim form.
_P = g.PREPS
_LOC = {"near": "근처", "in": "안", "on": "위", "under": "아래", "behind": "뒤", "in front of": "앞", "next to": "옆"}


def _spatial(key: str, after: str) -> tuple:
    offs = tuple(range(_P[key].cost))
    return ((_LOC[key], offs, (), False), (after, (), offs, False))


_CLAUSE_PP = {_P[k]: _spatial(k, "에서") for k in _LOC}
_CLAUSE_PP[_P["with"]] = (("with", (0,), (), True), ("함께", (0,), (), False))
_CLAUSE_PP[_P["far from"]] = (("에서", (1,), (), True), ("먼", (0,), (), False), ("곳", (), (0,), False))
_CLAUSE_PP[_P["far from"]] += (("에서", (), (0,), False),)
_NOUN_PP = {_P[k]: _spatial(k, "의") for k in _LOC}
_NOUN_PP[_P["with"]] = (("with", (0,), (), True), ("함께", (0,), (), False), ("있는", (), (0,), False))
_NOUN_PP[_P["far from"]] = (("에서", (1,), (), True), ("먼", (0,), (), False))
_NOUN_PP[_P["of"]] = (("의", (0,), (), True),)

# Tokens a particle may follow without a space in the written form; "이" is also the demonstrative.
_ATTACHED = frozenset({"가", "을", "를", "은", "는", "와", "과", "으로", "로", "에게", "에", "에서", "의", "들", "."})
_NOMINALS = frozenset(
    {row[0] for row in _NOUN.values()} | {row[1] for row in _NOUN.values()} | set(_PRON.values()) | {"들"}
)

# --------------------------------------------------------------------------------------------
# Realisation
# --------------------------------------------------------------------------------------------


def _animate(np: g.NounPhrase) -> bool:
    return np.pron is not None or np.noun.anim


def _np(np: g.NounPhrase, K: list) -> int:
    """Append the noun phrase (without its case particle); return the English position of its head."""
    head = np.i_head
    if np.pron is not None:
        K.append((_PRON[np.pron], (head,), (), False))
        return head
    if np.rel is not None:
        _clause(np.rel, K, ADN, ())
    if np.pp is not None:
        _pp(np.pp, K, _NOUN_PP)
    det = np.det
    det_ko = _DET[det]
    if det_ko is not None and not det.number:
        K.append((det_ko, (np.i_det,), (), False))
    thing = not np.noun.anim
    if np.pre is not None:
        K.append((_ADJ[np.pre][thing][ADN], (np.i_pre,), (), True))
    if np.post is not None:
        K.append((_ADJ[np.post][thing][ADN], (np.i_post,), (), True))
    noun, counter = _NOUN[np.noun]
    K.append((noun, (head,), (), True))
    if det.number:
        K.append((det_ko, (np.i_det,), (), False))
        K.append((counter, (), (np.i_det, head), False))
    elif np.pl:
        K.append(("들", (), (head,), False))
    return head


def _pp(pp: list, K: list, table: dict) -> None:
    prep, sub, i0 = pp
    head = _np(sub, K)
    for tok, sure, possible, on_noun in table[prep]:
        if tok in PARTICLES:
            tok = particle(tok, K[-1][0])
        possible = tuple(i0 + o for o in possible)
        K.append((tok, tuple(i0 + o for o in sure), tuple(sorted((head, *possible))) if on_noun else possible, False))


def _case(K: list, kind: str, head: int) -> None:
    K.append((particle(kind, K[-1][0]), (), (head,), False))


def _clause(c: g.Clause, K: list, ending: int, also: tuple[int, ...]) -> None:
    """Append clause ``c`` with verb ending ``ending``; ``also``: English positions the verb may link to."""
    if c.gap != 1:
        _case(K, "subject", _np(c.subj, K))
    if c.pp is not None:
        _pp(c.pp, K, _CLAUSE_PP)
    verb = c.verb
    if c.to is not None:
        head = _np(c.to, K)
        if _animate(c.to):
            tok = "에게"
        else:
            tok = _VERB[verb].to_thing
            if tok in PARTICLES:
                tok = particle(tok, K[-1][0])
        K.append((tok, (c.i_to,), (head,), False))
    if c.obj is not None:
        _case(K, "object", _np(c.obj, K))
    if c.adv is not None:
        K.append((_ADV[c.adv], (c.i_adv,), (), True))
    links = []  # English words the verb form expresses without translating them
    if c.gap:
        links.append(c.i_that)
    if verb.kind == g.COP:
        links.append(c.i_verb)  # is / are
        links.extend(also)
        if c.neg:
            K.append(("안", (c.i_not,), (), False))
        form = _ADJ[c.pred][not _animate(c.agr)][ending]
        K.append((form, (c.i_pred,), tuple(sorted(links)), True))
        return
    if c.neg:
        links.append(c.i_do)
    links.extend(also)
    links = tuple(sorted(links))
    v = _VERB[verb]
    sure = (c.i_verb,)
    if not c.neg:
        K.append((v.forms[ending], sure, links, True))
    elif v.split is None:
        K.append(("안", (c.i_not,), (), False))
        K.append((v.forms[ending], sure, links, True))
    else:
        noun, forms = v.split
        K.append((noun, sure, links, True))
        K.append(("안", (c.i_not,), (), False))
        K.append((forms[ending], sure, links, True))


def realise(
    s: g.Sentence,
) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], tuple[bool, ...]]:
    """Korean tokens, sure links, possible links and content flags of ``s``.

    :func:`attnlab.data.corpus.english.realise` must have run on ``s`` first (it records the English
    positions the links point to).

    Args:
        s: an abstract sentence built with :data:`RESTRICTIONS`.

    Returns:
        ``(tokens, sure, possible, content)``, one entry per Korean token.
    """
    # Units: a main clause preceded by the reason clauses that explain it (moved to its front).
    units: list[tuple[g.Clause, list[g.Clause]]] = []
    for c in s.clauses:
        if c.conj is _BECAUSE and units:
            units[-1][1].insert(0, c)
        else:
            units.append((c, [c]))
    K: list = []
    for u, (main, clauses) in enumerate(units):
        nxt = units[u + 1][0] if u + 1 < len(units) else None
        for c in clauses:
            if c is not main:
                _clause(c, K, NOM, ())
                K.append(("때문에", (c.i_conj,), (), False))
            elif nxt is None:
                _clause(c, K, DECL, ())
            else:  # the next unit's and/but becomes this verb's ending
                _clause(c, K, _CONJ_ENDING[nxt.conj], (nxt.i_conj,))
    K.append((".", (s.i_end,), (), False))
    toks, sure, possible, content = zip(*K, strict=True)
    return toks, sure, possible, content


def join_surface(tokens: Sequence[str]) -> str:
    """The written form of Korean tokens: particles, 들 and "." join the word before them.

    "이" joins only after a noun, a pronoun, 들 or a counter (elsewhere it is the demonstrative
    "this"): ``join_surface("이 고양이 가 잔다 .".split()) == "이 고양이가 잔다."``.

    Args:
        tokens: Korean tokens as produced by :func:`realise`.

    Returns:
        One string.
    """
    words: list[str] = []
    prev = None
    for tok in tokens:
        if words and (tok in _ATTACHED or (tok == "이" and prev in _NOMINALS)):
            words[-1] += tok
        else:
            words.append(tok)
        prev = tok
    return " ".join(words)
