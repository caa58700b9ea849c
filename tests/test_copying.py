"""Lesson 10: the copy corpus, the copy models (pointer-generator, convolutional copy network), their measures and widget."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data.copy_metrics import FATES, copy_accuracy, p_gen_means, pointer_accuracy, unknown_fate
from attnlab.data.corpus import BUCKETS, Pair, make_splits
from attnlab.data.corpus.copying import (
    TITLES,
    CopyPair,
    add_names,
    copy_corpus_version,
    make_copy_splits,
    name_pool,
    number_pool,
)
from attnlab.data.vocab import BOS, EOS, PAD, UNK, Vocab
from attnlab.models.copying import (
    CopyConfig,
    CopyModel,
    check_copy_ids,
    decode_extended,
    encode_copy_pair,
    extended_size,
    greedy_copy,
    mix_copy,
)
from attnlab.models.rnn import Seq2SeqRNN
from attnlab.training import copy_experiments as ce
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint
from attnlab.viz.widgets.copy_stepper import CopyStepperState, copy_png, copy_steps, copy_view


@pytest.fixture(scope="module", params=["fr", "ko"])
def small(request):
    return request.param, make_copy_splits(target=request.param, n_train=300, n_valid=20, test_per_bucket=10, seed=3)


# ------------------------------------------------------------------------------------------- corpus
def test_copies_are_verbatim_and_linked(small):
    target, splits = small
    for p in splits.train + splits.valid + splits.test:
        assert isinstance(p, CopyPair) and p.copies
        assert len(p.align) == len(p.tgt) == len(p.content)
        for t, j, kind in p.copies:
            assert p.tgt[t] == p.src[j] and p.align[t] == (j,)
            assert (kind == "number") == p.src[j].isdigit()
        for links in p.align:
            assert all(0 <= j < len(p.src) for j in links)
        assert "he" not in p.src and "she" not in p.src and "two" not in p.src and "three" not in p.src


def test_test_names_and_numbers_are_unseen_in_training(small):
    _, splits = small
    seen = {p.tgt[t] for p in splits.train + splits.valid for t, _, _ in p.copies}
    test = {p.tgt[t] for p in splits.test for t, _, _ in p.copies}
    assert test and not (test & seen)


def test_buckets_and_determinism(small):
    target, splits = small
    assert [p.bucket for p in splits.test] == [f"{lo}-{hi}" for lo, hi in BUCKETS for _ in range(10)]
    again = make_copy_splits(target=target, n_train=300, n_valid=20, test_per_bucket=10, seed=3)
    assert again.train == splits.train and again.test == splits.test
    other = make_copy_splits(target=target, n_train=300, n_valid=20, test_per_bucket=10, seed=4)
    assert other.train != splits.train


def test_titles_are_translated_not_copied():
    splits = make_copy_splits(target="fr", n_train=400, n_valid=0, test_per_bucket=0, seed=1, title_prob=1.0)
    titled = [p for p in splits.train if any(w in TITLES for w in p.src)]
    assert titled
    for p in titled:
        for j, w in enumerate(p.src):
            if w in TITLES:
                t = next(t for t, a in enumerate(p.align) if a == (j,))
                assert p.tgt[t] == TITLES[w][0] and p.tgt[t + 1] == p.src[j + 1]  # "Dr Okafor"
    ko = make_copy_splits(target="ko", n_train=400, n_valid=0, test_per_bucket=0, seed=1, title_prob=1.0)
    for p in ko.train:
        for t, j, kind in p.copies:
            if kind == "name" and j > 0 and p.src[j - 1] in TITLES:
                assert p.tgt[t + 1] == TITLES[p.src[j - 1]][1]  # "Okafor 박사"
                assert p.tgt[t + 2] in ("이", "가")  # the subject particle follows the title (all end in a vowel)
                assert p.tgt[t + 2] == "가"


def test_handmade_pair_french_and_korean():
    fr = Pair(
        ("he", "sees", "two", "dogs", "."),
        ("il", "voit", "deux", "chiens", "."),
        ((0,), (1,), (2,), (3,), (4,)),
        (True,) * 5,
    )
    p = add_names(fr, "fr", random.Random(0), ["Okafor"], ["47"], title_prob=0.0)
    assert p.src == ("Okafor", "sees", "47", "dogs", ".") and p.tgt == ("Okafor", "voit", "47", "chiens", ".")
    assert p.copies == ((0, 0, "name"), (2, 2, "number"))
    ko = Pair(
        ("he", "sleeps", "."),
        ("그", "가", "잔다", "."),
        ((0,), (), (1,), (2,)),
        (True, False, True, True),
        ((), (0,), (), ()),
    )
    q = add_names(ko, "ko", random.Random(0), ["Okafor"], ["47"], title_prob=0.0)
    assert q.tgt == ("Okafor", "이", "잔다", ".") and q.possible[1] == (0,)  # ends in r: 이
    q = add_names(ko, "ko", random.Random(0), ["Lina"], ["47"], title_prob=0.0, name_tokens=2)
    assert q.src == ("Lina", "Lina", "sleeps", ".") and q.tgt[2] == "가" and q.possible[2] == (1,)


def test_pools():
    names = name_pool(50, seed=0)
    assert len(set(names)) == 50 and all(n[0].isupper() and n.isalpha() for n in names)
    assert name_pool(50, seed=0) == names and name_pool(50, seed=1) != names
    numbers = number_pool(seed=0)
    assert len(numbers) == 9990 and set(numbers) == {str(k) for k in range(10, 10000)}


def test_course_splits_are_untouched():
    # the copy corpus only reads the generators: the default French pairs are still those of synth-enfr-1
    assert copy_corpus_version("fr") == "synth-enfr-1+copy-1" and copy_corpus_version("ko") == "synth-enko-1+copy-1"
    a = make_splits(n_train=5, n_valid=5, test_per_bucket=2, seed=0)
    assert all(not hasattr(p, "copies") for p in a.train)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_train=-1), "n_train"),
        (dict(test_per_bucket=-2), "test_per_bucket"),
        (
            dict(name_tokens=9),
            r"name_tokens=9: the shortest sentence with a titled name has 12 tokens, longer than the bucket \(1, 10\)",
        ),
        (dict(name_tokens=0), "name_tokens"),
        (dict(test_share=1.0), "test_share"),
        (dict(n_names=-5), "n_names"),
        (dict(target="de"), "target"),
    ],
)
def test_impossible_settings_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_copy_splits(**{"n_train": 1, "n_valid": 0, "test_per_bucket": 0, **kwargs})


# -------------------------------------------------------------------------------------------- model
SRC = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", "he", "sees", "Dr.", "."])
TGT = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", "il", "voit", "Dr", "."])


def test_encode_and_decode_the_extended_vocabulary():
    src, copy_ids, tgt_in, tgt_out, oovs = encode_copy_pair(
        ["Dr.", "Okafor", "sees", "Okafor", "47", "."], ["Dr", "Okafor", "voit", "47", "."], SRC, TGT
    )
    assert oovs == ["Dr.", "Okafor", "sees", "47"]  # every source word outside the target vocabulary
    assert copy_ids.tolist() == [8, 9, 10, 9, 11, 7, EOS]
    assert src.tolist() == [6, UNK, 5, UNK, UNK, 7, EOS]
    assert tgt_in.tolist() == [BOS, 6, UNK, 5, UNK, 7]
    assert tgt_out.tolist() == [6, 9, 5, 11, 7, EOS]
    assert decode_extended(tgt_out.tolist(), TGT, oovs) == ["Dr", "Okafor", "voit", "47", "."]
    *_, plain, _ = encode_copy_pair(["Okafor", "."], ["Okafor", "."], SRC, TGT, copy=False)
    assert plain.tolist() == [UNK, 7, EOS]
    with pytest.raises(ValueError, match=r"ids holds 12, outside the extended vocabulary \[0, 12\)"):
        decode_extended([12], TGT, oovs)
    assert extended_size(copy_ids[None], len(TGT)).tolist() == [12]


def test_a_source_id_outside_the_extended_vocabulary_is_refused():
    src = torch.tensor([[4, 5, 2]])
    check_copy_ids(torch.tensor([[8, 9, 2]]), src, 8)
    with pytest.raises(ValueError, match=r"copy_ids row 0 holds id 10, outside its extended vocabulary \[0, 10\)"):
        check_copy_ids(torch.tensor([[8, 10, 2]]), src, 8)  # a gap: only 2 temporary ids, 8 and 9
    with pytest.raises(ValueError, match="copy_ids must have the shape of src"):
        check_copy_ids(torch.tensor([[8, 2]]), src, 8)
    with pytest.raises(ValueError, match="negative id"):
        check_copy_ids(torch.tensor([[-1, 8, 2]]), src, 8)
    with pytest.raises(TypeError, match="copy_ids"):
        check_copy_ids(torch.tensor([[8.0, 9.0, 2.0]]), src, 8)
    model = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=4, hid_dim=6, attn_dim=4))
    with pytest.raises(ValueError, match="copy_ids row 0 holds id 10"):
        model(src, torch.tensor([[8, 10, 2]]), torch.tensor([[BOS, 4]]))


@pytest.mark.numeric
@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(0, 2**31 - 1),
    st.floats(0.0, 1.0),
)
def test_the_mixture_sums_to_one_over_the_extended_vocabulary(B, S, seed, gen):
    g = torch.Generator().manual_seed(seed)
    V = 6
    p_vocab = torch.softmax(torch.randn(B, V, generator=g), -1)
    attn = torch.softmax(torch.randn(B, S, generator=g), -1)
    copy_ids = torch.randint(0, V + S, (B, S), generator=g)
    p_gen = torch.full((B,), gen)
    probs = mix_copy(p_vocab, attn, p_gen, copy_ids)
    assert probs.shape == (B, V + int((copy_ids - V + 1).clamp_min(0).max()))
    assert torch.allclose(probs.sum(-1), torch.ones(B), atol=1e-5) and bool((probs >= 0).all())
    # a word's copy probability is the attention on every position that holds it
    w = int(copy_ids[0, 0])
    want = (p_gen[0] * (p_vocab[0, w] if w < V else 0)) + (1 - p_gen[0]) * attn[0][copy_ids[0] == w].sum()
    assert torch.allclose(probs[0, w], want, atol=1e-6)


def _batch():
    src = torch.tensor([[4, 5, 3, 7, 2], [6, 3, 7, 2, 0]])
    copy_ids = torch.tensor([[4, 5, 8, 7, 2], [6, 8, 7, 2, 0]])
    tgt_in = torch.tensor([[BOS, 4, 5, 8], [BOS, 6, 8, 7]])
    return src, copy_ids, tgt_in


@pytest.mark.numeric
@pytest.mark.parametrize("attention", ["bahdanau", "conv"])
def test_both_models_give_distributions_and_learn_through_p_gen(attention):
    torch.manual_seed(0)
    model = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=8, hid_dim=10, attn_dim=6, attention=attention))
    src, copy_ids, tgt_in = _batch()
    log_probs, parts = model(src, copy_ids, tgt_in, return_parts=True)
    assert log_probs.shape == (2, 4, len(TGT) + 1)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(2, 4), atol=1e-5)
    assert parts["p_gen"].shape == (2, 4) and bool(((parts["p_gen"] > 0) & (parts["p_gen"] < 1)).all())
    assert torch.allclose(parts["copy"].sum(-1), torch.ones(2, 4), atol=1e-5)
    assert bool((parts["copy"][1, :, 4] == 0).all())  # padding gets no copy probability
    log_probs[0, 3, 8].backward()  # the copied word's probability: the copy head and p_gen get gradients
    head = model.gen if attention == "bahdanau" else model.conv_lambda
    assert head.weight.grad is not None and float(head.weight.grad.abs().sum()) > 0
    ids, run = greedy_copy(model, src, copy_ids, max_len=6)
    assert ids.shape[0] == 2 and ids.shape[1] <= 6 and run["p_gen"].shape == ids.shape


@pytest.mark.numeric
def test_without_copying_the_model_is_the_lesson_02_model():
    torch.manual_seed(0)
    model = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=8, hid_dim=10, attn_dim=6, copy=False))
    plain = Seq2SeqRNN(model.config.rnn_config())
    plain.load_state_dict(model.rnn.state_dict())
    model.eval()
    plain.eval()
    src, copy_ids, tgt_in = _batch()
    tgt_in = tgt_in.clamp_max(len(TGT) - 1)
    ours = model(src, copy_ids, tgt_in)
    theirs = torch.log_softmax(plain(src, tgt_in), -1)
    assert ours.shape == theirs.shape and torch.allclose(ours, theirs, atol=1e-5)


def test_config_errors():
    with pytest.raises(ValueError, match="attention must be one of 'bahdanau', 'conv', got 'luong'"):
        CopyConfig(8, 8, attention="luong")
    with pytest.raises(ValueError, match="widths must be odd"):
        CopyConfig(8, 8, widths=(3, 4, 3))
    with pytest.raises(ValueError, match="widths must be three"):
        CopyConfig(8, 8, widths=(3, 3))
    with pytest.raises(TypeError, match="copy must be a bool"):
        CopyConfig(8, 8, copy=1)
    assert CopyConfig(8, 8, widths=[5, 3, 3]).widths == (5, 3, 3)


@pytest.mark.parametrize("attention", ["bahdanau", "conv"])
def test_checkpoint_round_trip(tmp_path, attention):
    torch.manual_seed(0)
    model = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=8, hid_dim=10, attn_dim=6, attention=attention))
    path = save_checkpoint(model, tmp_path / "c", src_vocab=SRC, tgt_vocab=TGT, corpus_version=copy_corpus_version())
    loaded, meta = load_checkpoint(path)
    assert meta["kind"] == "copy" and loaded.config == model.config
    model.eval()
    src, copy_ids, tgt_in = _batch()
    assert torch.equal(model(src, copy_ids, tgt_in), loaded(src, copy_ids, tgt_in))


# ------------------------------------------------------------------------------------------ metrics
def _pairs():
    a = CopyPair(
        ("Dr.", "Okafor", "sleeps", "."),
        ("Dr", "Okafor", "dort", "."),
        ((0,), (1,), (2,), (3,)),
        (True,) * 4,
        copies=((1, 1, "name"),),
    )
    b = CopyPair(("47", "cats", "."), ("47", "chats", "."), ((0,), (1,), (2,)), (True,) * 3, copies=((0, 0, "number"),))
    return [a, b]


def test_copy_accuracy_and_fate():
    pairs = _pairs()
    acc = copy_accuracy([["Dr", "Okafor", "dort", "."], ["chats", "."]], pairs)
    assert acc == {"name": 1.0, "number": 0.0, "all": 0.5, "sentences": 0.5}
    one_hot = lambda peaks, S: np.eye(S)[peaks]
    fate = unknown_fate(
        [["Dr", "<unk>", "dort", "."], ["chats", "."]], [one_hot([0, 1, 2, 3], 5), one_hot([1, 2], 4)], pairs
    )
    assert fate == {"<unk>": 1, "known word": 0, "dropped": 1, "copied": 0} and tuple(fate) == FATES
    fate = unknown_fate(
        [["Dr", "garçon", "dort", "."], ["47", "."]], [one_hot([0, 1, 2, 3], 5), one_hot([0, 2], 4)], pairs
    )
    assert fate == {"<unk>": 0, "known word": 1, "dropped": 0, "copied": 1}
    with pytest.raises(ValueError, match="hyps and pairs must have the same length"):
        copy_accuracy([[]], pairs)
    with pytest.raises(TypeError, match="CopyPair"):
        copy_accuracy([[]], [object()])


def test_pointer_accuracy_and_p_gen():
    pairs = _pairs()
    right = [np.eye(5)[[0, 1, 2, 3]], np.eye(4)[[0, 1, 2]]]
    wrong = [np.eye(5)[[0, 0, 2, 3]], np.eye(4)[[0, 1, 2]]]
    assert pointer_accuracy(right, pairs) == 1.0 and pointer_accuracy(wrong, pairs) == 0.5
    assert pointer_accuracy(wrong, pairs, kind="name", titled=True) == 0.0
    assert pointer_accuracy(wrong, pairs, titled=False) == 1.0  # only the number is untitled
    assert np.isnan(pointer_accuracy(right, pairs, kind="number", titled=True))
    with pytest.raises(ValueError, match="copy_attns must be"):
        pointer_accuracy([np.eye(2), np.eye(4)[:3]], pairs)
    means = p_gen_means([np.array([0.9, 0.1, 0.8, 1.0]), np.array([0.3, 0.9, 0.7])], pairs)
    assert means["copied"] == pytest.approx(0.2) and means["other"] == pytest.approx((0.9 + 0.8 + 1.0 + 0.9 + 0.7) / 5)


# --------------------------------------------------------------------------------------- experiments
def test_vocabularies_leave_the_copied_words_out(small):
    _, splits = small
    src_vocab, tgt_vocab = ce.copy_vocabs(splits.train)
    copied = {p.tgt[t] for p in splits.train for t, _, _ in p.copies}
    assert copied and not (copied & set(tgt_vocab.itos)) and not (copied & set(src_vocab.itos))
    assert "." in tgt_vocab and len(tgt_vocab) > 20


def test_presets():
    for name in ("pointer_gen", "pointer_nocopy", "conv_copy"):
        exp = ce.preset(name, "cpu")
        assert exp.family == "copy" and exp.steps == ce.COPY_STEPS["fr"] and exp.label_smoothing == 0.0
    assert ce.preset("conv_copy", "cpu").model["attention"] == "conv"
    with pytest.raises(KeyError, match="unknown copy experiment"):
        ce.preset("pointer", "cpu")


def test_evaluate_copy_on_a_tiny_model(small):
    target, splits = small
    src_vocab, tgt_vocab = ce.copy_vocabs(splits.train)
    torch.manual_seed(0)
    model = CopyModel(CopyConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=10, attn_dim=6))
    res = ce.evaluate_copy(model, splits.test[:6], src_vocab, tgt_vocab)
    assert res["n_test"] == 6 and 0 <= res["copy_all"] <= 1 and 0 <= res["pointer_all"] <= 1
    assert set(res["p_gen"]) == {"copied", "other"}


# -------------------------------------------------------------------------------------------- widget
def test_copy_stepper_logic():
    torch.manual_seed(0)
    model = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=8, hid_dim=10, attn_dim=6))
    labels, steps = copy_steps(model, ["Dr.", "Okafor", "sees", "."], SRC, TGT, max_len=5)
    assert labels == ["Dr.", "Okafor", "sees", ".", "<eos>"] and 1 <= len(steps) <= 5
    view = copy_view(labels, steps, 0)
    assert view["focus"] in labels and 0 < view["p_gen"] < 1 and view["copied"] == (view["p_gen"] < 0.5)
    assert view["text"].startswith("step 0: wrote")
    with pytest.raises(IndexError, match="step 9 out of range"):
        copy_view(labels, steps, 9)
    assert copy_png(labels, steps[0].copy, steps[0].p_gen)[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="p_gen must be in"):
        copy_png(labels, steps[0].copy, 1.5)
    state = CopyStepperState(model, _pairs(), SRC, TGT)
    assert [i for _, i in state.options()] == [0, 1]
    assert state.select(1)["labels"] == ["47", "cats", ".", "<eos>"]
    assert state.move(state.last_step)["prefix"] == [s.token for s in state.recorded()[1]]
    plain = CopyModel(CopyConfig(len(SRC), len(TGT), emb_dim=8, hid_dim=10, attn_dim=6, copy=False))
    with pytest.raises(ValueError, match="needs a copy model"):
        copy_steps(plain, ["."], SRC, TGT)
    assert PAD == 0


def test_shipped_names_a_results_file():
    assert not ce.shipped("pointer_gen_seed99")
    assert ce.shipped("bahdanau")
