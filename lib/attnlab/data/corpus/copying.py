"""Lesson 10's copy corpus: the course's sentence pairs with proper names and numbers that the target copies verbatim.

A copy pair starts as an ordinary generated pair (:mod:`~attnlab.data.corpus.splits`, same grammar and
realisers) and then every subject pronoun *he*/*she* becomes a proper name -- some after a title -- and
every numeral determiner *two*/*three* a number written in digits::

    he sees two dogs .        ->  Dr. Okafor sees 47 dogs .
    il voit deux chiens .     ->  Dr Okafor voit 47 chiens .
    그 가 개 두 마리 를 본다 .   ->  Okafor 박사 가 개 47 마리 를 본다 .

The name and the number appear verbatim in the target: a model can only get them right by copying.
Titles are translated, not copied: Mr./Mrs./Dr. are M./Mme/Dr in French (before the name) and 씨/여사/박사
in Korean (after it); a Korean subject particle after a name takes the form its last sound needs
(이 after a consonant, 가 after a vowel; a Latin name ends in a vowel sound when it ends in a, e, i, o,
u or y).

Names and numbers come from two disjoint pools: the training and validation splits draw from one, the
test split only from the other, so every name and number of the test split is unseen in training.
Names are made of syllables (capitalised, Latin letters; never a corpus word, which are lower case);
numbers are whole numbers from 10 to 9,999. Each sentence has at least one copied token.

Gold links: a name word and a number are linked to the source word they copy (``CopyPair.copies``
lists them: target position, source position, ``"name"`` or ``"number"``); a title to its title; the
links the pronoun had move to the name's last word. Everything is drawn from ``random.Random`` seeded
by ``seed``: the same arguments give the same pairs. The course's own splits and files are untouched
(this module only reads :func:`~attnlab.data.corpus.splits.generate_pairs`' makers).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.core.checks import check_int, check_probability
from attnlab.data.corpus import korean
from attnlab.data.corpus.splits import (
    _MAKERS,
    BUCKETS,
    MIN_SRC_LEN,
    Pair,
    Splits,
    _check_buckets,
    check_target,
    corpus_version,
)

__all__ = [
    "COPY_VERSION",
    "TITLES",
    "CopyPair",
    "copy_corpus_version",
    "name_pool",
    "number_pool",
    "add_names",
    "make_copy_splits",
]

COPY_VERSION = "copy-1"  # bump whenever the copy pairs change in any way
# English title -> (French, Korean); which pronoun may take it
TITLES = {"Mr.": ("M.", "씨"), "Mrs.": ("Mme", "여사"), "Dr.": ("Dr", "박사")}
_TITLES_FOR = {"he": ("Mr.", "Dr."), "she": ("Mrs.", "Dr.")}
_PRONOUNS = {"fr": {"il": "he", "elle": "she"}, "ko": {"그": "he", "그녀": "she"}}
_NUMERALS = {"fr": ("deux", "trois"), "ko": ("두", "세")}
_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "", "n", "r", "l", "s", "k")
NUMBER_RANGE = (10, 9999)


def copy_corpus_version(target: str = "fr") -> str:
    """The copy corpus's version for ``target``: ``"synth-enfr-1+copy-1"`` (checkpoints key on it)."""
    return f"{corpus_version(target)}+{COPY_VERSION}"


@dataclass(frozen=True)
class CopyPair(Pair):
    """A :class:`~attnlab.data.corpus.splits.Pair` whose target copies some source words verbatim.

    ``copies``: ``(target position, source position, kind)`` for every copied target token, ``kind``
    ``"name"`` or ``"number"``; ``tgt[t] == src[j]`` for each.
    """

    copies: tuple[tuple[int, int, str], ...] = ()


def name_pool(n: int, *, seed: int) -> list[str]:
    """``n`` distinct capitalised syllable names (2-3 syllables), in a seeded order.

    Raises:
        ValueError: ``n`` negative.
    """
    check_int("n", n, minimum=0)
    rng = random.Random(f"attnlab.copy/names/{seed}")
    seen: dict[str, None] = {}
    while len(seen) < n:
        parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(2 + (rng.random() < 0.5))]
        name = ("".join(parts) + rng.choice(_CODAS)).capitalize()
        seen.setdefault(name, None)
    return list(seen)


def number_pool(*, seed: int) -> list[str]:
    """Every whole number of :data:`NUMBER_RANGE` as digits, in a seeded order."""
    numbers = [str(k) for k in range(NUMBER_RANGE[0], NUMBER_RANGE[1] + 1)]
    random.Random(f"attnlab.copy/numbers/{seed}").shuffle(numbers)
    return numbers


def _ends_in_vowel(token: str) -> bool:
    if token[-1].isascii():
        return token[-1].lower() in "aeiouy"
    return korean.final_consonant(token) == 0


def add_names(
    pair: Pair,
    target: str,
    rng: random.Random,
    names: Sequence[str],
    numbers: Sequence[str],
    *,
    title_prob: float = 0.5,
    name_tokens: int = 1,
) -> CopyPair:
    """``pair`` with each subject *he*/*she* made a name and each *two*/*three* a number (see the module docstring).

    Args:
        pair: a generated pair of ``target`` (with gold links).
        target: ``"fr"`` or ``"ko"``.
        rng: draws the names, titles and numbers.
        names: the pool of name words; numbers: the pool of numbers (strings of digits).
        title_prob: probability that a name gets a title.
        name_tokens: words per name (e.g. 2: a first name and a surname).

    Returns:
        A :class:`CopyPair` (``copies`` empty when the pair has no pronoun or numeral to replace).
    """
    check_target(target)
    pronouns, numerals = _PRONOUNS[target], _NUMERALS[target]
    # English slots: position -> replacement words and per word its kind ("title"/"name"/"number")
    slots: dict[int, list[tuple[str, str]]] = {}
    tgt_slot: dict[int, int] = {}  # target position -> English position it replaces
    for t, (tok, links) in enumerate(zip(pair.tgt, pair.align, strict=True)):
        if len(links) != 1:
            continue
        j = links[0]
        if tok in pronouns and pair.src[j].lower() == pronouns[tok]:
            words = [("name", rng.choice(names)) for _ in range(name_tokens)]
            if rng.random() < title_prob:
                words.insert(0, ("title", rng.choice(_TITLES_FOR[pronouns[tok]])))
            slots[j] = [(w, k) for k, w in words]
            tgt_slot[t] = j
        elif tok in numerals and pair.src[j] in ("two", "three"):
            slots[j] = [(rng.choice(numbers), "number")]
            tgt_slot[t] = j
    if not slots:
        return CopyPair(pair.src, pair.tgt, pair.align, pair.content, pair.possible)
    # new English sentence and the map old position -> new positions
    src: list[str] = []
    where: dict[int, list[int]] = {}
    for j, tok in enumerate(pair.src):
        words = slots.get(j, [(tok, "")])
        where[j] = list(range(len(src), len(src) + len(words)))
        src.extend(w for w, _ in words)

    def head(j: int) -> int:
        return where[j][-1]  # a name's last word stands for the pronoun in every other link

    def moved(links) -> tuple[int, ...]:
        return tuple(sorted({head(j) for j in links}))

    tgt, align, content, possible, copies = [], [], [], [], []
    old_possible = pair.possible or [()] * len(pair.tgt)
    for t, tok in enumerate(pair.tgt):
        if t not in tgt_slot:
            new_tok = tok
            if target == "fr" and tok == "qu'" and t + 1 in tgt_slot:
                first = slots[tgt_slot[t + 1]][0]
                if first[1] == "title" or first[0][0].lower() not in "aeiou":
                    new_tok = "que"  # "qu'il" -> "que Dr Okafor", "que Bako" ("qu'Okafor" stays)
            if target == "ko" and t > 0 and t - 1 in tgt_slot and tok in ("이", "가"):
                new_tok = korean.PARTICLES["subject"][_ends_in_vowel(tgt[-1])]
            tgt.append(new_tok)
            align.append(moved(pair.align[t]))
            content.append(pair.content[t])
            possible.append(moved(old_possible[t]))
            continue
        j = tgt_slot[t]
        words = list(zip(slots[j], where[j], strict=True))
        if target == "ko":  # the title follows the name
            words = [w for w in words if w[0][1] != "title"] + [w for w in words if w[0][1] == "title"]
        for (word, kind), pos in words:
            if kind == "title":
                word = TITLES[word][0 if target == "fr" else 1]
            else:
                copies.append((len(tgt), pos, kind))
            tgt.append(word)
            align.append((pos,))
            content.append(True)
            possible.append(())
    return CopyPair(
        tuple(src),
        tuple(tgt),
        tuple(align),
        tuple(content),
        tuple(possible) if pair.possible is not None else None,
        copies=tuple(copies),
    )


def _draw_copy_pairs(n, rng, bucket_rng, buckets, target, names, numbers, title_prob, name_tokens, what):
    make = _MAKERS[target]
    out: list[CopyPair] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 200 * n + 1000:  # pragma: no cover - the checks below rule it out
            raise ValueError(f"could only draw {len(out)} of {n} {what} copy pairs in buckets {buckets}")
        lo, hi = buckets[int(bucket_rng.random() * len(buckets))]
        p = add_names(make(rng, lo, hi), target, rng, names, numbers, title_prob=title_prob, name_tokens=name_tokens)
        if p.copies and len(p.src) <= hi:
            out.append(p)
    return out


def make_copy_splits(
    *,
    target: str = "fr",
    n_train: int = 20_000,
    n_valid: int = 500,
    test_per_bucket: int = 100,
    seed: int = 0,
    n_names: int = 4_000,
    test_share: float = 0.2,
    title_prob: float = 0.5,
    name_tokens: int = 1,
    buckets: Sequence[tuple[int, int]] = BUCKETS,
) -> Splits:
    """Train / valid / test splits of :class:`CopyPair` whose test names and numbers never occur in training.

    Args:
        target: ``"fr"`` or ``"ko"``.
        n_train, n_valid: pairs in the training and validation splits (drawn from the first pool).
        test_per_bucket: test pairs per length bucket (drawn from the held-out pool).
        seed: random seed of the pools and the pairs.
        n_names: size of the name pool (training and test names together).
        test_share: share of the names and numbers held out for the test split, in ``(0, 1)``.
        title_prob: probability that a name has a title.
        name_tokens: words per name (>= 1).
        buckets: ``(lo, hi)`` source-length ranges; lengths are counted after the names are in.

    Returns:
        :class:`~attnlab.data.corpus.splits.Splits` of :class:`CopyPair`; the test split lists its
        buckets in order.

    Raises:
        ValueError: a negative count, a ``test_share`` outside ``(0, 1)``, ``name_tokens`` below 1 or a
            name longer than a bucket can hold (a titled name in the shortest sentence must fit), a pool
            too small to hold out a name.
    """
    target = check_target(target)
    for name, value in (("n_train", n_train), ("n_valid", n_valid), ("test_per_bucket", test_per_bucket)):
        check_int(name, value, minimum=0)
    check_int("seed", seed)
    check_int("n_names", n_names, minimum=2)
    check_probability("test_share", test_share)
    if not 0 < test_share < 1:
        raise ValueError(f"test_share must be in (0, 1) (both pools need names), got {test_share}")
    check_probability("title_prob", title_prob, allow_one=True)
    check_int("name_tokens", name_tokens, minimum=1)
    bs = _check_buckets(buckets)
    shortest = MIN_SRC_LEN + name_tokens  # "Dr. <name words> sleeps ." (the pronoun gives way to them)
    for lo, hi in bs:
        if shortest > hi:
            raise ValueError(
                f"name_tokens={name_tokens}: the shortest sentence with a titled name has {shortest} tokens, "
                f"longer than the bucket ({lo}, {hi}) holds; use fewer name_tokens or longer buckets"
            )
    names = name_pool(n_names, seed=seed)
    numbers = number_pool(seed=seed)
    k = max(1, round(n_names * test_share))
    if k >= n_names:
        raise ValueError(f"n_names={n_names} with test_share={test_share} leaves no training name")
    test_names, train_names = names[:k], names[k:]
    m = round(len(numbers) * test_share)
    test_numbers, train_numbers = numbers[:m], numbers[m:]
    args = (target, title_prob, name_tokens)
    test: list[CopyPair] = []
    rng = random.Random(f"attnlab.copy/test/{seed}")
    for b in bs:
        test += _draw_copy_pairs(test_per_bucket, rng, rng, (b,), target, test_names, test_numbers, *args[1:], "test")
    rng = random.Random(f"attnlab.copy/valid/{seed}")
    valid = _draw_copy_pairs(n_valid, rng, rng, bs, target, train_names, train_numbers, *args[1:], "valid")
    rng = random.Random(f"attnlab.copy/train/{seed}")
    train = _draw_copy_pairs(n_train, rng, rng, bs, target, train_names, train_numbers, *args[1:], "train")
    return Splits(train=train, valid=valid, test=test)
