"""English→French must stay byte-identical to the corpus the shipped checkpoints were trained on.

The digests below were computed from ``attnlab.data`` *before* it became the ``attnlab.data.corpus``
package (commit cc9309c): sha256 over one compact JSON line ``[src, tgt, align, content]`` per
pair, for splits in the order train, valid, test. If one of these fails, the French corpus has
changed: every shipped checkpoint, figure and result would silently disagree with it.
"""

import hashlib
import json

import pytest

from attnlab.data.corpus.splits import generate_pairs, load_splits, make_splits

DIGESTS = {
    ("generate_pairs", 0): "645fbb54b8399dbec14bbf758df011fb0a0d858091d749f7e6c0fa6d8a8624aa",
    ("generate_pairs", 1): "f3849f0b890c0a992dd41e1e26d5914323805391eb40bacbd4553e3f375e402e",
    ("make_splits", 0): "d0ce40f3910692876ae611aacc24f28c947bf07fbee046b397b57117c1bc9f66",
    ("make_splits", 1): "56cbbae43d4e0cf03458c529b001bf316c21041f841b985c1f5238a219a28e2a",
    ("default", 0): "17b423a0a90ddf07e4243f597a21a78425c33d7d3072c6060a67670836ff050a",
}
SMALL = dict(n_train=2000, n_valid=200, test_per_bucket=50)


def digest(pairs) -> str:
    h = hashlib.sha256()
    for p in pairs:
        row = [p.src, p.tgt, p.align, p.content]
        h.update(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def splits_digest(s) -> str:
    return digest([*s.train, *s.valid, *s.test])


def test_digest_sees_every_field():
    p = generate_pairs(1, seed=0)[0]
    base = digest([p])
    changed = [
        type(p)(p.src[:-1], p.tgt, p.align, p.content),
        type(p)(p.src, p.tgt[:-1], p.align, p.content),
        type(p)(p.src, p.tgt, p.align[:-1] + ((0,),), p.content),
        type(p)(p.src, p.tgt, p.align, p.content[:-1] + (not p.content[-1],)),
    ]
    assert all(digest([q]) != base for q in changed)


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_pairs_is_unchanged(seed):
    assert digest(generate_pairs(3000, seed=seed)) == DIGESTS["generate_pairs", seed]
    assert digest(generate_pairs(3000, seed=seed, target="fr")) == DIGESTS["generate_pairs", seed]


@pytest.mark.parametrize("seed", [0, 1])
def test_make_splits_is_unchanged(seed):
    assert splits_digest(make_splits(seed=seed, **SMALL)) == DIGESTS["make_splits", seed]


def test_default_splits_are_unchanged(tmp_path):
    """The default ``load_splits()`` corpus (100k train), generated and then read back from the cache."""
    generated = load_splits(tmp_path)
    assert splits_digest(generated) == DIGESTS["default", 0]
    assert splits_digest(load_splits(tmp_path)) == DIGESTS["default", 0]  # the cached copy
