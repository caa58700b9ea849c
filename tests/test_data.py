"""Tests of attnlab.data: the synthetic EN→FR grammar, splits, cache, vocabularies and loaders."""

import json
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from attnlab import data as D
from attnlab.data import (
    BOS,
    BUCKET_NAMES,
    BUCKETS,
    EOS,
    PAD,
    SPECIALS,
    UNK,
    Pair,
    Splits,
    Vocab,
    bucket_name,
    build_vocabs,
    collate,
    encode_pairs,
    generate_pairs,
    load_splits,
    load_tsv,
    make_dataloaders,
    make_splits,
    make_test_split,
    padding_fraction,
    tokenize_en,
    tokenize_fr,
)

FIXTURE = Path(__file__).parent / "fixtures" / "en_fr_sample.tsv"
FR_VOWELS = set("aeiouyàâäéèêëîïôöùûüœh")


@pytest.fixture(scope="module")
def pairs():
    return generate_pairs(4000, seed=123)


@pytest.fixture(scope="module")
def small_splits():
    return make_splits(n_train=3000, n_valid=300, test_per_bucket=40, seed=7)


def bigrams(toks):
    return zip(toks, toks[1:])


# ---------------------------------------------------------------------------------------------
# constants and buckets
# ---------------------------------------------------------------------------------------------


def test_constants():
    assert SPECIALS == ("<pad>", "<bos>", "<eos>", "<unk>")
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
    assert BUCKET_NAMES == tuple(f"{lo}-{hi}" for lo, hi in BUCKETS)
    assert isinstance(D.CORPUS_VERSION, str) and D.CORPUS_VERSION


def test_bucket_name():
    assert bucket_name(1) == "1-10" and bucket_name(10) == "1-10"
    assert bucket_name(11) == "11-20" and bucket_name(40) == "31-40"
    assert bucket_name(5, buckets=((3, 5),)) == "3-5"
    for n in (0, 41):
        with pytest.raises(ValueError, match=str(n)):
            bucket_name(n)
    assert Pair(("a",) * 12, ("b",)).bucket == "11-20"


# ---------------------------------------------------------------------------------------------
# the grammar
# ---------------------------------------------------------------------------------------------


def _fr_features():
    """French noun/adjective form → set of (feminine, plural) it can express, from the lexicon."""
    nouns, adjs = {}, {}
    for n in D._NOUNS:
        for pl, form in enumerate(n.fr):
            nouns.setdefault(form, set()).add((n.fem, bool(pl)))
    for a in D._ADJS:
        for idx, form in enumerate(a.fr):
            adjs.setdefault(form, set()).add((bool(idx % 2), idx >= 2))
        if a.alt:
            adjs.setdefault(a.alt, set()).add((False, False))
    return nouns, adjs


M_SG_DETS = {"le", "un", "ce", "cet"}
F_SG_DETS = {"la", "une", "cette", "ma", "sa"}
SG_DETS = M_SG_DETS | F_SG_DETS | {"l'", "mon", "son", "votre", "chaque"}
PL_DETS = {"les", "des", "deux", "trois", "mes", "ses", "ces", "vos"}


def test_agreement_det_adj_noun(pairs):
    nouns, adjs = _fr_features()
    checked = Counter()
    for p in pairs:
        t = p.tgt
        for i, tok in enumerate(t):
            if tok not in nouns:
                continue
            feats = nouns[tok]
            if len(feats) > 1:  # souris / os: number only shows on the English noun
                en = p.src[p.align[i][0]]
                pl = any(n.en[1] == en for n in D._NOUNS)
                feats = {f for f in feats if f[1] == pl}
            [(fem, pl)] = feats
            j = i - 1
            if t[j] in adjs:  # pre-noun adjective
                assert (fem, pl) in adjs[t[j]], (t[j], tok, p.tgt)
                checked["pre"] += 1
                j -= 1
            det = t[j]
            if det in ("du", "au"):
                det = "le"
            elif det in ("aux",):
                det = "les"
            assert det in SG_DETS | PL_DETS, (det, tok, p.tgt)
            assert (det in PL_DETS) == pl, (det, tok, p.tgt)
            if det in M_SG_DETS:
                assert not fem, (det, tok, p.tgt)
            if det in F_SG_DETS:
                assert fem, (det, tok, p.tgt)
            if i + 1 < len(t) and t[i + 1] in adjs:  # post-noun adjective
                assert (fem, pl) in adjs[t[i + 1]], (tok, t[i + 1], p.tgt)
                checked["post"] += 1
            checked["noun"] += 1
    assert checked["noun"] > 10_000 and checked["pre"] > 500 and checked["post"] > 500


def test_agreement_verbs(pairs):
    """The French verb's number is the English verb's (or does/do's); predicate adjectives follow."""
    fr_num = {}
    for v in D._VERBS:
        fr_num[v.fr[0]] = False
        fr_num[v.fr[1]] = True
    en_sg = {v.en[0] for v in D._VERBS} | {"does"}
    _, adjs = _fr_features()
    n = 0
    for p in pairs:
        for i, tok in enumerate(p.tgt):
            if tok in fr_num and p.content[i] or tok in ("est", "sont"):
                en_words = [p.src[k] for k in p.align[i]]
                assert (en_words[0] not in en_sg) == fr_num[tok], (tok, en_words, p.tgt)
                n += 1
            if tok in ("est", "sont"):
                j = i + 1
                while p.tgt[j] in ("pas", "souvent", "toujours", "parfois", "rarement"):
                    j += 1
                assert any(f[1] == (tok == "sont") for f in adjs[p.tgt[j]]), p.tgt
    assert n > 8000


def test_gender_agreement_example():
    # Find a sentence with a feminine subject and a predicate adjective with distinct forms.
    ps = generate_pairs(3000, seed=5, buckets=((3, 8),))
    hits = [
        p
        for p in ps
        if p.tgt[:1] == ("la",) and "est" in p.tgt and p.tgt[-2] in ("petite", "fatiguée", "verte")
    ]
    assert hits, "no 'la … est petite/fatiguée/verte' sentence"


def test_elision(pairs):
    en_plurals = {n.en[1] for n in D._NOUNS}
    nouns, _ = _fr_features()
    n_elided = 0
    for p in pairs:
        for i, (a, b) in enumerate(bigrams(p.tgt)):
            if a in ("le", "la", "que", "ne", "de", "ce", "ma", "sa"):
                assert b[0] not in FR_VOWELS, (a, b, p.tgt)
            if a in ("l'", "d'", "qu'", "n'", "cet", "bel", "vieil"):
                assert b[0] in FR_VOWELS, (a, b, p.tgt)
                n_elided += 1
            if (
                a in ("beau", "vieux") and b in nouns and b[0] in FR_VOWELS
            ):  # "vieux" is also masculine plural
                assert a == "vieux" and p.src[p.align[i + 1][0]] in en_plurals, (
                    f"{a} {b} should be bel/vieil: {p.tgt}"
                )
        for a, b in bigrams(p.src):
            assert not (a == "a" and b[0] in "aeiou"), p.src
            assert not (a == "an" and b[0] not in "aeiou"), p.src
    assert n_elided > 500
    toks = Counter(t for p in pairs for t in p.tgt)
    for form in ("l'", "d'", "qu'", "n'", "cet", "mon"):
        assert toks[form] > 0, form


def test_contraction(pairs):
    merged = Counter()
    of_the = 0
    for p in pairs:
        for a, b in bigrams(p.tgt):
            assert (a, b) not in {("de", "le"), ("de", "les"), ("à", "le"), ("à", "les"), ("de", "des")}, (
                p.tgt
            )
        for i, tok in enumerate(p.tgt):
            if tok in ("du", "au", "aux") or (tok == "des" and len(p.align[i]) > 1):
                al = p.align[i]
                assert len(al) >= 2 and p.src[al[-1]] == "the", (tok, [p.src[k] for k in al])
                assert p.content[i] is False
                merged[tok] += 1
                if tok == "du" and p.src[al[0]] == "of":
                    assert al == (al[0], al[0] + 1)
                    of_the += 1
    assert of_the > 50 and min(merged[t] for t in ("du", "au", "aux", "des")) > 10, merged


def test_reordering_is_present(pairs):
    post_adjs = {f for a in D._ADJS if not a.pre for f in a.fr}
    nouns, _ = _fr_features()
    crossing = adverb_crossing = 0
    for p in pairs:
        for i in range(len(p.tgt) - 1):
            if p.tgt[i] in nouns and p.tgt[i + 1] in post_adjs:
                assert p.align[i + 1][0] < p.align[i][0]  # "red cat" → "chat rouge"
                crossing += 1
            if p.tgt[i] in ("souvent", "toujours") and p.align[i][0] < p.align[i - 1][-1]:
                adverb_crossing += 1
    assert crossing > 500 and adverb_crossing > 50
    p = next(p for p in pairs if any(a[0] > b[0] for a, b in zip(p.align, p.align[1:])))
    assert p.align != tuple(sorted(p.align))  # non-monotone alignment


def test_alignments_valid(pairs):
    for p in pairs:
        n = len(p.src)
        assert len(p.align) == len(p.tgt) == len(p.content)
        covered = set()
        for al in p.align:
            assert al, p  # no French token without an English source (no documented exceptions)
            assert list(al) == sorted(set(al)) and all(0 <= k < n for k in al)
            covered.update(al)
        assert covered == set(range(n)), p  # and every English word is translated
        assert p.src[-1] == p.tgt[-1] == "." and p.align[-1] == (n - 1,)
        assert all(t == t.lower() and " " not in t for t in p.src + p.tgt)


def test_function_word_alignments_and_flags(pairs):
    det_forms = {f for _, d in D._DETS for f in d.fr if f} | {"l'", "cet", "mon", "son"}
    seen = Counter()
    for p in pairs:
        for i, tok in enumerate(p.tgt):
            src = [p.src[k] for k in p.align[i]]
            if tok in ("ne", "n'", "pas"):
                assert src == ["not"] and not p.content[i]
                seen["neg"] += 1
            if tok in ("ne", "n'") and p.tgt[i + 1] not in ("est", "sont"):
                assert [p.src[k] for k in p.align[i + 1]][0] in ("does", "do") and len(p.align[i + 1]) == 2
                assert p.content[i + 1]
                seen["does"] += 1
            if tok in ("qui", "que", "qu'") and src == ["that"]:
                seen["rel"] += 1
            if tok in det_forms:
                assert not p.content[i]
            if tok in ("est", "sont", ".", "et", "mais", "parce", "il", "elle", "ils"):
                assert not p.content[i]
            if tok == "devant":
                assert src == ["in", "front", "of"]
            if tok == "parce":
                assert src == ["because"]
    assert min(seen.values()) > 100, seen
    nouns, adjs = _fr_features()
    for p in pairs[:200]:
        for tok, c in zip(p.tgt, p.content):
            if tok in nouns or tok in adjs:
                assert c


def test_examples_from_the_brief():
    ps = generate_pairs(10000, seed=0, buckets=((4, 12),))
    pre = {a.en for a in D._ADJS if a.pre}
    post = {a.en for a in D._ADJS if not a.pre}

    def find(pred):
        return next(p for p in ps if pred(p))

    # "the small red cat" → "le petit chat rouge": det pre noun post, the post-adjective crossing
    p = find(lambda p: p.src[0] == "the" and p.src[1] in pre and p.src[2] in post)
    assert [a[0] for a in p.align[:4]] == [0, 1, 3, 2]
    p = find(lambda p: p.src[2:4] == ("that", "sees"))  # "the cat that sees …" → "le chat qui voit …"
    assert p.tgt[2:4] == ("qui", "voit")
    p = find(lambda p: p.src[2:5] == ("does", "not", "see"))
    i = p.tgt.index("voit")
    assert (
        p.tgt[i - 1] in ("ne", "n'")
        and p.tgt[i + 1] == "pas"
        and [p.src[k] for k in p.align[i]] == ["does", "see"]
    )
    p = find(lambda p: p.src[2:4] == ("often", "eats"))
    assert p.tgt[2:4] == ("mange", "souvent")
    p = find(lambda p: p.src[2:4] == ("that", "the") and p.src[5] == "sees")  # the dog that the cat sees
    assert p.tgt[2] == "que" and p.tgt[5] == "voit"


def test_each_source_has_one_translation():
    seen = {}
    for p in generate_pairs(15000, seed=11, buckets=((3, 9), (10, 14))):
        assert seen.setdefault(p.src, p.tgt) == p.tgt, (p.src, p.tgt, seen[p.src])


def test_determinism(pairs):
    assert generate_pairs(300, seed=123) == pairs[:300]
    assert generate_pairs(300, seed=124) != pairs[:300]
    assert generate_pairs(0, seed=1) == []


def test_bucket_balance_and_lengths(pairs):
    counts = Counter(p.bucket for p in pairs)
    assert set(counts) == set(BUCKET_NAMES)
    for name in BUCKET_NAMES:
        assert abs(counts[name] / len(pairs) - 0.25) < 0.03, counts
    lengths = Counter(len(p.src) for p in pairs)
    assert min(lengths) <= 4 and max(lengths) == 40
    assert lengths[4] > 0 and all(lengths[n] > 0 for n in range(5, 41))
    assert max(len(p.tgt) for p in pairs) <= 60
    custom = generate_pairs(200, seed=3, buckets=((3, 3), (12, 12), (40, 40)))
    assert {len(p.src) for p in custom} == {3, 12, 40}


def test_vocabulary_size(pairs):
    en = {t for p in pairs for t in p.src}
    fr = {t for p in pairs for t in p.tgt}
    assert 100 <= len(en) <= 140 and 140 <= len(fr) <= 190, (len(en), len(fr))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=-1, seed=0), "n must be >= 0"),
        (dict(n=5, seed=0, buckets=()), "buckets must not be empty"),
        (dict(n=5, seed=0, buckets=((10, 5),)), "reversed"),
        (dict(n=5, seed=0, buckets=((1, 10), (10, 20))), "overlap"),
        (dict(n=5, seed=0, buckets=((0, 10),)), ">= 1"),
        (dict(n=5, seed=0, buckets=((30, 50),)), "40"),
        (dict(n=5, seed=0, buckets=((1, 2),)), "shortest"),
        (dict(n=5, seed=0, buckets=((1,),)), "pair"),
    ],
)
def test_generate_pairs_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate_pairs(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_train=-5), "n_train"),
        (dict(n_valid=-1), "n_valid"),
        (dict(test_per_bucket=-1), "test_per_bucket"),
        (dict(buckets=((5, 1),)), "reversed"),
        (dict(buckets=((1, 41),)), "40"),
    ],
)
def test_make_splits_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_splits(**kwargs)
    with pytest.raises(TypeError):
        generate_pairs(3.5, seed=0)


def test_generation_speed():
    t0 = time.perf_counter()
    ps = generate_pairs(20_000, seed=42)
    dt = time.perf_counter() - t0
    print(f"generated 20k pairs in {dt:.2f} s ({dt / 20_000 * 1e6:.0f} µs/pair)")
    assert len(ps) == 20_000


# ---------------------------------------------------------------------------------------------
# splits and cache
# ---------------------------------------------------------------------------------------------


def test_splits_disjoint_and_stratified(small_splits):
    s = small_splits
    assert (len(s.train), len(s.valid), len(s.test)) == (3000, 300, 4 * 40)
    tr, va, te = ({p.src for p in part} for part in (s.train, s.valid, s.test))
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert len(va) == 300 and len(te) == 160  # valid and test have no duplicates
    assert Counter(p.bucket for p in s.test) == {name: 40 for name in BUCKET_NAMES}
    assert make_test_split(seed=7, per_bucket=40) == s.test
    other = make_test_split(seed=8, per_bucket=10, exclude=tr)
    assert len(other) == 40 and not ({p.src for p in other} & tr)


def test_impossible_request_raises():
    with pytest.raises(ValueError, match="distinct"):
        make_test_split(seed=0, per_bucket=100, buckets=((3, 3),))


def test_cache_round_trip(tmp_path, monkeypatch):
    kw = dict(n_train=500, n_valid=50, test_per_bucket=10, seed=3)
    t0 = time.perf_counter()
    a = load_splits(tmp_path, **kw)
    t1 = time.perf_counter()
    b = load_splits(tmp_path, **kw)
    t2 = time.perf_counter()
    print(f"generate+write {t1 - t0:.3f} s, load {t2 - t1:.3f} s")
    assert a == b == make_splits(**kw)
    files = list((tmp_path / "corpus").glob("*.jsonl.gz"))
    assert len(files) == 1 and D.CORPUS_VERSION in files[0].name
    header = json.loads(__import__("gzip").open(files[0], "rt").readline())
    assert header["corpus_version"] == D.CORPUS_VERSION and header["kwargs"]["n_train"] == 500
    # Other kwargs → another file; a corrupt file is regenerated.
    load_splits(tmp_path, **{**kw, "seed": 4})
    assert len(list((tmp_path / "corpus").glob("*.jsonl.gz"))) == 2
    files[0].write_bytes(b"garbage")
    assert load_splits(tmp_path, **kw) == a
    # A version bump changes the file name: the old cache is ignored.
    monkeypatch.setattr(D, "CORPUS_VERSION", "test-bump")
    assert load_splits(tmp_path, **kw) == a
    assert any("test-bump" in f.name for f in (tmp_path / "corpus").iterdir())
    # Default location follows ATTNLAB_DATA_DIR.
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path / "env"))
    load_splits(**kw)
    assert list((tmp_path / "env" / "corpus").glob("*.jsonl.gz"))


# ---------------------------------------------------------------------------------------------
# vocabularies and tensors
# ---------------------------------------------------------------------------------------------


def test_vocab_build_and_round_trip(small_splits):
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


def test_unknown_tokens():
    v = Vocab.build([["le", "chat"]])
    assert v.unk_count == 0
    assert v.encode(["le", "zèbre", "chat", "gnou"], eos=False) == [v.stoi["le"], UNK, v.stoi["chat"], UNK]
    assert v.unk_count == 2
    v.encode(["ornithorynque"])
    assert v.unk_count == 3
    v.encode(["le"])
    assert v.unk_count == 3


def test_encode_pairs_and_collate(small_splits):
    src_v, tgt_v = build_vocabs(small_splits)
    ps = small_splits.valid[:5]
    items = encode_pairs(ps, src_v, tgt_v)
    for p, (s, ti, to) in zip(ps, items):
        assert s.dtype == ti.dtype == to.dtype == torch.int64
        assert len(s) == len(p.src) + 1 and s[-1] == EOS
        assert len(ti) == len(to) == len(p.tgt) + 1 and ti[0] == BOS and to[-1] == EOS
        assert torch.equal(ti[1:], to[:-1])
    src, tgt_in, tgt_out = collate(items)
    S, T = max(len(p.src) for p in ps) + 1, max(len(p.tgt) for p in ps) + 1
    assert src.shape == (5, S) and tgt_in.shape == tgt_out.shape == (5, T)
    for b, (s, ti, to) in enumerate(items):
        assert torch.equal(src[b, : len(s)], s) and (src[b, len(s) :] == PAD).all()
        assert torch.equal(tgt_out[b, : len(to)], to) and (tgt_out[b, len(to) :] == PAD).all()
        assert torch.equal(tgt_in[b, : len(ti)], ti) and (tgt_in[b, len(ti) :] == PAD).all()
    assert (collate(items, pad=-1)[0] == -1).sum() == (src == PAD).sum()


# ---------------------------------------------------------------------------------------------
# fastai loaders
# ---------------------------------------------------------------------------------------------


def test_dataloaders(small_splits):
    src_v, tgt_v = build_vocabs(small_splits)
    dls = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=1)
    assert dls.n_inp == 2 and len(dls.train) == -(-3000 // 32)
    src, tgt_in, tgt_out = dls.train.one_batch()
    assert src.shape[0] == tgt_in.shape[0] == 32 and tgt_in.shape == tgt_out.shape
    assert src.dtype == torch.int64 and src.device.type == "cpu"

    # every training pair exactly once per epoch; a new but reproducible order every epoch
    order1 = list(dls.train.get_idxs())
    assert sorted(order1) == list(range(3000))
    assert list(dls.train.get_idxs()) == order1  # one_batch / get_idxs do not advance the epoch
    n_batches = sum(1 for _ in dls.train)  # a full pass does
    assert n_batches == len(dls.train)
    order2 = list(dls.train.get_idxs())
    assert order2 != order1 and sorted(order2) == sorted(order1)
    dls_again = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=1)
    assert list(dls_again.train.get_idxs()) == order1
    other_seed = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=2)
    assert list(other_seed.train.get_idxs()) != order1

    # bucketing wastes much less padding than random batches; measuring does not shift the order
    epoch = dls.train.shuffle_fn.epoch
    bucketed = padding_fraction(dls.train)
    assert dls.train.shuffle_fn.epoch == epoch
    baseline = padding_fraction(
        make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", bucketed=False).train
    )
    print(f"padding fraction: bucketed {bucketed:.3f}, random {baseline:.3f}")
    assert bucketed < 0.1 and baseline > 0.3

    # valid: sorted by source length (longest first), not shuffled
    lens = [int((b[0] != PAD).sum(1).max()) for b in dls.valid]
    assert lens == sorted(lens, reverse=True)
    assert sum(b[0].shape[0] for b in dls.valid) == 300


def test_dataloaders_train_with_fastai_learner(small_splits):
    """A fastai Learner calls model(src, tgt_in) and loss_func(logits, tgt_out)."""
    from fastai.learner import Learner

    src_v, tgt_v = build_vocabs(small_splits)
    few = Splits(train=small_splits.train[:256], valid=small_splits.valid[:64], test=[])
    dls = make_dataloaders(few, src_v, tgt_v, bs=64, device="cpu")
    calls = []

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(len(tgt_v), 8)
            self.out = torch.nn.Linear(8, len(tgt_v))

        def forward(self, src, tgt_in):
            calls.append((src.shape, tgt_in.shape))
            return self.out(self.emb(tgt_in))  # (B, T, V)

    def loss(logits, tgt_out):
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD)

    learn = Learner(dls, Toy(), loss_func=loss)
    with learn.no_logging():
        learn.fit(1, lr=1e-2)
    assert len(calls) >= 5 and all(s[0] == t[0] for s, t in calls)


# ---------------------------------------------------------------------------------------------
# real corpora
# ---------------------------------------------------------------------------------------------


def test_load_tsv_fixture():
    ps = load_tsv(FIXTURE)
    assert len(ps) == 21 and all(p.align is None and p.content is None for p in ps)
    by_src = {" ".join(p.src): p.tgt for p in ps}
    assert by_src["go ."] == ("va", "!")
    assert by_src["run !"] == ("cours", "!")  # no-break space before "!"
    assert by_src["i'm hungry ."] == ("j'", "ai", "faim", ".")  # attribution column ignored
    assert by_src["that's the teacher's book ."] == (
        "c'",
        "est",
        "le",
        "livre",
        "du",
        "professeur",
        ".",
    )  # ’ → '
    assert by_src["the old house , isn't it ?"] == (
        "la",
        "vieille",
        "maison",
        ",",
        "n'",
        "est-ce",
        "pas",
        "?",
    )
    assert by_src["the student is at the school ."] == ("l'", "élève", "est", "à", "l'", "école", ".")  # NFC
    assert by_src['" stop ! " he said .'] == ("«", "arrête", "!", "»", "a-t-il", "dit", ".")
    assert by_src["today is monday ."][0] == "aujourd'hui"
    assert by_src["he said he'd come ."][3:5] == ("qu'", "il")
    assert len(load_tsv(FIXTURE, max_pairs=5)) == 5
    assert all(len(p.src) <= 4 and len(p.tgt) <= 4 for p in load_tsv(FIXTURE, max_len=4))
    assert len(load_tsv(FIXTURE, max_len=4)) == 6


def test_tokenizers():
    assert tokenize_fr("L’homme  n'aime   PAS l'été!") == [
        "l'",
        "homme",
        "n'",
        "aime",
        "pas",
        "l'",
        "été",
        "!",
    ]
    assert tokenize_fr("Qu'il vienne; jusqu'à demain.") == [
        "qu'",
        "il",
        "vienne",
        ";",
        "jusqu'",
        "à",
        "demain",
        ".",
    ]
    assert tokenize_en("Don't\tSTOP:  «now»") == ["don't", "stop", ":", "«", "now", "»"]
    assert tokenize_fr("e\u0301te\u0301") == ["été"]


@pytest.mark.parametrize(
    "bad_line, what",
    [
        ("no tab on this line", "no tab"),
        ("\tLe chat.", "English side is empty"),
        ("The cat.\t  ", "French side is empty"),
    ],
)
def test_load_tsv_malformed_line(tmp_path, bad_line, what):
    path = tmp_path / "corpus.tsv"
    path.write_text(f"Hi.\tSalut.\n\nGo.\tVa !\n{bad_line}\nRun.\tCours.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=what) as err:
        load_tsv(path)
    assert f"{path}:4" in str(err.value)
