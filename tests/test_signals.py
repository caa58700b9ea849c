"""Tone-word signals (attnlab.data.corpus.signals) and the LAS-style transcriber (attnlab.models.speech)."""

import random

import numpy as np
import pytest
import torch

from attnlab.data.corpus.signals import (
    ALPHABET,
    FRAME_LEN,
    FREQUENCIES,
    N_FEATURES,
    WORD_BUCKET_NAMES,
    char_vocab,
    collate_signals,
    encode_utterances,
    frame_features,
    frame_mask,
    generate_utterances,
    make_signal_splits,
    render,
    word_bucket,
)
from attnlab.data.vocab import BOS, EOS, PAD
from attnlab.models.decoding import greedy_decode
from attnlab.models.speech import (
    Listener,
    Transcriber,
    TranscriberConfig,
    edit_distance,
    evaluate_transcriber,
    monotonicity,
    peak_in_span,
    state_spans,
    transcribe,
)
from attnlab.training.speech_experiments import train_transcriber


def tiny(**kw):
    torch.manual_seed(0)
    return Transcriber(TranscriberConfig(conv_channels=8, hid_dim=12, emb_dim=6, **kw)).eval()


@pytest.fixture(scope="module")
def utts():
    return generate_utterances(6, seed=5)


# ------------------------------------------------------------------------------------------ data


def test_same_seed_same_signals_other_seed_other_signals():
    a, b = make_signal_splits(20, 6, 6, seed=3), make_signal_splits(20, 6, 6, seed=3)
    for xs, ys in ((a.train, b.train), (a.valid, b.valid), (a.test, b.test)):
        assert [u.word for u in xs] == [u.word for u in ys]
        assert all(np.array_equal(x.samples, y.samples) and x.spans == y.spans for x, y in zip(xs, ys, strict=True))
    c = make_signal_splits(20, 6, 6, seed=4)
    assert [u.word for u in c.train] != [u.word for u in a.train]


def test_splits_have_disjoint_words_and_a_stratified_test():
    s = make_signal_splits(200, 60, 30, seed=0)
    train, valid, test = ({u.word for u in x} for x in (s.train, s.valid, s.test))
    assert not (train & valid) and not (train & test) and not (valid & test)
    assert len(test) == 30, "test words repeat"
    assert [sum(u.bucket == b for u in s.test) for b in WORD_BUCKET_NAMES] == [10, 10, 10]
    with pytest.raises(ValueError, match="multiple of the 3 word buckets"):
        make_signal_splits(10, 5, 7)


def test_gold_spans_hold_the_letters_burst_and_only_there():
    u = render("ahd", random.Random(7))
    assert u.word == "ahd" and len(u.spans) == 3
    ends = [0] + [e for _, e in u.spans]
    for (start, end), prev_end in zip(u.spans, ends, strict=False):
        assert 2 <= end - start <= 5 and start >= prev_end
    assert all(u.spans[i + 1][0] - u.spans[i][1] >= 1 for i in range(2)), "letters need a silence between them"
    assert u.n_frames * FRAME_LEN == len(u.samples) and u.spans[-1][1] <= u.n_frames
    feats = frame_features(u.samples)  # (S, F)
    inside = np.zeros(u.n_frames, bool)
    for letter, (start, end) in zip(u.word, u.spans, strict=True):
        inside[start:end] = True
        peak_bin = feats[start:end, :-1].argmax(1)
        assert (np.abs(peak_bin - FREQUENCIES[letter] * FRAME_LEN) <= 1).all(), (letter, peak_bin)
    energy = feats[:, :-1].max(1)
    assert energy[inside].min() > energy[~inside].max(), "a silent frame is as loud as a burst"


def test_render_and_features_refuse_bad_input():
    rng = random.Random(0)
    with pytest.raises(ValueError, match="outside the alphabet"):
        render("az", rng)
    with pytest.raises(ValueError, match="2-6 letters"):
        render("a", rng)
    with pytest.raises(TypeError, match="word must be a str"):
        render(["a", "b"], rng)
    with pytest.raises(TypeError, match="rng must be a random.Random"):
        render("ab", 0)
    with pytest.raises(ValueError, match="whole number of 32-sample frames"):
        frame_features(np.zeros(40, np.float32))
    with pytest.raises(TypeError, match="1-D float numpy array"):
        frame_features(np.zeros(64, np.int64))
    with pytest.raises(ValueError, match="outside all buckets"):
        word_bucket(7)


def test_collate_pads_frames_with_zeros_and_the_mask_reads_the_flag(utts):
    items = encode_utterances(utts)
    frames, tgt_in, tgt_out = collate_signals(items)
    B, S = len(utts), max(u.n_frames for u in utts)
    assert frames.shape == (B, S, N_FEATURES) and frames.dtype == torch.float32
    assert tgt_in[:, 0].eq(BOS).all()
    mask = frame_mask(frames)
    assert mask.sum(1).tolist() == [u.n_frames for u in utts]
    assert (frames[~mask] == 0).all()
    v = char_vocab()
    for u, row in zip(utts, tgt_out.tolist(), strict=True):
        assert [v.itos[i] for i in row[: len(u.word)]] == list(u.word) and row[len(u.word)] == EOS
    assert v.itos[4:] == list(ALPHABET)


def test_frame_mask_refuses_bad_frames(utts):
    frames, _, _ = collate_signals(encode_utterances(utts))
    with pytest.raises(ValueError, match="F=18"):
        frame_mask(frames[..., :-1])
    bad = frames.clone()
    bad[0, 0, -1] = 0.5
    with pytest.raises(ValueError, match="frame flag"):
        frame_mask(bad)
    left = frames.flip(1)
    with pytest.raises(ValueError, match="padding .* before a real token"):
        frame_mask(left)
    with pytest.raises(TypeError, match="floating-point"):
        frame_mask(frames.long())


# ------------------------------------------------------------------------------------------ model


def test_listener_states_do_not_depend_on_the_padding(utts):
    torch.manual_seed(0)
    listener = Listener(N_FEATURES, 8, 12, 4).eval()
    frames, _, _ = collate_signals(encode_utterances(utts))
    states, keep = listener(frames, frame_mask(frames))
    assert states.shape == (len(utts), -(-frames.size(1) // 4), 12)
    assert keep.sum(1).tolist() == [-(-u.n_frames // 4) for u in utts]
    for b, u in enumerate(utts):
        alone = collate_signals(encode_utterances([u]))[0]
        s1, k1 = listener(alone, frame_mask(alone))
        n = int(k1.sum())
        torch.testing.assert_close(states[b, :n], s1[0, :n], atol=1e-5, rtol=1e-5)
        assert (states[b, n:] == 0).all()


@pytest.mark.parametrize("reduction", [1, 2, 4])
def test_transcriber_shapes_and_attention_over_real_states_only(utts, reduction):
    model = tiny(reduction=reduction)
    frames, tgt_in, _ = collate_signals(encode_utterances(utts))
    logits, attn = model(frames, tgt_in, return_attention=True)
    S2 = -(-frames.size(1) // reduction)
    assert logits.shape == (len(utts), tgt_in.size(1), len(char_vocab()))
    assert attn.shape == (len(utts), tgt_in.size(1), S2)
    real = torch.tensor([-(-u.n_frames // reduction) for u in utts])
    pad = torch.arange(S2).unsqueeze(0) >= real.unsqueeze(1)  # (B, S')
    assert (attn.masked_select(pad.unsqueeze(1).expand_as(attn)) == 0).all(), "padding got attention"
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:2]))


def test_greedy_decode_speaks_the_protocol_with_a_transcriber(utts):
    model = tiny()
    frames, _, _ = collate_signals(encode_utterances(utts))
    dec = greedy_decode(model, frames, max_len=8)
    assert dec.tokens.shape[0] == len(utts) and dec.attn.shape[:2] == dec.tokens.shape
    assert dec.attn.shape[2] == -(-frames.size(1) // 4)
    # Feeding the decoded tokens back with teacher forcing must reproduce them: one decoder.
    tokens = dec.tokens[:, : int(dec.lengths.max())]
    tgt_in = torch.cat([torch.full((len(utts), 1), BOS), tokens[:, :-1]], dim=1)
    tgt_in = tgt_in.masked_fill(tgt_in == EOS, PAD)
    with torch.no_grad():
        logits = model(frames, tgt_in)
    logits[..., [PAD, BOS]] = float("-inf")  # greedy decoding never emits these
    for b in range(len(utts)):
        n = int(dec.lengths[b])
        assert logits[b, :n].argmax(-1).tolist() == dec.tokens[b, :n].tolist()
    assert len(transcribe(model, utts, max_len=8)) == len(utts)


def test_transcriber_refuses_bad_frames_and_configs(utts):
    model = tiny()
    frames, tgt_in, _ = collate_signals(encode_utterances(utts))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        model(frames.double(), tgt_in)
    with pytest.raises(ValueError, match=r"\(B, S, F=18\)"):
        greedy_decode(model, frames[:, :, 2:])
    with pytest.raises(TypeError, match="floating-point"):
        greedy_decode(model, frames.long())
    with pytest.raises(ValueError, match="reduction must be one of"):
        TranscriberConfig(reduction=3)
    with pytest.raises(ValueError, match="hid_dim must be even"):
        TranscriberConfig(hid_dim=11)
    with pytest.raises(ValueError, match="prev_conv must be odd"):
        TranscriberConfig(prev_conv=4)
    with pytest.raises(TypeError, match="TranscriberConfig"):
        Transcriber({"reduction": 2})


# ------------------------------------------------------------------------------------------ scores


def test_state_spans_peak_in_span_and_monotonicity_by_hand():
    assert state_spans([(0, 3), (4, 9)], 4) == [(0, 1), (1, 3)]
    assert state_spans([(0, 3), (4, 9)], 1) == [(0, 3), (4, 9)]
    assert state_spans([(1, 2)], 2) == [(0, 1)]
    with pytest.raises(ValueError, match="reduction must be one of"):
        state_spans([(0, 1)], 3)
    with pytest.raises(ValueError, match="0 <= start < end"):
        state_spans([(2, 2)], 1)
    attn = torch.eye(5)[[0, 2, 1, 3]]  # peaks 0, 2, 1, 3
    assert peak_in_span(attn, [(0, 1), (1, 2), (1, 3)], 1) == [True, False, True]
    assert monotonicity(attn) == (2, 3)
    assert monotonicity(attn, 2) == (1, 1)
    assert monotonicity(attn, 1) == (0, 0)
    with pytest.raises(ValueError, match="n_letters=5"):
        monotonicity(attn, 5)
    with pytest.raises(ValueError, match=r"attn must be \(T, S'\)"):
        peak_in_span(torch.zeros(3), [(0, 1)], 1)
    with pytest.raises(TypeError, match="attn must be a floating-point"):
        monotonicity(torch.eye(3, dtype=torch.long))
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "ab") == 2 and edit_distance("abc", "abc") == 0


def test_a_short_training_lowers_the_loss_and_the_scores_add_up():
    splits = make_signal_splits(256, 32, 3, seed=1)
    config = TranscriberConfig(conv_channels=16, hid_dim=24, emb_dim=8)
    frames, tgt_in, tgt_out = collate_signals(encode_utterances(splits.valid))

    def loss(model):
        with torch.no_grad():
            logits = model(frames, tgt_in)
        return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD))

    torch.manual_seed(0)
    before = loss(Transcriber(config).eval())
    model, stats = train_transcriber(steps=25, seed=0, splits=splits, config=config, bs=32)
    assert stats.steps == 25
    assert loss(model) < before - 0.3, (before, loss(model))
    res = evaluate_transcriber(model, splits.valid)
    hyps = transcribe(model, splits.valid)
    gold = [u.word for u in splits.valid]
    assert res["exact_match"] == pytest.approx(np.mean([h == g for h, g in zip(hyps, gold, strict=True)]))
    errors = sum(edit_distance(h, g) for h, g in zip(hyps, gold, strict=True))
    assert res["cer"] == pytest.approx(errors / sum(map(len, gold)))
    assert res["n"] == 32 and set(res["by_bucket"]) <= set(WORD_BUCKET_NAMES)
    with pytest.raises(ValueError, match="utterances is empty"):
        evaluate_transcriber(model, [])
    with pytest.raises(TypeError, match="must be a Transcriber"):
        evaluate_transcriber(object(), splits.valid)
