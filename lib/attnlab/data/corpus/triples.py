"""Multi-source triples: one abstract sentence in English, French and Korean, with both gold link sets.

Lesson 07's multi-source translation (Zoph & Knight 2016, "Multi-Source Neural Translation") reads a
French and a Korean sentence and writes the English one. The grammar makes that corpus for free:
one abstract sentence (:mod:`~attnlab.data.corpus.grammar`) realised by the three realisers gives three
exact translations of each other, and the two target realisers already link every French and
Korean token to the English positions it translates.

One sentence, two sets of restrictions
--------------------------------------
Each target language switches off what it cannot render (:class:`~attnlab.data.corpus.grammar.Restrictions`);
a triple's sentence must be renderable in both, so it is built with :func:`joint_restrictions` of
the French and the Korean ones: a combination is allowed only where both languages allow it (every
field of ``Restrictions`` says "allow", so this is a field-wise *and*). Today French allows
everything, so the joint restrictions equal Korean's. The triples draw from random streams of their
own (``"attnlab.triples/..."``), so the English→French and English→Korean corpora -- their seeds,
streams and cached files -- are untouched by this module.

A :class:`Triple` keeps the two sentence pairs exactly as the single-target corpora would hold
them: ``triple.fr`` is the English→French :class:`~attnlab.data.corpus.splits.Pair` of the sentence,
``triple.ko`` the English→Korean one (same English ``src``). A test checks both against their
standalone realisations of the same tree.

The links, inverted
-------------------
The corpus links point from a target token to English positions (``Pair.align[t]`` = the English
positions French token ``t`` translates). Translating *into* English needs them the other way round:
for English token ``e``, the French (Korean) positions whose links contain ``e``. :func:`invert_links`
does that, and :meth:`Triple.to_english` returns the French→English (Korean→English) pair with the
inverted links in ``align`` (and, for Korean, the inverted possible-only links in ``possible``), so
:func:`attnlab.data.metrics.alignment_error_rate` and :func:`~attnlab.data.metrics.alignment_agreement` score
an attention over French (Korean) for each English token as they score any pair. Inverting keeps
Och & Ney's sets apart: a Korean link ``(t, e)`` is sure or possible, never both, whichever side
lists it. English tokens may have no Korean link (the/a) but always have a French one.

``Triple.en_content[e]`` is True for the English content words (nouns, lexical verbs, adjectives,
adverbs): those with a sure link to a Korean content token. (French would give the same set plus
the do/does of negation, which the French verb absorbs.)

Splits and cache
----------------
:func:`make_triple_splits` draws test (stratified by English length bucket, distinct), then valid
(distinct, none in test), then train (none in test or valid), as :func:`~attnlab.data.corpus.splits.make_splits`
does for pairs and with its drawing code: no English sentence is in two splits.
:func:`load_triple_splits` caches them in ``<data_dir>/corpus/triples-<version>-<hash>-{fr,ko}.jsonl.gz``,
two files in the format of :func:`~attnlab.data.corpus.splits.load_splits` (one per side, the English
side equal in both). Generating 100,000 triples costs about 25 s on the course machine, reading them
back a few seconds.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnlab.core.checks import check_choice, check_int
from attnlab.data.corpus import english, french, korean
from attnlab.data.corpus.grammar import Restrictions, Sentence, build
from attnlab.data.corpus.splits import (
    BUCKETS,
    CORPUS_VERSIONS,
    Pair,
    Splits,
    _check_buckets,
    _draw,
    _read_cache,
    _write_cache,
    bucket_name,
)
from attnlab.data.paths import data_dir as results_data_dir

__all__ = [
    "CORPUS_VERSION",
    "LANGS",
    "LANG_NAMES",
    "RESTRICTIONS",
    "joint_restrictions",
    "invert_links",
    "Triple",
    "TripleSplits",
    "realise_triple",
    "generate_triples",
    "make_triple_splits",
    "load_triple_splits",
]

# Bump when the triples change for a reason the French and Korean versions do not record (the
# cache key holds those too, so a bump of either invalidates the cached triples by itself).
CORPUS_VERSION = "synth-frkoen-1"
LANGS = ("fr", "ko")  # the source languages, in the order every multi-source tensor stacks them
LANG_NAMES = {"fr": "French", "ko": "Korean"}


def joint_restrictions(*restrictions: Restrictions) -> Restrictions:
    """The restrictions of a sentence that every one of several languages must render.

    Every field of :class:`~attnlab.data.corpus.grammar.Restrictions` allows a combination, so a
    combination is allowed jointly when each language allows it.

    Args:
        *restrictions: one :class:`Restrictions` per language (at least one).

    Returns:
        The field-wise *and*.

    Raises:
        TypeError: an argument is not a :class:`Restrictions`.
        ValueError: no argument.
    """
    if not restrictions:
        raise ValueError("joint_restrictions needs at least one Restrictions")
    for r in restrictions:
        if not isinstance(r, Restrictions):
            raise TypeError(f"restrictions must be Restrictions, got {type(r).__name__}")
    return Restrictions(
        **{f.name: all(getattr(r, f.name) for r in restrictions) for f in dataclasses.fields(Restrictions)}
    )


RESTRICTIONS = joint_restrictions(french.RESTRICTIONS, korean.RESTRICTIONS)


def invert_links(links: Sequence[Sequence[int]], n: int) -> tuple[tuple[int, ...], ...]:
    """Turn per-token links around: ``links[t]`` lists positions ``e < n``; the result lists, per ``e``, those ``t``.

    Args:
        links: per token ``t`` of one side, the (sorted) positions of the other side it links to.
        n: length of the other side.

    Returns:
        ``n`` sorted tuples: entry ``e`` holds every ``t`` with ``e in links[t]``.

    Raises:
        ValueError: a link outside ``[0, n)``.
    """
    n = check_int("n", n, minimum=0)
    out: list[list[int]] = [[] for _ in range(n)]
    for t, targets in enumerate(links):
        for e in targets:
            if not 0 <= e < n:
                raise ValueError(f"links[{t}] holds position {e}, outside [0, {n})")
            out[e].append(t)  # t grows, so every list comes out sorted
    return tuple(map(tuple, out))


@dataclass(frozen=True)
class Triple:
    """One sentence in three languages: its English→French and English→Korean pairs (same English ``src``).

    Attributes:
        fr: the English→French :class:`~attnlab.data.corpus.splits.Pair` (``align`` per French token).
        ko: the English→Korean pair (``align``/``possible`` per Korean token).
    """

    fr: Pair
    ko: Pair

    def __post_init__(self):
        if self.fr.src != self.ko.src:
            raise ValueError(
                f"a triple's two pairs must share the English sentence, got {self.fr.src} and {self.ko.src}"
            )

    @property
    def src(self) -> tuple[str, ...]:
        """The English sentence, named as in the pairs: the key that keeps the splits disjoint."""
        return self.fr.src

    @property
    def en(self) -> tuple[str, ...]:
        """The English sentence (the multi-source model's target)."""
        return self.fr.src

    @property
    def bucket(self) -> str:
        """Length bucket of the English sentence (:data:`~attnlab.data.corpus.splits.BUCKETS`)."""
        return bucket_name(len(self.en))

    def side(self, lang: str) -> tuple[str, ...]:
        """The tokens of ``lang`` (``"fr"`` or ``"ko"``)."""
        return getattr(self, check_choice("lang", lang, LANGS)).tgt

    @functools.cached_property
    def en_content(self) -> tuple[bool, ...]:
        """Per English token: a content word (a sure link from a Korean content token; see the module docstring)."""
        content = {e for links, c in zip(self.ko.align, self.ko.content, strict=True) if c for e in links}
        return tuple(e in content for e in range(len(self.en)))

    def to_english(self, lang: str) -> Pair:
        """The ``lang``→English pair: ``src`` the ``lang`` tokens, ``tgt`` English, links inverted.

        ``align[e]`` holds the ``lang`` positions linked (sure) to English token ``e``; for Korean,
        ``possible[e]`` the possible-only ones (None for French); ``content`` is :attr:`en_content`.
        """
        pair = getattr(self, check_choice("lang", lang, LANGS))
        n = len(self.en)
        possible = None if pair.possible is None else invert_links(pair.possible, n)
        return Pair(pair.tgt, self.en, invert_links(pair.align, n), self.en_content, possible)


@dataclass(frozen=True)
class TripleSplits:
    """Train / valid / test lists of triples; no English sentence is in two of them."""

    train: list[Triple]
    valid: list[Triple]
    test: list[Triple]


def realise_triple(s: Sentence) -> Triple:
    """The triple of an abstract sentence (built with :data:`RESTRICTIONS`, or renderable in both languages).

    Runs the English realiser first (the French and Korean links point to the positions it records).
    """
    en = english.realise(s)
    fr_tokens, fr_align, fr_content = french.realise(s)
    ko_tokens, ko_sure, ko_possible, ko_content = korean.realise(s)
    return Triple(Pair(en, fr_tokens, fr_align, fr_content), Pair(en, ko_tokens, ko_sure, ko_content, ko_possible))


def _make_triple(rng: random.Random, lo: int, hi: int) -> Triple:
    return realise_triple(build(rng, lo, hi, RESTRICTIONS))


def generate_triples(n: int, *, seed: int, buckets: Sequence[tuple[int, int]] = BUCKETS) -> list[Triple]:
    """``n`` triples, English lengths spread evenly over the buckets (as
    :func:`~attnlab.data.corpus.splits.generate_pairs`).

    Args:
        n: number of triples.
        seed: random seed (a stream of its own: no corpus pair changes).
        buckets: ``(lo, hi)`` English length ranges (tokens including ".").
    """
    check_int("n", n, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    rng = random.Random(f"attnlab.triples/generate/{seed}")
    return [_make_triple(rng, *bs[int(rng.random() * len(bs))]) for _ in range(n)]


def make_triple_splits(
    *,
    n_train: int = 100_000,
    n_valid: int = 2_000,
    test_per_bucket: int = 500,
    seed: int = 0,
    buckets: Sequence[tuple[int, int]] = BUCKETS,
) -> TripleSplits:
    """Train / valid / test triples with no English sentence in two splits.

    The test split is drawn first, ``test_per_bucket`` distinct English sentences per bucket in
    bucket order; then valid (distinct, none in test); then train (none in test or valid; short
    sentences may repeat inside train), each from its own seeded stream.

    Args:
        n_train, n_valid: sizes.
        test_per_bucket: test triples per English length bucket.
        seed: random seed.
        buckets: ``(lo, hi)`` English length ranges.

    Returns:
        :class:`TripleSplits`.

    Raises:
        TypeError, ValueError: a size or seed that is not an int, a negative size, bad buckets, or
            more distinct sentences asked for than the buckets hold.
    """
    check_int("n_train", n_train, minimum=0)
    check_int("n_valid", n_valid, minimum=0)
    check_int("test_per_bucket", test_per_bucket, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    test_rng = random.Random(f"attnlab.triples/test/{seed}")
    held: set = set()
    test: list[Triple] = []
    for b in bs:
        part = _draw(test_rng, test_per_bucket, (b,), held, True, "test", _make_triple)
        held.update(t.src for t in part)
        test.extend(part)
    valid = _draw(random.Random(f"attnlab.triples/valid/{seed}"), n_valid, bs, held, True, "valid", _make_triple)
    held.update(t.src for t in valid)
    train = _draw(random.Random(f"attnlab.triples/train/{seed}"), n_train, bs, held, False, "train", _make_triple)
    return TripleSplits(train=train, valid=valid, test=test)


_SIGNATURE = inspect.signature(make_triple_splits)
_PARTS = ("train", "valid", "test")


def _cache_key(kwargs: dict) -> dict:
    bound = _SIGNATURE.bind(**kwargs)
    bound.apply_defaults()
    key = dict(bound.arguments)
    key["buckets"] = [list(b) for b in _check_buckets(key["buckets"])]
    key["components"] = [CORPUS_VERSIONS[lang] for lang in LANGS]  # a French or Korean bump invalidates it
    return key


def load_triple_splits(data_dir: str | Path | None = None, **make_triple_splits_kwargs) -> TripleSplits:
    """:func:`make_triple_splits`, cached on disk (see the module docstring).

    The two files hold one side each, in :func:`~attnlab.data.corpus.splits.load_splits`'s format; they
    are rebuilt when either is missing, unreadable, written for other arguments or versions, or
    when their English sides differ.

    Args:
        data_dir: defaults to ``$ATTNLAB_DATA_DIR`` or the repository's ``data/`` folder.
        **make_triple_splits_kwargs: forwarded to :func:`make_triple_splits`.

    Returns:
        :class:`TripleSplits`, equal to ``make_triple_splits(**make_triple_splits_kwargs)``.
    """
    key = _cache_key(make_triple_splits_kwargs)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(data_dir) if data_dir is not None else results_data_dir()
    paths = {lang: root / "corpus" / f"triples-{CORPUS_VERSION}-{digest}-{lang}.jsonl.gz" for lang in LANGS}
    versions = {lang: f"{CORPUS_VERSION}/{lang}" for lang in LANGS}
    if all(p.exists() for p in paths.values()):
        sides = {lang: _read_cache(paths[lang], key, versions[lang]) for lang in LANGS}
        if all(s is not None for s in sides.values()):
            try:
                return TripleSplits(
                    **{
                        part: [
                            Triple(fr, ko)
                            for fr, ko in zip(getattr(sides["fr"], part), getattr(sides["ko"], part), strict=True)
                        ]
                        for part in _PARTS
                    }
                )
            except ValueError:  # the two files do not belong together: rebuild both
                pass
    splits = make_triple_splits(**make_triple_splits_kwargs)
    for lang in LANGS:
        side = Splits(**{part: [getattr(t, lang) for t in getattr(splits, part)] for part in _PARTS})
        _write_cache(paths[lang], side, key, versions[lang])
    return splits
