"""Generated documents (attnlab.data.corpus.documents) and the hierarchical attention network (attnlab.models.hierarchical)."""

import random
from collections import Counter

import pytest
import torch

from attnlab.data.corpus.documents import (
    ANIMALS,
    DOC_BUCKET_NAMES,
    Document,
    collate_documents,
    document_vocab,
    encode_documents,
    evidence_words,
    generate_documents,
    is_evidence,
    make_document,
    make_document_splits,
)
from attnlab.data.vocab import PAD
from attnlab.models.hierarchical import HAN, ContextAttention, HANConfig, document_masks, evaluate_han
from attnlab.training.hierarchical_experiments import train_han


def tiny(**kw):
    torch.manual_seed(0)
    return HAN(HANConfig(vocab_size=len(document_vocab()), emb_dim=8, hid_dim=10, attn_dim=6, **kw)).eval()


def toks(text):
    return tuple(text.split())


@pytest.fixture(scope="module")
def docs():
    return generate_documents(5, seed=2)


# ------------------------------------------------------------------------------------------ data


def test_same_seed_same_documents_and_disjoint_stratified_splits():
    a, b = make_document_splits(40, 10, 12, seed=1), make_document_splits(40, 10, 12, seed=1)
    assert (a.train, a.valid, a.test) == (b.train, b.valid, b.test)
    assert make_document_splits(40, 10, 12, seed=2).train != a.train
    keys = [{d.sentences for d in x} for x in (a.train, a.valid, a.test)]
    assert sum(map(len, keys)) == 62, "a document repeats"
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    cells = Counter((d.bucket, d.label) for d in a.test)
    assert cells == {(b, lab): 2 for b in DOC_BUCKET_NAMES for lab in (True, False)}
    with pytest.raises(ValueError, match="multiple of 6"):
        make_document_splits(10, 5, 8)


def test_evidence_and_its_words_by_hand():
    s = toks("the cat sleeps under the table .")
    assert is_evidence(s) and evidence_words(s) == (1, 2, 3, 5)
    s = toks("a small dog sleeps quietly under my table .")
    assert is_evidence(s) and evidence_words(s) == (2, 3, 5, 7)
    for near_miss in (
        "the boy sleeps under the table .",
        "the cat sits under the table .",
        "the cat sleeps on the table .",
        "the cat sleeps under the bed .",
        "cat sleeps under the table .",
    ):
        assert not is_evidence(toks(near_miss)), near_miss
    with pytest.raises(ValueError, match="not an evidence sentence"):
        evidence_words(toks("the cat sleeps on the table ."))


def test_generated_documents_carry_their_gold_evidence():
    for d in generate_documents(300, seed=0):
        hits = [i for i, s in enumerate(d.sentences) if is_evidence(s)]
        assert hits == ([d.evidence] if d.label else []), d
        if d.label:
            s = d.sentences[d.evidence]
            subj, verb, prep, place = (s[i] for i in d.evidence_words)
            assert subj in ANIMALS and (verb, prep, place) == ("sleeps", "under", "table")
        else:
            assert d.evidence is None and d.evidence_words == ()
        assert 4 <= len(d.sentences) <= 6


def test_make_document_refuses_bad_arguments():
    rng = random.Random(0)
    with pytest.raises(ValueError, match=r"n_sentences must be in \[4, 6\]"):
        make_document(rng, 3, True)
    with pytest.raises(TypeError, match="label must be a bool"):
        make_document(rng, 4, 1)
    with pytest.raises(TypeError, match="rng must be a random.Random"):
        make_document(0, 4, True)


def test_encode_and_collate_pad_words_and_sentences(docs):
    items = encode_documents(docs)
    batch, labels = collate_documents(items)
    N = max(len(d.sentences) for d in docs)
    L = max(len(s) for d in docs for s in d.sentences)
    assert batch.shape == (len(docs), N, L) and labels.tolist() == [int(d.label) for d in docs]
    v = document_vocab()
    for b, d in enumerate(docs):
        for i, s in enumerate(d.sentences):
            assert [v.itos[t] for t in batch[b, i, : len(s)]] == list(s)
            assert (batch[b, i, len(s) :] == PAD).all()
        assert (batch[b, len(d.sentences) :] == PAD).all()
    assert v.unk_count == 0


# ------------------------------------------------------------------------------------------ model


def test_shapes_and_padding_gets_zero_weight_without_nan(docs):
    model = tiny()
    batch, _ = collate_documents(encode_documents(docs))
    logits, word_attn, sent_attn = model(batch, return_attention=True)
    B, N, L = batch.shape
    assert logits.shape == (B, 2) and word_attn.shape == (B, N, L) and sent_attn.shape == (B, N)
    assert torch.isfinite(logits).all() and torch.isfinite(word_attn).all() and torch.isfinite(sent_attn).all()
    word_keep, sent_keep = document_masks(batch)
    assert (word_attn[~word_keep] == 0).all() and (sent_attn[~sent_keep] == 0).all()
    torch.testing.assert_close(word_attn.sum(-1), sent_keep.float())  # a padded sentence: an all-zero row
    torch.testing.assert_close(sent_attn.sum(-1), torch.ones(B))


@pytest.mark.parametrize("word_rnn", [True, False])
def test_a_document_scores_the_same_alone_and_in_a_padded_batch(docs, word_rnn):
    model = tiny(word_rnn=word_rnn)
    batch, _ = collate_documents(encode_documents(docs))
    logits, word_attn, _ = model(batch, return_attention=True)
    for b, d in enumerate(docs):
        alone, _ = collate_documents(encode_documents([d]))
        l1, w1, _ = model(alone, return_attention=True)
        torch.testing.assert_close(logits[b], l1[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(word_attn[b, : w1.size(1), : w1.size(2)], w1[0], atol=1e-5, rtol=1e-5)


def test_context_attention_gives_a_fully_masked_row_zeros_and_finite_gradients():
    torch.manual_seed(0)
    pool = ContextAttention(4, 3)
    states = torch.randn(2, 5, 4, requires_grad=True)
    keep = torch.tensor([[True, True, False, False, False], [False] * 5])
    pooled, weights = pool(states, keep)
    assert weights.shape == (2, 5) and pooled.shape == (2, 4)
    assert (weights[1] == 0).all() and (pooled[1] == 0).all() and (weights[0, 2:] == 0).all()
    pooled.sum().backward()
    assert torch.isfinite(states.grad).all()


def test_bad_documents_and_configs_are_refused(docs):
    model = tiny()
    batch, _ = collate_documents(encode_documents(docs))
    left = batch.clone()
    left[0, 0] = left[0, 0].roll(1)  # a sentence starting with padding
    with pytest.raises(ValueError, match="words of a sentence.*padding"):
        model(left)
    gap = batch.clone()
    gap[0, 0] = PAD  # an empty sentence before real ones
    with pytest.raises(ValueError, match="sentences of a document.*padding"):
        model(gap)
    with pytest.raises(ValueError, match=r"\(B, N, L\)"):
        model(batch[0])
    with pytest.raises(TypeError, match="integer token ids"):
        model(batch.float())
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(batch + 100)
    with pytest.raises(ValueError, match="hid_dim must be even"):
        HANConfig(vocab_size=10, hid_dim=9)
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        HANConfig(vocab_size=10, n_classes=1)
    with pytest.raises(TypeError, match="word_rnn must be a bool"):
        HANConfig(vocab_size=10, word_rnn=1)
    with pytest.raises(TypeError, match="must be a HANConfig"):
        HAN({"vocab_size": 10})


def test_a_short_training_lowers_the_loss_and_the_scores_match_the_attention():
    splits = make_document_splits(400, 60, 12, seed=3)
    config = HANConfig(vocab_size=len(document_vocab()), emb_dim=16, hid_dim=16, attn_dim=16)
    batch, labels = collate_documents(encode_documents(splits.valid))

    def loss(model):
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(model(batch), labels))

    torch.manual_seed(0)
    before = loss(HAN(config).eval())
    model, info = train_han(steps=100, seed=0, splits=splits, config=config, bs=32, lr=1e-2)
    assert info["steps"] == 100
    assert loss(model) < before - 0.3, (before, loss(model))
    res = evaluate_han(model, splits.valid, bs=7)
    with torch.no_grad():
        logits, word_attn, sent_attn = model(batch, return_attention=True)
    pos = [b for b, d in enumerate(splits.valid) if d.label]
    assert res["accuracy"] == pytest.approx(float((logits.argmax(-1) == labels).float().mean()))
    sent = [int(sent_attn[b].argmax()) == splits.valid[b].evidence for b in pos]
    word = [int(word_attn[b, splits.valid[b].evidence].argmax()) in splits.valid[b].evidence_words for b in pos]
    assert res["n_positive"] == len(pos)
    assert res["sentence_top1"] == pytest.approx(sum(sent) / len(pos))
    assert res["word_top1"] == pytest.approx(sum(word) / len(pos))
    with pytest.raises(ValueError, match="docs is empty"):
        evaluate_han(model, [])


def test_a_negative_only_set_has_no_attention_scores():
    model = tiny()
    neg = [d for d in generate_documents(20, seed=4) if not d.label][:3]
    res = evaluate_han(model, neg)
    assert res["n_positive"] == 0 and res["sentence_top1"] is None and res["word_top1"] is None
    assert isinstance(neg[0], Document)
