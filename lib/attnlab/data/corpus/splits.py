"""Sentence pairs, length buckets, train/valid/test splits and their on-disk cache.

One abstract sentence (:mod:`~attnlab.data.corpus.grammar`) is realised in English (the source) and in
one target language: ``target="fr"`` (:mod:`~attnlab.data.corpus.french`) or ``target="ko"``
(:mod:`~attnlab.data.corpus.korean`). Each target has its own ``CORPUS_VERSION``
(:data:`CORPUS_VERSIONS`); caches, checkpoints and results key on it. English→French is exactly
the corpus of ``synth-enfr-1``: same seed, same pairs, byte for byte.

Lengths: for each pair a length bucket (:data:`BUCKETS`, counted in English tokens including ".")
is drawn uniformly, then a sentence is grown to a target length inside it, so the buckets are
equally full for every target language.

Alignments
----------
``Pair.align[t]`` (sure links) and ``Pair.possible[t]`` (possible-only links) are sorted tuples of
English positions for target token ``t``, following Och & Ney (2003): a *sure* link says the
English word translates the target token; a *possible* link says the two belong together without
translating each other (a Korean particle and its noun). The possible set of the literature is
``P = S ∪ possible``; ``possible`` holds only the links that are not sure, so the two never
overlap. Either may be empty, and English tokens may have no link at all (articles in Korean).
French pairs have no possible links (``possible`` is None). ``Pair.content[t]`` is True when
target token ``t`` is a content word with at least one sure link. All three are None for real
corpora. The per-language conventions are in each realiser's docstring.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
import os
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnlab.core.checks import check_choice, check_int
from attnlab.data.corpus import english, french, korean
from attnlab.data.corpus.grammar import build
from attnlab.data.paths import data_dir as results_data_dir

__all__ = [
    "TARGETS",
    "CORPUS_VERSIONS",
    "CORPUS_VERSION",
    "BUCKETS",
    "BUCKET_NAMES",
    "MIN_SRC_LEN",
    "MAX_SRC_LEN",
    "bucket_name",
    "corpus_version",
    "check_target",
    "Pair",
    "Splits",
    "generate_pairs",
    "make_splits",
    "make_test_split",
    "load_splits",
]

TARGETS = ("fr", "ko")
CORPUS_VERSIONS = {"fr": french.CORPUS_VERSION, "ko": korean.CORPUS_VERSION}
CORPUS_VERSION = french.CORPUS_VERSION  # the default pair's version (English→French)

BUCKETS: tuple[tuple[int, int], ...] = ((1, 10), (11, 20), (21, 30), (31, 40))
BUCKET_NAMES = ("1-10", "11-20", "21-30", "31-40")

MIN_SRC_LEN = 3  # "he sleeps ." is the shortest sentence the grammar makes
MAX_SRC_LEN = 40  # the generator can reach any length up to here; beyond it is untested


def check_target(target) -> str:
    """Return ``target`` after checking it names a target language (:data:`TARGETS`).

    Raises:
        ValueError: an unknown target, naming the choices.
    """
    return check_choice("target", target, TARGETS)


def corpus_version(target: str = "fr") -> str:
    """``CORPUS_VERSION`` of the English→``target`` corpus (``"synth-enfr-1"``, ``"synth-enko-1"``)."""
    return CORPUS_VERSIONS[check_target(target)]


def bucket_name(n_src_tokens: int, buckets: Sequence[tuple[int, int]] = BUCKETS) -> str:
    """Name of the length bucket holding a source of ``n_src_tokens`` tokens.

    Args:
        n_src_tokens: number of English tokens, including the final ".".
        buckets: ``(lo, hi)`` inclusive ranges.

    Returns:
        ``"lo-hi"``, e.g. ``"1-10"``.

    Raises:
        ValueError: when no bucket holds the length.
    """
    for lo, hi in buckets:
        if lo <= n_src_tokens <= hi:
            return f"{lo}-{hi}"
    raise ValueError(f"a source of {n_src_tokens} tokens falls outside all buckets {tuple(buckets)}")


@dataclass(frozen=True)
class Pair:
    """One sentence pair.

    ``align`` (sure links), ``content`` and ``possible`` (possible-only links) have one entry per
    target token; see the module docstring. They are None for real corpora, and ``possible`` is
    None for French.
    """

    src: tuple[str, ...]
    tgt: tuple[str, ...]
    align: tuple[tuple[int, ...], ...] | None = None
    content: tuple[bool, ...] | None = None
    possible: tuple[tuple[int, ...], ...] | None = None

    @property
    def bucket(self) -> str:
        """Length bucket of the source (default :data:`BUCKETS`)."""
        return bucket_name(len(self.src))


@dataclass(frozen=True)
class Splits:
    """Train / valid / test lists of pairs; no source sentence is in two of them."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


def _pair_fr(rng, lo, hi) -> Pair:
    s = build(rng, lo, hi, french.RESTRICTIONS)
    return Pair(english.realise(s), *french.realise(s))


def _pair_ko(rng, lo, hi) -> Pair:
    s = build(rng, lo, hi, korean.RESTRICTIONS)
    src = english.realise(s)
    tgt, sure, possible, content = korean.realise(s)
    return Pair(src, tgt, sure, content, possible)


_MAKERS = {"fr": _pair_fr, "ko": _pair_ko}


def _check_buckets(buckets) -> tuple[tuple[int, int], ...]:
    try:
        bs = tuple(tuple(b) for b in buckets)
    except TypeError:
        raise ValueError(f"buckets must be a sequence of (lo, hi) pairs, got {buckets!r}") from None
    if not bs:
        raise ValueError(f"buckets must not be empty, got {buckets!r}")
    for b in bs:
        if len(b) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in b):
            raise ValueError(f"buckets: each bucket must be a pair of ints (lo, hi), got {b!r}")
        lo, hi = b
        if lo < 1:
            raise ValueError(f"buckets: lower bound must be >= 1, got bucket {b!r}")
        if lo > hi:
            raise ValueError(f"buckets: bucket {b!r} is reversed (lo > hi)")
        if hi > MAX_SRC_LEN:
            raise ValueError(
                f"buckets: bucket {b!r} exceeds the longest source the grammar makes ({MAX_SRC_LEN} tokens)"
            )
        if hi < MIN_SRC_LEN:
            raise ValueError(
                f"buckets: bucket {b!r} is below the shortest source the grammar makes ({MIN_SRC_LEN} tokens)"
            )
    ordered = sorted(bs)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b[0] <= a[1]:
            raise ValueError(f"buckets: buckets {a!r} and {b!r} overlap")
    return bs


def generate_pairs(
    n: int, *, seed: int, buckets: Sequence[tuple[int, int]] = BUCKETS, target: str = "fr"
) -> list[Pair]:
    """Generate ``n`` sentence pairs, lengths spread evenly over the buckets.

    For each pair a bucket is picked uniformly, then a sentence is grown to a random target
    length inside it. Uses only ``random.Random(seed)``: the same seed gives the same pairs.

    Args:
        n: number of pairs.
        seed: random seed.
        buckets: ``(lo, hi)`` source-length ranges (English tokens including ".").
        target: ``"fr"`` or ``"ko"``.

    Returns:
        A list of :class:`Pair` with ``align`` and ``content`` (and for Korean ``possible``) filled in.
    """
    check_int("n", n, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    make = _MAKERS[check_target(target)]
    rng = random.Random(seed)
    rnd = rng.random
    return [make(rng, *bs[int(rnd() * len(bs))]) for _ in range(n)]


def _draw(rng, n, buckets, held: set, unique: bool, what: str, make) -> list[Pair]:
    """``n`` pairs whose sources are not in ``held`` (and distinct from each other when ``unique``)."""
    out: list[Pair] = []
    seen = set() if unique else None
    tries, max_tries = 0, 50 * n + 1000
    while len(out) < n:
        tries += 1
        if tries > max_tries:
            raise ValueError(f"could only draw {len(out)} of {n} distinct {what} sentences in buckets {buckets}")
        lo, hi = buckets[int(rng.random() * len(buckets))]
        p = make(rng, lo, hi)
        if p.src in held or (unique and p.src in seen):
            continue
        if unique:
            seen.add(p.src)
        out.append(p)
    return out


def make_test_split(
    *,
    seed: int,
    per_bucket: int = 500,
    buckets: Sequence[tuple[int, int]] = BUCKETS,
    exclude: Iterable[tuple[str, ...]] | None = None,
    target: str = "fr",
) -> list[Pair]:
    """A stratified test split: exactly ``per_bucket`` distinct sources per bucket, in bucket order.

    ``make_test_split(seed=s, per_bucket=k)`` equals ``make_splits(seed=s, test_per_bucket=k).test``.

    Args:
        seed: random seed.
        per_bucket: pairs per bucket.
        buckets: ``(lo, hi)`` source-length ranges.
        exclude: source token tuples that must not appear (e.g. a training set's sources).
        target: ``"fr"`` or ``"ko"``.

    Returns:
        ``len(buckets) * per_bucket`` pairs.
    """
    check_int("per_bucket", per_bucket, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    make = _MAKERS[check_target(target)]
    held = set(exclude) if exclude is not None else set()
    rng = random.Random(f"attnlab.data/test/{seed}")
    out: list[Pair] = []
    for b in bs:
        part = _draw(rng, per_bucket, (b,), held, True, "test", make)
        held.update(p.src for p in part)
        out.extend(part)
    return out


def make_splits(
    *,
    n_train: int = 100_000,
    n_valid: int = 2_000,
    test_per_bucket: int = 500,
    seed: int = 0,
    buckets: Sequence[tuple[int, int]] = BUCKETS,
    target: str = "fr",
) -> Splits:
    """Generate train / valid / test splits with no source sentence in two splits.

    The test split is drawn first (stratified, see :func:`make_test_split`), then valid
    (distinct sources, none in test), then train (none in test or valid; short sentences may
    repeat inside train, as they would in any corpus).

    Args:
        n_train: training pairs.
        n_valid: validation pairs.
        test_per_bucket: test pairs per bucket.
        seed: random seed.
        buckets: ``(lo, hi)`` source-length ranges.
        target: ``"fr"`` (English→French) or ``"ko"`` (English→Korean).

    Returns:
        :class:`Splits`.

    Raises:
        ValueError: an unknown ``target``, a negative size, bad buckets, or more distinct
            sentences asked for than the buckets hold.
    """
    check_int("n_train", n_train, minimum=0)
    check_int("n_valid", n_valid, minimum=0)
    check_int("test_per_bucket", test_per_bucket, minimum=0)
    check_int("seed", seed)
    bs = _check_buckets(buckets)
    make = _MAKERS[check_target(target)]
    test = make_test_split(seed=seed, per_bucket=test_per_bucket, buckets=bs, target=target)
    held = {p.src for p in test}
    valid = _draw(random.Random(f"attnlab.data/valid/{seed}"), n_valid, bs, held, True, "valid", make)
    held.update(p.src for p in valid)
    train = _draw(random.Random(f"attnlab.data/train/{seed}"), n_train, bs, held, False, "train", make)
    return Splits(train=train, valid=valid, test=test)


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


_MAKE_SPLITS_SIGNATURE = inspect.signature(make_splits)


def _cache_key(kwargs: dict) -> tuple[str, dict]:
    """``(target, key)``: the key is the other arguments of :func:`make_splits`, defaults filled in.

    The target is not in the key: it is in the corpus version, which names the file and heads it,
    so French caches written before Korean existed stay valid.
    """
    bound = _MAKE_SPLITS_SIGNATURE.bind(**kwargs)
    bound.apply_defaults()
    key = dict(bound.arguments)
    target = check_target(key.pop("target"))
    key["buckets"] = [list(b) for b in _check_buckets(key["buckets"])]
    return target, key


def _links_text(links) -> str:
    return " ".join(",".join(map(str, a)) for a in links)


class _AlignMemo(dict):
    """'3,4' → (3, 4), '' → (), shared between pairs (saves time and memory on load)."""

    def __missing__(self, key):
        value = self[key] = tuple(map(int, key.split(","))) if key else ()
        return value


_BOOL = {"1": True, "0": False}
_SPLIT_NAMES = ("train", "valid", "test")


def _write_cache(path: Path, splits: Splits, key: dict, version: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=4) as f:
        sizes = {name: len(getattr(splits, name)) for name in _SPLIT_NAMES}
        f.write(json.dumps({"corpus_version": version, "kwargs": key, "sizes": sizes}) + "\n")
        for name in _SPLIT_NAMES:
            ps = getattr(splits, name)
            row = {
                "split": name,
                "src": [" ".join(p.src) for p in ps],
                "tgt": [" ".join(p.tgt) for p in ps],
                "align": [_links_text(p.align) for p in ps],
                "content": ["".join("1" if c else "0" for c in p.content) for p in ps],
            }
            if any(p.possible is not None for p in ps):
                row["possible"] = [_links_text(p.possible) for p in ps]
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file


def _read_cache(path: Path, key: dict, version: str) -> Splits | None:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            meta = json.loads(f.readline())
            if meta.get("corpus_version") != version or meta.get("kwargs") != key:
                return None
            rows = {row["split"]: row for row in map(json.loads, f)}
        memo, intern = _AlignMemo(), sys.intern
        links = memo.__getitem__
        parts = {}
        for name in _SPLIT_NAMES:
            row = rows[name]
            n = len(row["src"])
            possible = row.get("possible", [None] * n)
            parts[name] = [
                Pair(
                    tuple(map(intern, s.split(" "))),
                    tuple(map(intern, t.split(" "))),
                    tuple(map(links, a.split(" "))),
                    tuple(map(_BOOL.__getitem__, c)),
                    None if p is None else tuple(map(links, p.split(" "))),
                )
                for s, t, a, c, p in zip(row["src"], row["tgt"], row["align"], row["content"], possible, strict=True)
            ]
    except (OSError, EOFError, ValueError, KeyError, TypeError):  # missing, truncated or foreign file
        return None
    if {k: len(v) for k, v in parts.items()} != meta.get("sizes"):
        return None
    return Splits(**parts)


def load_splits(data_dir: str | Path | None = None, **make_splits_kwargs) -> Splits:
    """:func:`make_splits`, cached on disk.

    The cache lives in ``<data_dir>/corpus/splits-<corpus version>-<hash of kwargs>.jsonl.gz``
    (the version names the target: ``synth-enfr-1``, ``synth-enko-1``): gzip JSON lines, a header
    ``{"corpus_version", "kwargs", "sizes"}`` then one line per split ``{"split", "src": ["the cat
    sleeps .", …], "tgt": […], "align": ["0 1 2 3", "0 1,2 …", …], "content": ["0110", …]}``
    (space-joined tokens; per target token its comma-joined source positions, empty when it has
    none; content flags as 1/0), plus ``"possible"`` in the same form for Korean. It is rebuilt
    when missing, unreadable or written for another corpus version.

    Args:
        data_dir: defaults to ``$ATTNLAB_DATA_DIR`` or the repository's ``data/`` folder.
        **make_splits_kwargs: forwarded to :func:`make_splits` (``target="ko"`` for Korean).

    Returns:
        :class:`Splits`, equal to ``make_splits(**make_splits_kwargs)``.
    """
    target, key = _cache_key(make_splits_kwargs)
    version = CORPUS_VERSIONS[target]
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(data_dir) if data_dir is not None else results_data_dir()
    path = root / "corpus" / f"splits-{version}-{digest}.jsonl.gz"
    if path.exists():
        splits = _read_cache(path, key, version)
        if splits is not None:
            return splits
    splits = make_splits(**make_splits_kwargs)
    _write_cache(path, splits, key, version)
    return splits
