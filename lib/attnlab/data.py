"""Compatibility alias: the names that lived here now live in :mod:`attnlab.corpus`,
:mod:`attnlab.vocab` and :mod:`attnlab.loaders`.

``from attnlab.data import Pair, Vocab, make_dataloaders`` keeps working for one release; new code
imports from the new modules. Every name below is the same object as in its new home (nothing is
copied), so patching or comparing through either path gives the same result.
"""

from .corpus.splits import (
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
    corpus_version,
    generate_pairs,
    load_splits,
    make_splits,
    make_test_split,
)
from .corpus.tsv import load_tsv, tokenize_en, tokenize_fr
from .loaders import collate, encode_pairs, make_dataloaders, padding_fraction
from .vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab, build_vocabs

__all__ = [
    "CORPUS_VERSION",
    "CORPUS_VERSIONS",
    "TARGETS",
    "SPECIALS",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "BUCKETS",
    "BUCKET_NAMES",
    "MIN_SRC_LEN",
    "MAX_SRC_LEN",
    "bucket_name",
    "corpus_version",
    "Pair",
    "Splits",
    "generate_pairs",
    "make_splits",
    "make_test_split",
    "load_splits",
    "Vocab",
    "build_vocabs",
    "encode_pairs",
    "collate",
    "make_dataloaders",
    "padding_fraction",
    "load_tsv",
    "tokenize_en",
    "tokenize_fr",
]
