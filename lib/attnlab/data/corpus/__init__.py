"""Synthetic parallel corpora with gold word alignments: one grammar, one realiser per language.

Why synthetic? The course must run offline, in CI, in minutes, and it wants to *score* attention
maps against true word alignments. A small synchronous grammar gives all three: every English
sentence is produced together with its one translation and, for every target token, the English
positions it translates.

* :mod:`~attnlab.data.corpus.grammar` -- the lexicon's meanings and the abstract sentence builder;
* :mod:`~attnlab.data.corpus.english`, :mod:`~attnlab.data.corpus.french`, :mod:`~attnlab.data.corpus.korean`
  -- each turns an abstract sentence into tokens (and, for the targets, alignments);
* :mod:`~attnlab.data.corpus.splits` -- :class:`Pair`, length buckets, train/valid/test splits, cache;
* :mod:`~attnlab.data.corpus.triples` -- lesson 07's multi-source corpus: each sentence in English, French
  and Korean with both gold link sets (:class:`~attnlab.data.corpus.triples.Triple`);
* :mod:`~attnlab.data.corpus.tsv` -- a real tab-separated corpus and its tokenisers;
* :mod:`~attnlab.data.corpus.scenes` -- lesson 13's generated images with captions and gold regions;
* :mod:`~attnlab.data.corpus.signals` -- lesson 13's tone-burst "speech" with gold frame spans;
* :mod:`~attnlab.data.corpus.documents` -- lesson 13's documents with a gold evidence sentence.

Two pairs exist: English→French (``target="fr"``, local reordering: an adjective swaps with its
noun) and English→Korean (``target="ko"``, verb-final with prenominal relative clauses: the
reordering spans whole phrases).
"""

from attnlab.data.corpus import triples
from attnlab.data.corpus.splits import (
    BUCKET_NAMES,
    BUCKETS,
    CORPUS_VERSION,
    CORPUS_VERSIONS,
    MAX_SRC_LEN,
    MIN_SRC_LEN,
    TARGETS,
    Pair,
    Splits,
    bucket_name,
    check_target,
    corpus_version,
    generate_pairs,
    load_splits,
    make_splits,
    make_test_split,
)
from attnlab.data.corpus.tsv import load_tsv, tokenize_en, tokenize_fr

__all__ = [
    "TARGETS",
    "CORPUS_VERSIONS",
    "CORPUS_VERSION",
    "BUCKETS",
    "BUCKET_NAMES",
    "MIN_SRC_LEN",
    "MAX_SRC_LEN",
    "bucket_name",
    "check_target",
    "corpus_version",
    "Pair",
    "Splits",
    "generate_pairs",
    "make_splits",
    "make_test_split",
    "load_splits",
    "load_tsv",
    "tokenize_en",
    "tokenize_fr",
    "triples",
    "scenes",
    "signals",
    "documents",
]


_LESSON09 = ("documents", "scenes", "signals")


def __getattr__(name: str):
    # Lesson 13's generators import attnlab.data.vocab, which imports this package: importing them on
    # first use (``corpus.scenes``) instead of here keeps ``import attnlab.data.vocab`` free of a cycle.
    if name in _LESSON09:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
