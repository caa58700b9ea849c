"""Multi-source translation (lesson 07): the French + Korean -> English triples and the two-attention model."""

import dataclasses
import gzip
import json
import random
from collections import Counter

import numpy as np
import pytest
import torch

from attnlab.data.corpus import BUCKET_NAMES, english, french, korean, splits
from attnlab.data.corpus import grammar as g
from attnlab.data.corpus import triples as tr
from attnlab.data.corpus.splits import Pair
from attnlab.data.loaders import collate
from attnlab.data.vocab import PAD
from attnlab.models import multisource
from attnlab.models.decoding import beam_search, greedy_decode
from attnlab.models.losses import masked_cross_entropy
from attnlab.models.multisource import MultiSourceConfig, MultiSourceRNN, by_source
from attnlab.training import experiments, multisource_experiments
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint
from attnlab.training.train import fit_budget, set_seed

# ----------------------------------------------------------------------------------------------
# triples
# ----------------------------------------------------------------------------------------------


def test_joint_restrictions_allow_only_what_every_language_allows():
    both = g.Restrictions(neg_freq_adverbs=True)
    assert tr.joint_restrictions(both, both) == both
    assert tr.joint_restrictions(both, korean.RESTRICTIONS) == korean.RESTRICTIONS
    assert tr.RESTRICTIONS == tr.joint_restrictions(french.RESTRICTIONS, korean.RESTRICTIONS)
    assert tr.RESTRICTIONS.neg_freq_adverbs is False  # Korean drops frequency adverbs on negated verbs
    with pytest.raises(ValueError, match="needs at least one Restrictions"):
        tr.joint_restrictions()
    with pytest.raises(TypeError, match="restrictions must be Restrictions, got dict"):
        tr.joint_restrictions(both, {"neg_freq_adverbs": True})


def test_invert_links():
    assert tr.invert_links(((1,), (0, 2), (), (2,)), 3) == ((1,), (0,), (1, 3))
    assert tr.invert_links((), 2) == ((), ())
    with pytest.raises(ValueError, match=r"links\[1\] holds position 3, outside \[0, 3\)"):
        tr.invert_links(((0,), (3,)), 3)


def test_a_hand_built_triple_and_its_inverted_links():
    s = g.sentence(g.clause(g.noun_phrase("cat"), "see", g.noun_phrase("dog", pre="small")))
    t = tr.realise_triple(s)
    assert t.en == t.src == ("the", "cat", "sees", "the", "small", "dog", ".")
    assert t.side("fr") == ("le", "chat", "voit", "le", "petit", "chien", ".")
    assert t.side("ko") == ("고양이", "가", "작은", "개", "를", "본다", ".")
    fr, ko = t.to_english("fr"), t.to_english("ko")
    assert (fr.src, fr.tgt, fr.possible) == (t.side("fr"), t.en, None)
    assert fr.align == ((0,), (1,), (2,), (3,), (4,), (5,), (6,))
    assert ko.align == ((), (0,), (5,), (), (2,), (3,), (6,))  # "the" has no Korean word
    assert ko.possible == ((), (1,), (), (), (), (4,), ())  # the case particles 가 and 를
    assert t.en_content == fr.content == ko.content == (False, True, True, False, True, True, False)
    with pytest.raises(ValueError, match="lang must be one of 'fr', 'ko', got 'de'"):
        t.side("de")
    with pytest.raises(ValueError, match="must share the English sentence"):
        tr.Triple(t.fr, dataclasses.replace(t.ko, src=t.en[1:]))


@pytest.mark.parametrize("state", [0, 1, 2, 3, 4, 5])
def test_triple_sides_equal_their_standalone_realisations(state):
    lo, hi = splits.BUCKETS[state % 4]
    t = tr._make_triple(random.Random(state), lo, hi)
    # The Korean corpus builds with the same (joint) restrictions: the very same pair from the same draws.
    assert t.ko == splits._pair_ko(random.Random(state), lo, hi)
    tree = g.build(random.Random(state), lo, hi, tr.RESTRICTIONS)
    en = english.realise(tree)
    assert t.fr == Pair(en, *french.realise(tree))
    assert lo <= len(t.en) <= hi and t.bucket == splits.bucket_name(len(t.en))


def _gloss_tables():
    """English word -> its meaning, and per meaning the French and Korean forms it may take."""
    nouns = {}
    for noun in g.NOUNS:
        for pl in (0, 1):
            nouns[english._NOUN[noun][pl]] = ({french._NOUN[noun][pl]}, {korean._NOUN[noun][0]})
    adjs = {}
    for adj in g.ADJS:
        forms, alt = french._ADJ[adj]
        adjs[adj.key] = (set(forms) | ({alt} if alt else set()), {f for table in korean._ADJ[adj] for f in table})
    return {**nouns, **adjs}


def test_each_gold_link_points_to_the_same_meaning():
    tables = _gloss_tables()
    checked = Counter()
    for t in tr.generate_triples(300, seed=1):
        fr, ko = t.to_english("fr"), t.to_english("ko")
        assert all(fr.align), "every English token has a French link"
        for e, word in enumerate(t.en):
            if not ko.align[e] and not ko.possible[e]:
                assert word in ("the", "a", "an"), f"only articles lack a Korean word, not {word!r}"
            if word in tables and t.en_content[e]:
                fr_forms, ko_forms = tables[word]
                assert {t.side("fr")[j] for j in fr.align[e]} & fr_forms, (word, t.en, t.side("fr"))
                assert {t.side("ko")[j] for j in ko.align[e]} <= ko_forms, (word, t.en, t.side("ko"))
                checked[word in {english._NOUN[n][0] for n in g.NOUNS}] += 1
    assert checked[True] > 500 and checked[False] > 100  # nouns and adjectives were both checked


def test_english_content_words_are_frenchs_without_the_do_of_negation():
    for t in tr.generate_triples(200, seed=2):
        fr_content = {e for links, c in zip(t.fr.align, t.fr.content, strict=True) if c for e in links}
        ko_content = {e for e, c in enumerate(t.en_content) if c}
        assert ko_content <= fr_content and {t.en[e] for e in fr_content - ko_content} <= {"do", "does"}


def test_triple_splits_are_disjoint_stratified_and_seeded():
    kw = dict(n_train=300, n_valid=60, test_per_bucket=15, seed=3)
    s = tr.make_triple_splits(**kw)
    assert (len(s.train), len(s.valid), len(s.test)) == (300, 60, 4 * 15)
    tr_, va, te = ({t.en for t in part} for part in (s.train, s.valid, s.test))
    assert not (tr_ & va) and not (tr_ & te) and not (va & te)
    assert len(va) == 60 and len(te) == 60  # valid and test have no repeated sentence
    assert [t.bucket for t in s.test] == [b for b in BUCKET_NAMES for _ in range(15)]
    assert tr.make_triple_splits(**kw) == s
    other = tr.make_triple_splits(**{**kw, "seed": 4})
    assert other.test != s.test and other.train != s.train
    with pytest.raises(ValueError, match="n_valid must be >= 0"):
        tr.make_triple_splits(n_valid=-1)
    with pytest.raises(ValueError, match="distinct"):
        tr.make_triple_splits(n_train=0, n_valid=0, test_per_bucket=100, buckets=((3, 3),))


def test_the_pair_corpora_do_not_share_the_triples_streams():
    pairs = splits.make_splits(n_train=20, n_valid=5, test_per_bucket=3, seed=0, target="ko")
    trip = tr.make_triple_splits(n_train=20, n_valid=5, test_per_bucket=3, seed=0)
    assert [p.src for p in pairs.test] != [t.en for t in trip.test]


def test_triple_cache_round_trip(tmp_path):
    kw = dict(n_train=80, n_valid=10, test_per_bucket=4, seed=5)
    made = tr.make_triple_splits(**kw)
    assert tr.load_triple_splits(tmp_path, **kw) == made
    files = sorted((tmp_path / "corpus").glob("triples-*.jsonl.gz"))
    assert [f.name.rsplit("-", 1)[1] for f in files] == ["fr.jsonl.gz", "ko.jsonl.gz"]
    assert all(tr.CORPUS_VERSION in f.name for f in files)
    with gzip.open(files[1], "rt") as f:
        header = json.loads(f.readline())
    assert header["kwargs"]["components"] == ["synth-enfr-1", "synth-enko-1"]
    assert tr.load_triple_splits(tmp_path, **kw) == made  # read back
    files[0].write_bytes(b"garbage")
    assert tr.load_triple_splits(tmp_path, **kw) == made  # rebuilt
    # Two files whose English sides differ do not make triples: both are rebuilt.
    fr_side = splits._read_cache(files[0], tr._cache_key(kw), f"{tr.CORPUS_VERSION}/fr")
    broken = dataclasses.replace(fr_side, test=[dataclasses.replace(fr_side.test[0], src=("x",)), *fr_side.test[1:]])
    splits._write_cache(files[0], broken, tr._cache_key(kw), f"{tr.CORPUS_VERSION}/fr")
    assert tr.load_triple_splits(tmp_path, **kw) == made


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data():
    s = tr.make_triple_splits(n_train=400, n_valid=40, test_per_bucket=5, seed=0)
    src_vocab, tgt_vocab = multisource.build_vocabs(s)
    return s, src_vocab, tgt_vocab


def _model(data, combine="separate", seed=0):
    _, src_vocab, tgt_vocab = data
    torch.manual_seed(seed)
    return MultiSourceRNN(MultiSourceConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=12, combine=combine))


def _batch(data, n=4, part="test"):
    s, src_vocab, tgt_vocab = data
    return collate(multisource.encode_triples(getattr(s, part)[:n], src_vocab, tgt_vocab))


def test_joint_vocabulary_and_encoding(data):
    s, src_vocab, tgt_vocab = data
    assert {tok for t in s.train for tok in (*t.side("fr"), *t.side("ko"))} <= set(src_vocab.itos)
    assert "chat" in src_vocab and "고양이" in src_vocab and "cat" not in src_vocab and "cat" in tgt_vocab
    t = s.train[7]
    src, tgt_in, tgt_out = multisource.encode_triples([t], src_vocab, tgt_vocab)[0]
    n_fr, n_ko = len(t.side("fr")) + 1, len(t.side("ko")) + 1
    assert src.shape == (2, max(n_fr, n_ko))
    assert src_vocab.decode(src[0]) == list(t.side("fr")) and src_vocab.decode(src[1]) == list(t.side("ko"))
    assert (src[0, n_fr:] == PAD).all() and (src[1, n_ko:] == PAD).all()
    assert tgt_vocab.decode(tgt_out) == list(t.en) and tgt_in[0] == 1 and (tgt_in[1:] == tgt_out[:-1]).all()


def test_config_checks():
    assert MultiSourceConfig(9, 7).rnn_config().sources == 2
    assert MultiSourceConfig(9, 7, combine="flat").rnn_config().sources == 1
    with pytest.raises(ValueError, match="combine must be one of 'separate', 'flat', got 'sum'"):
        MultiSourceConfig(9, 7, combine="sum")
    with pytest.raises(ValueError, match="hid_dim must be even"):
        MultiSourceConfig(9, 7, hid_dim=11)
    with pytest.raises(TypeError, match="src_vocab_size must be an int"):
        MultiSourceConfig(None, 7)
    with pytest.raises(TypeError, match="config must be a MultiSourceConfig, got RNNConfig"):
        MultiSourceRNN(MultiSourceConfig(9, 7).rnn_config())


@pytest.mark.parametrize("combine", multisource.COMBINES)
def test_shapes_and_attention_blocks(data, combine):
    model = _model(data, combine).eval()
    src, tgt_in, _ = _batch(data)
    B, _, S = src.shape
    logits, attn = model(src, tgt_in, return_attention=True)
    assert logits.shape == (B, tgt_in.size(1), len(data[2])) and attn.shape == (B, tgt_in.size(1), 2 * S)
    blocks = by_source(attn)  # (B, T, 2, S)
    assert torch.equal(blocks.masked_fill((src == PAD).unsqueeze(1), 0.0), blocks)  # nothing on padding
    sums = blocks.sum(-1)  # (B, T, 2)
    if combine == "separate":
        torch.testing.assert_close(sums, torch.ones_like(sums))  # one softmax per source
    else:
        torch.testing.assert_close(sums.sum(-1), torch.ones_like(sums[..., 0]))  # one softmax over both
        assert (sums < 0.999).all()  # and each source gets only part of it
    memory = model.encode(src)
    assert memory["states"].shape == (B, 2 * S, 12) and ("segments" in memory) == (combine == "separate")


@pytest.mark.parametrize("combine", multisource.COMBINES)
def test_padding_and_batch_neighbours_change_nothing(data, combine):
    model = _model(data, combine).eval()
    src, tgt_in, _ = _batch(data, n=6)
    logits, attn = model(src, tgt_in, return_attention=True)
    for b in (0, 5):
        S = int((src[b] != PAD).sum(1).max())
        T = int((tgt_in[b] != PAD).sum())
        one, one_attn = model(src[b : b + 1, :, :S], tgt_in[b : b + 1, :T], return_attention=True)
        torch.testing.assert_close(one, logits[b : b + 1, :T], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(by_source(one_attn), by_source(attn[b : b + 1, :T])[..., :S], atol=1e-6, rtol=1e-5)


def test_initial_state_combines_both_encoders(data):
    model = _model(data).eval()
    src, _, _ = _batch(data, n=2)
    memory = model.encode(src)
    changed = src.clone()
    changed[:, 1, 0] = changed[0, 1, 1]  # another first Korean word
    assert not torch.allclose(model.encode(changed)["summary"], memory["summary"])
    finals = [model._encode_one(lang, src[:, k])[1] for k, lang in enumerate(tr.LANGS)]
    want = torch.tanh(model.init_combine(torch.cat(finals, -1)))
    torch.testing.assert_close(memory["summary"], want)


@pytest.mark.parametrize("combine", multisource.COMBINES)
def test_greedy_and_beam_decoding_speak_the_protocol(data, combine):
    model = _model(data, combine)
    src, _, _ = _batch(data, n=3)
    out = greedy_decode(model, src, max_len=9)
    assert out.tokens.shape[0] == 3 and out.attn.shape == (3, out.tokens.size(1), 2 * src.size(2))
    assert model.training  # the decoder put the mode back
    for b in range(3):  # the batch decodes as each sentence alone
        S = int((src[b] != PAD).sum(1).max())
        alone = greedy_decode(model, src[b : b + 1, :, :S], max_len=9)
        n = int(alone.lengths[0])
        assert torch.equal(alone.tokens[0, :n], out.tokens[b, :n])
    if combine == "separate":
        steps = by_source(out.attn[0, : int(out.lengths[0])]).sum(-1)  # (T, 2)
        torch.testing.assert_close(steps, torch.ones_like(steps))
    beam = beam_search(model, src, beam=3, max_len=9)  # the memory (segments too) expanded to 3 hypotheses
    S = int((src[2] != PAD).sum(1).max())
    alone = beam_search(model, src[2:, :, :S], beam=3, max_len=9)
    assert beam.tokens.shape[0] == 3 and torch.equal(beam.tokens[2], alone.tokens[0])


def test_hostile_inputs(data):
    model = _model(data).eval()
    src, tgt_in, _ = _batch(data, n=2)
    with pytest.raises(ValueError, match=r"src must be \(B, 2, S\) token ids \(row 0 French"):
        model(src[:, 0], tgt_in)
    with pytest.raises(ValueError, match=r"src must be \(B, 2, S\) token ids .* got shape \(2, 3, "):
        model(torch.cat([src, src[:, :1]], dim=1), tgt_in)
    with pytest.raises(TypeError, match=r"src\[:, 0\] \(French\) must hold integer token ids"):
        model(src.float(), tgt_in)
    empty = src.clone()
    empty[1, 1] = PAD
    with pytest.raises(ValueError, match=r"src\[:, 1\] \(Korean\) row 1 is all padding"):
        model(empty, tgt_in)
    left = src.clone()
    left[0, 0] = torch.roll(left[0, 0], 1)
    left[0, 0, 0] = PAD
    if (src[0, 0] != PAD).all():  # the French row filled the width: make room first
        left = torch.cat([left, torch.zeros_like(left[:, :, :1])], dim=2)
    with pytest.raises(ValueError, match=r"src\[:, 0\] \(French\) row 0 has padding \(id 0\) before a real token"):
        greedy_decode(model, left)
    big = src.clone()
    big[0, 1, 0] = model.config.src_vocab_size
    with pytest.raises(ValueError, match=r"src\[:, 1\] \(Korean\) holds token id \d+, outside the vocabulary"):
        model.encode(big)
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=2, T\)"):
        model(src, tgt_in[:1])
    with pytest.raises(ValueError, match=r"attn must be \(\.\.\., K\*S\) with K=2 sources"):
        by_source(torch.zeros(2, 3, 5))


def test_checkpoint_round_trip(data, tmp_path):
    _, src_vocab, tgt_vocab = data
    model = _model(data, "flat").eval()
    src, tgt_in, _ = _batch(data)
    path = save_checkpoint(model, tmp_path / "ms", src_vocab=src_vocab, tgt_vocab=tgt_vocab, corpus_version="t")
    loaded, meta = load_checkpoint(path)
    assert type(loaded) is MultiSourceRNN and loaded.config == model.config and meta["kind"] == "multisource"
    assert meta["src_vocab"] == src_vocab and meta["tgt_vocab"] == tgt_vocab
    assert {k.split(".")[0] for k in loaded.state_dict()} == {"src_emb", "encoders", "init_combine", "decoder"}
    torch.testing.assert_close(loaded(src, tgt_in), model(src, tgt_in), atol=0, rtol=0)


def test_dataloaders_give_right_padded_seeded_batches(data):
    s, src_vocab, tgt_vocab = data
    dls = multisource.make_triple_dataloaders(s, src_vocab, tgt_vocab, bs=16, device="cpu", seed=1)
    first = [b for _, b in zip(range(3), dls.train, strict=False)]
    again = multisource.make_triple_dataloaders(s, src_vocab, tgt_vocab, bs=16, device="cpu", seed=1)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again.train, strict=False))
    for src, tgt_in, tgt_out in first:
        assert src.dim() == 3 and src.shape[1] == 2 and tgt_in.shape == tgt_out.shape
        for k in range(2):  # every row of both sources: tokens, <eos>, then padding
            lengths = (src[:, k] != PAD).sum(1)
            assert torch.equal(src[:, k] != PAD, torch.arange(src.size(2)) < lengths.unsqueeze(1))
    with pytest.raises(TypeError, match="splits must be TripleSplits"):
        multisource.make_triple_dataloaders(s.train, src_vocab, tgt_vocab)


def test_a_short_training_lowers_the_loss(data):
    s, src_vocab, tgt_vocab = data
    set_seed(0)
    model = _model(data)
    src, tgt_in, tgt_out = _batch(data, n=40, part="valid")

    def loss():
        with torch.no_grad():
            return float(masked_cross_entropy(model.eval()(src, tgt_in), tgt_out))

    before = loss()
    dls = multisource.make_triple_dataloaders(s, src_vocab, tgt_vocab, bs=32, device="cpu", seed=0)
    _, stats = fit_budget(model, dls, steps=40, lr=1e-2, progress=False)
    assert stats.steps == 40 and loss() < before - 0.5


# ----------------------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------------------


def _gold_attention(triples, lang):
    """All of every English word's attention on its first gold link in ``lang`` (else on that source's <eos>)."""
    out = []
    for t in triples:
        blocks = {x: np.zeros((len(t.en), len(t.side(x)) + 1)) for x in tr.LANGS}
        links = t.to_english(lang).align
        for e in range(len(t.en)):
            blocks[lang][e, links[e][0] if links[e] else -1] = 1.0
        out.append(blocks)
    return out


@pytest.mark.parametrize("lang", tr.LANGS)
def test_evaluate_scores_each_source_against_its_own_links(data, monkeypatch, lang):
    s, src_vocab, tgt_vocab = data
    model = _model(data, "flat")
    monkeypatch.setattr(multisource, "source_attention", lambda m, ts, *a, **k: _gold_attention(ts, lang))
    res = multisource.evaluate(model, s.test, src_vocab, tgt_vocab)
    assert res["by_source"][lang]["align_content"] == 1.0  # every content word's peak on a gold link
    share = res["source_share"]
    want = 1.0 if lang == "fr" else 0.0
    assert share["mass_fr"] == share["mass_fr_content"] == share["top_fr_content"] == want
    assert share["top_gold_content"] == 1.0
    masses = multisource.source_mass(_gold_attention(s.test, lang), "ko")
    assert all(np.array_equal(m, np.full(len(t.en), 1.0 - want)) for m, t in zip(masses, s.test, strict=True))
    assert sum(b["n"] for b in res["by_bucket"].values()) == res["n_test"] == len(s.test)
    assert list(res["by_bucket"]) == list(BUCKET_NAMES) and res["combine"] == "flat"


def test_evaluate_runs_on_a_model(data):
    s, src_vocab, tgt_vocab = data
    model = _model(data)
    res = multisource.evaluate(model, s.test[:6], src_vocab, tgt_vocab)
    assert res["source_share"] is None and res["n_test"] == 6
    attn = multisource.source_attention(model, s.test[:2], src_vocab, tgt_vocab)
    t = s.test[1]
    assert attn[1]["fr"].shape == (len(t.en), len(t.side("fr")) + 1)
    np.testing.assert_allclose(attn[1]["ko"].sum(1), 1.0, rtol=1e-5)
    hyps, _ = multisource.translate(model, s.test[:2], src_vocab, tgt_vocab)
    assert len(hyps) == 2 and all(isinstance(w, str) for h in hyps for w in h)
    with pytest.raises(TypeError, match="model must be a MultiSourceRNN"):
        multisource.evaluate(torch.nn.Linear(2, 2), s.test, src_vocab, tgt_vocab)
    with pytest.raises(ValueError, match="triples is empty"):
        multisource.evaluate(model, [], src_vocab, tgt_vocab)
    with pytest.raises(TypeError, match=r"triples\[0\] must be an attnlab.data.corpus.triples.Triple, got Pair"):
        multisource.evaluate(model, [s.test[0].fr], src_vocab, tgt_vocab)


# ----------------------------------------------------------------------------------------------
# presets and run
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_presets_follow_the_bahdanau_preset(profile):
    base = experiments.preset("bahdanau", profile)
    for name, combine in (("multisource", "separate"), ("multisource_flat", "flat")):
        exp = multisource_experiments.preset(name, profile)
        assert (exp.steps, exp.bs, exp.lr, exp.label_smoothing) == (base.steps, base.bs, base.lr, base.label_smoothing)
        assert exp.model == {**{k: base.model[k] for k in ("emb_dim", "hid_dim", "attn_dim")}, "combine": combine}
    with pytest.raises(KeyError, match="unknown multi-source experiment 'bahdanau'"):
        multisource_experiments.preset("bahdanau")


def test_run_writes_checkpoint_and_results(tmp_data_dir, monkeypatch):
    monkeypatch.setenv(experiments.MAX_STEPS_VAR, "4")
    small = tr.make_triple_splits(n_train=120, n_valid=8, test_per_bucket=2, seed=0)
    model, res = multisource_experiments.run("multisource_flat", profile="cpu", steps=6, data=small, progress=False)
    assert (res["train_steps"], res["budget_capped_by"], res["task"]) == (4, "ATTNLAB_MAX_STEPS=4", multisource.TASK)
    assert res["data"]["test"] == 8 and res["corpus_version"] == tr.CORPUS_VERSION and res["combine"] == "flat"
    loaded, meta, source = multisource_experiments.load_trained("multisource_flat")
    assert source == "live run" and meta["metrics"] == res and meta["experiment"]["name"] == "multisource_flat"
    src, tgt_in, _ = collate(multisource.encode_triples(small.test[:2], meta["src_vocab"], meta["tgt_vocab"]))
    torch.testing.assert_close(loaded(src, tgt_in), model.cpu().eval()(src, tgt_in))
    with pytest.raises(TypeError, match="data must be TripleSplits"):
        multisource_experiments.run("multisource", data=splits.make_splits(n_train=5, n_valid=1, test_per_bucket=1))
