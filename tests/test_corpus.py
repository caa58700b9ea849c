"""The shared grammar, the English and French realisers, splits and the cache (attnlab.data.corpus)."""

import gzip
import json
from collections import Counter

import pytest

from attnlab.data.corpus import english, french, grammar, splits
from attnlab.data.corpus.splits import (
    BUCKET_NAMES,
    BUCKETS,
    CORPUS_VERSIONS,
    TARGETS,
    Pair,
    bucket_name,
    corpus_version,
    generate_pairs,
    load_splits,
    make_splits,
    make_test_split,
)

FR_VOWELS = set("aeiouyàâäéèêëîïôöùûüœh")


@pytest.fixture(scope="module")
def pairs():
    return generate_pairs(4000, seed=123)


@pytest.fixture(scope="module")
def small_splits():
    return make_splits(n_train=3000, n_valid=300, test_per_bucket=40, seed=7)


def bigrams(toks):
    return zip(toks, toks[1:], strict=False)


# ---------------------------------------------------------------------------------------------
# constants, buckets, targets
# ---------------------------------------------------------------------------------------------


def test_bucket_names_follow_buckets():
    assert BUCKET_NAMES == tuple(f"{lo}-{hi}" for lo, hi in BUCKETS)


def test_bucket_name():
    assert bucket_name(1) == "1-10" and bucket_name(10) == "1-10"
    assert bucket_name(11) == "11-20" and bucket_name(40) == "31-40"
    assert bucket_name(5, buckets=((3, 5),)) == "3-5"
    for n in (0, 41):
        with pytest.raises(ValueError, match=str(n)):
            bucket_name(n)
    assert Pair(("a",) * 12, ("b",)).bucket == "11-20"


def test_corpus_version_per_target():
    assert corpus_version() == corpus_version("fr") == "synth-enfr-1" == splits.CORPUS_VERSION
    assert corpus_version("ko") == "synth-enko-1"
    assert set(CORPUS_VERSIONS) == set(TARGETS) == {"fr", "ko"}


@pytest.mark.parametrize(
    "call",
    [
        lambda: generate_pairs(3, seed=0, target="de"),
        lambda: make_splits(n_train=3, n_valid=1, test_per_bucket=1, target="en"),
        lambda: make_test_split(seed=0, per_bucket=1, target="KO"),
        lambda: load_splits("/nonexistent", target=None),
        lambda: corpus_version("french"),
    ],
)
def test_unknown_target_names_the_choices(call):
    with pytest.raises(ValueError, match=r"target must be one of 'fr', 'ko'"):
        call()


# ---------------------------------------------------------------------------------------------
# the grammar and its English side
# ---------------------------------------------------------------------------------------------


def test_english_spells_each_preposition_with_its_grammar_cost():
    # The builder's length control counts English tokens from Prep.cost.
    for prep in grammar.PREPS.values():
        assert len(english._PREP[prep]) == prep.cost, prep


def test_english_lexicon_covers_exactly_what_the_grammar_allows():
    for d in grammar.DETS:
        sg, pl = english._DET[d]
        assert (sg is not None, pl is not None) == (d.sg, d.pl), d


def test_hand_built_sentence_matches_the_grammar():
    s = grammar.sentence(
        grammar.clause(
            grammar.noun_phrase("cat", pre="small", post="red"),
            "see",
            grammar.noun_phrase("dog", "two", pl=True),
            neg=True,
            pp=grammar.prep_phrase("in front of", grammar.noun_phrase("house", "a")),
        )
    )
    assert " ".join(english.realise(s)) == "the small red cat does not see two dogs in front of a house ."
    toks, align, content = french.realise(s)
    assert " ".join(toks) == "le petit chat rouge ne voit pas deux chiens devant une maison ."
    assert align[5] == (4, 6)  # voit ↔ does, see


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: grammar.noun_phrase("zebra"), "unknown noun 'zebra'"),
        (lambda: grammar.noun_phrase("cat", "a", pl=True), "does not take a plural"),
        (lambda: grammar.noun_phrase("cat", "two"), "does not take a singular"),
        (lambda: grammar.noun_phrase("cat", pre="red"), "unknown pre adjective 'red'"),
        (lambda: grammar.clause(None, "fly"), "unknown verb 'fly'"),
        (lambda: grammar.prep_phrase("over", grammar.noun_phrase("cat")), "unknown preposition 'over'"),
        (lambda: grammar.pronoun("it"), "unknown pronoun 'it'"),
    ],
)
def test_hand_building_rejects_unknown_glosses(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# French
# ---------------------------------------------------------------------------------------------


def _fr_features():
    """French noun/adjective form → set of (feminine, plural) it can express, from the lexicon."""
    nouns, adjs = {}, {}
    for sg, pl, fem in french._NOUN.values():
        for plural, form in enumerate((sg, pl)):
            nouns.setdefault(form, set()).add((fem, bool(plural)))
    for forms, alt in french._ADJ.values():
        for idx, form in enumerate(forms):
            adjs.setdefault(form, set()).add((bool(idx % 2), idx >= 2))
        if alt:
            adjs.setdefault(alt, set()).add((False, False))
    return nouns, adjs


M_SG_DETS = {"le", "un", "ce", "cet"}
F_SG_DETS = {"la", "une", "cette", "ma", "sa"}
SG_DETS = M_SG_DETS | F_SG_DETS | {"l'", "mon", "son", "votre", "chaque"}
PL_DETS = {"les", "des", "deux", "trois", "mes", "ses", "ces", "vos"}
EN_PLURALS = {forms[1] for forms in english._NOUN.values()}


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
                pl = p.src[p.align[i][0]] in EN_PLURALS
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
    for sg, pl in french._VERB.values():
        fr_num[sg] = False
        fr_num[pl] = True
    en_sg = {forms[0] for forms in english._VERB.values()} | {"does"}
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
    # A feminine subject with a predicate adjective that has distinct feminine forms.
    ps = generate_pairs(3000, seed=5, buckets=((3, 8),))
    hits = [p for p in ps if p.tgt[:1] == ("la",) and "est" in p.tgt and p.tgt[-2] in ("petite", "fatiguée", "verte")]
    assert hits, "no 'la … est petite/fatiguée/verte' sentence"


def test_elision(pairs):
    nouns, _ = _fr_features()
    n_elided = 0
    for p in pairs:
        for i, (a, b) in enumerate(bigrams(p.tgt)):
            if a in ("le", "la", "que", "ne", "de", "ce", "ma", "sa"):
                assert b[0] not in FR_VOWELS, (a, b, p.tgt)
            if a in ("l'", "d'", "qu'", "n'", "cet", "bel", "vieil"):
                assert b[0] in FR_VOWELS, (a, b, p.tgt)
                n_elided += 1
            if a in ("beau", "vieux") and b in nouns and b[0] in FR_VOWELS:  # "vieux" is also masculine plural
                assert a == "vieux" and p.src[p.align[i + 1][0]] in EN_PLURALS, f"{a} {b} should be bel/vieil: {p.tgt}"
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
            assert (a, b) not in {("de", "le"), ("de", "les"), ("à", "le"), ("à", "les"), ("de", "des")}, p.tgt
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
    post_adjs = {f for a, (forms, _) in french._ADJ.items() if not a.pre for f in forms}
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
    p = next(p for p in pairs if any(a[0] > b[0] for a, b in zip(p.align, p.align[1:], strict=False)))
    assert p.align != tuple(sorted(p.align))  # non-monotone alignment


def test_alignments_valid(pairs):
    for p in pairs:
        n = len(p.src)
        assert p.possible is None  # French has sure links only
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
    det_forms = {f for forms in french._DET.values() for f in forms if f} | {"l'", "cet", "mon", "son"}
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
        for tok, c in zip(p.tgt, p.content, strict=True):
            if tok in nouns or tok in adjs:
                assert c


def test_examples_from_the_brief():
    ps = generate_pairs(10000, seed=0, buckets=((4, 12),))
    pre = {a.key for a in grammar.ADJS if a.pre}
    post = {a.key for a in grammar.ADJS if not a.pre}

    def find(pred):
        return next(p for p in ps if pred(p))

    # "the small red cat" → "le petit chat rouge": det pre noun post, the post-adjective crossing
    p = find(lambda p: p.src[0] == "the" and p.src[1] in pre and p.src[2] in post)
    assert [a[0] for a in p.align[:4]] == [0, 1, 3, 2]
    p = find(lambda p: p.src[2:4] == ("that", "sees"))  # "the cat that sees …" → "le chat qui voit …"
    assert p.tgt[2:4] == ("qui", "voit")
    p = find(lambda p: p.src[2:5] == ("does", "not", "see"))
    i = p.tgt.index("voit")
    assert p.tgt[i - 1] in ("ne", "n'") and p.tgt[i + 1] == "pas" and [p.src[k] for k in p.align[i]] == ["does", "see"]
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


@pytest.mark.parametrize("kwargs", [dict(n=3.5, seed=0), dict(n=3, seed="0"), dict(n=True, seed=0)])
def test_generate_pairs_wrong_types(kwargs):
    with pytest.raises(TypeError, match="must be an int"):
        generate_pairs(**kwargs)


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


def _cache_files(root):
    return sorted((root / "corpus").glob("*.jsonl.gz"))


def test_cache_round_trip(tmp_path, monkeypatch):
    kw = dict(n_train=500, n_valid=50, test_per_bucket=10, seed=3)
    a = load_splits(tmp_path, **kw)
    b = load_splits(tmp_path, **kw)
    assert a == b == make_splits(**kw)
    files = _cache_files(tmp_path)
    assert len(files) == 1 and "synth-enfr-1" in files[0].name
    with gzip.open(files[0], "rt") as f:
        header = json.loads(f.readline())
        rows = [json.loads(line) for line in f]
    assert header["corpus_version"] == "synth-enfr-1" and header["kwargs"]["n_train"] == 500
    assert "target" not in header["kwargs"] and all("possible" not in row for row in rows)
    # Other kwargs → another file; a corrupt file is regenerated.
    load_splits(tmp_path, **{**kw, "seed": 4})
    assert len(_cache_files(tmp_path)) == 2
    files[0].write_bytes(b"garbage")
    assert load_splits(tmp_path, **kw) == a
    # A version bump changes the file name: the old cache is ignored.
    monkeypatch.setitem(CORPUS_VERSIONS, "fr", "test-bump")
    assert load_splits(tmp_path, **kw) == a
    assert any("test-bump" in f.name for f in (tmp_path / "corpus").iterdir())
    # Default location follows ATTNLAB_DATA_DIR.
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path / "env"))
    load_splits(**kw)
    assert _cache_files(tmp_path / "env")


def test_cache_is_read_not_regenerated(tmp_path, monkeypatch):
    kw = dict(n_train=50, n_valid=5, test_per_bucket=2, seed=1)
    first = load_splits(tmp_path, **kw)

    def fail(**_):
        raise AssertionError("the cache should have been read")

    monkeypatch.setattr(splits, "make_splits", fail)
    assert load_splits(tmp_path, **kw) == first


def test_cache_written_for_another_target_is_not_used(tmp_path):
    kw = dict(n_train=40, n_valid=4, test_per_bucket=2, seed=2)
    fr = load_splits(tmp_path, **kw)
    ko = load_splits(tmp_path, target="ko", **kw)
    names = [f.name for f in _cache_files(tmp_path)]
    assert len(names) == 2 and any("synth-enko-1" in n for n in names) and any("synth-enfr-1" in n for n in names)
    assert ko == make_splits(target="ko", **kw) and fr == make_splits(**kw)
    assert ko.train[0].tgt != fr.train[0].tgt
    # Renaming the Korean file to the French name must not make French read Korean pairs.
    ko_file = next(f for f in _cache_files(tmp_path) if "enko" in f.name)
    fr_file = next(f for f in _cache_files(tmp_path) if "enfr" in f.name)
    ko_file.replace(fr_file)
    assert load_splits(tmp_path, **kw) == fr


@pytest.mark.parametrize("module", ["attnlab.data.vocab", "attnlab.training", "attnlab.data.corpus.scenes", "attnlab.data.realcorpus"])
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    # attnlab.data.vocab imports attnlab.data.corpus, whose lesson-09 generators import attnlab.data.vocab: a cycle
    # that only shows when one of them is the first attnlab module imported (python -m attnlab.training.train).
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
