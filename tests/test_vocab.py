"""Vocabularies (attnlab.data.vocab): specials, building, encoding, decoding and its bad input."""

import json

import pytest
import torch

from attnlab.data.corpus.splits import make_splits
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab, build_vocabs


@pytest.fixture(scope="module")
def small_splits():
    return make_splits(n_train=1000, n_valid=50, test_per_bucket=5, seed=7)


def test_special_ids_match_their_tokens():
    v = Vocab.build([["chat"]])
    assert [v.itos[i] for i in (PAD, BOS, EOS, UNK)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert v.itos[: len(SPECIALS)] == list(SPECIALS)


def test_vocab_build_and_round_trip(small_splits):
    from collections import Counter

    src_v, tgt_v = build_vocabs(small_splits)
    assert build_vocabs(small_splits.train)[0] == src_v
    assert src_v.itos[:4] == list(SPECIALS) and tgt_v.itos[:4] == list(SPECIALS)
    counts = Counter(t for p in small_splits.train for t in p.src)
    assert src_v.itos[4:] == sorted(counts, key=lambda t: (-counts[t], t))
    assert all(src_v.stoi[t] == i for i, t in enumerate(src_v.itos))
    assert "chat" in tgt_v and "chat" not in src_v and len(src_v) == len(counts) + 4
    again = Vocab.from_dict(json.loads(json.dumps(tgt_v.to_dict())))
    assert again == tgt_v and again.stoi == tgt_v.stoi
    p = small_splits.test[0]
    ids = tgt_v.encode(p.tgt, bos=True)
    assert ids[0] == BOS and ids[-1] == EOS
    assert tgt_v.decode(ids) == list(p.tgt)
    assert tgt_v.decode(torch.tensor(ids + [PAD, PAD])) == list(p.tgt)
    assert tgt_v.decode(ids + [5, 6], strip=True) == list(p.tgt)
    assert tgt_v.decode([BOS, 5, EOS, PAD], strip=False) == ["<bos>", tgt_v.itos[5], "<eos>", "<pad>"]
    assert Vocab.build([["a", "b", "b"], ["c"]], min_freq=2).itos == list(SPECIALS) + ["b"]


def test_korean_vocab_round_trip():
    ko = make_splits(n_train=200, n_valid=5, test_per_bucket=2, seed=1, target="ko")
    _, tgt_v = build_vocabs(ko)
    assert "가" in tgt_v and tgt_v.decode(tgt_v.encode(ko.train[0].tgt)) == list(ko.train[0].tgt)


def test_unknown_tokens():
    v = Vocab.build([["le", "chat"]])
    assert v.unk_count == 0
    assert v.encode(["le", "zèbre", "chat", "gnou"], eos=False) == [v.stoi["le"], UNK, v.stoi["chat"], UNK]
    assert v.unk_count == 2
    v.encode(["ornithorynque"])
    assert v.unk_count == 3
    v.encode(["le"])
    assert v.unk_count == 3


@pytest.mark.parametrize("bad", [-1, 6, 100])
@pytest.mark.parametrize("strip", [True, False])
def test_decode_rejects_ids_outside_the_vocabulary(bad, strip):
    v = Vocab.build([["le", "chat"]])  # 6 tokens
    with pytest.raises(ValueError, match=rf"token id {bad}, outside the vocabulary \[0, 6\)"):
        v.decode([4, bad, 5], strip=strip)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.decode(torch.tensor([bad]), strip=strip)


@pytest.mark.parametrize(
    "itos, match",
    [
        (["a", "b"], "must start with"),
        (list(SPECIALS) + ["x", "x"], "must not repeat"),
    ],
)
def test_bad_vocabularies(itos, match):
    with pytest.raises(ValueError, match=match):
        Vocab(itos)
