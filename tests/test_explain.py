"""Tests of attnlab.training.explain: Shift-Att (Chen et al. 2020) and adversarial attention (Jain & Wallace 2019)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.data.corpus import Pair
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.metrics import alignment_error_rate
from attnlab.data.vocab import SPECIALS, Vocab
from attnlab.models.decoding import forced_attention
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.training import explain

SRC_VOCAB = Vocab([*SPECIALS, *(f"s{i}" for i in range(8))])  # 12 ids
TGT_VOCAB = Vocab([*SPECIALS, *(f"w{i}" for i in range(7))])  # 11 ids


def identity_pair(n: int) -> Pair:
    """``n`` source words, ``n`` target words, word ``t`` translating word ``t`` (all content words)."""
    return Pair(
        src=tuple(f"s{i}" for i in range(n)),
        tgt=tuple(f"w{i}" for i in range(n)),
        align=tuple((i,) for i in range(n)),
        content=(True,) * n,
    )


PAIRS = [identity_pair(n) for n in (3, 5, 4, 2)]  # different lengths: the batch is padded


def tiny_rnn(**kw) -> Seq2SeqRNN:
    torch.manual_seed(0)
    cfg = dict(emb_dim=6, hid_dim=8, attn_dim=5, attention="bahdanau") | kw
    return Seq2SeqRNN(RNNConfig(src_vocab_size=len(SRC_VOCAB), tgt_vocab_size=len(TGT_VOCAB), **cfg)).eval()


def tiny_transformer(layers: int = 2) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(
        src_vocab_size=len(SRC_VOCAB),
        tgt_vocab_size=len(TGT_VOCAB),
        d_model=8,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=layers,
        dim_feedforward=16,
    )
    return Transformer(cfg).eval()


# ----------------------------------------------------------------- Shift-Att
def test_induce_alignment_maps_reads_row_t_naive_and_row_t_plus_1_shifted_on_a_hand_made_map():
    stack = np.zeros((2, 2, 3, 2))  # (N, H, T+1, S): T = 2 tokens, S = 2 words
    stack[1, 0] = [[1, 0], [0, 1], [1, 0]]
    stack[1, 1] = [[0, 1], [0, 1], [0, 1]]
    stack[0] = 7.0  # another layer: must not leak in
    naive = explain.induce_alignment_maps([stack], shift=False)[0]
    shifted = explain.induce_alignment_maps([stack])[0]  # shift=True is the default
    np.testing.assert_allclose(naive, [[0.5, 0.5], [0.0, 1.0]])  # rows 0, 1 of the last layer, heads averaged
    np.testing.assert_allclose(shifted, [[0.0, 1.0], [0.5, 0.5]])  # rows 1, 2
    np.testing.assert_allclose(explain.induce_alignment_maps([stack], head=0)[0], [[0, 1], [1, 0]])
    np.testing.assert_allclose(explain.induce_alignment_maps([stack], layer=0, shift=False)[0], np.full((2, 2), 7.0))


def test_induce_alignment_maps_rejects_bad_arguments():
    stack = np.zeros((2, 2, 3, 2))  # (N, H, T+1, S)
    with pytest.raises(ValueError, match=r"layer must be in \[0, 2\)"):
        explain.induce_alignment_maps([stack], layer=2)
    with pytest.raises(ValueError, match=r"head must be in \[0, 2\) or None"):
        explain.induce_alignment_maps([stack], head=2)
    with pytest.raises(TypeError, match="layer must be an int"):
        explain.induce_alignment_maps([stack], layer=1.0)
    with pytest.raises(ValueError, match=r"stacks\[0\] must be \(N, H, T\+1 >= 2, S\)"):
        explain.induce_alignment_maps([stack[0]])
    with pytest.raises(ValueError, match=r"stacks\[1\] has \(N, H\) = \(1, 2\)"):
        explain.induce_alignment_maps([stack, stack[:1]])
    with pytest.raises(ValueError, match="non-empty list"):
        explain.induce_alignment_maps([])
    with pytest.raises(TypeError, match="shift must be a bool"):
        explain.induce_alignment_maps([stack], shift=1)


def test_naive_cross_attention_of_the_last_layer_is_what_forced_attention_reports():
    model = tiny_transformer()
    got = explain.shift_att(model, PAIRS, SRC_VOCAB, TGT_VOCAB, shift=False)
    want = forced_attention(model, PAIRS, SRC_VOCAB, TGT_VOCAB)
    for g, w, pair in zip(got, want, PAIRS, strict=True):
        assert g.shape == (len(pair.tgt), len(pair.src))
        np.testing.assert_allclose(g, w, atol=1e-6)
    stacks = explain.decoder_cross_attention(model, PAIRS, SRC_VOCAB, TGT_VOCAB, bs=3)  # two batches
    assert [s.shape for s in stacks] == [(2, 2, len(p.tgt) + 1, len(p.src)) for p in PAIRS]


def late_attention_maps(src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, torch.Tensor]:
    """Cross-attention shifted by construction: the step whose input is token ``r - 1`` looks at word ``r - 1``."""
    B, S = src.shape
    T1 = tgt_in.shape[1]
    cross = torch.full((B, 2, 2, T1, S), 1.0 / S)  # (B, N, H, T+1, S+1): layer 0 is uniform
    for r in range(T1):
        cross[:, 1, :, r, max(r - 1, 0)] = 5.0  # layer 1, both heads
    return {"cross": cross / cross.sum(-1, keepdim=True)}


def test_shift_att_fixes_the_aer_of_a_model_whose_attention_is_one_step_late():
    model = tiny_transformer()
    model.attention_maps = late_attention_maps  # instance attribute: the synthetic model's maps
    naive = explain.shift_att(model, PAIRS, SRC_VOCAB, TGT_VOCAB, shift=False)
    shifted = explain.shift_att(model, PAIRS, SRC_VOCAB, TGT_VOCAB)
    assert alignment_error_rate(shifted, PAIRS) == 0.0
    assert alignment_error_rate(naive, PAIRS) > 0.5  # only token 0 is right without the shift
    rows = explain.shift_att_report(model, PAIRS, SRC_VOCAB, TGT_VOCAB)
    assert [(r["layer"], r["head"]) for r in rows] == [(layer, h) for layer in (0, 1) for h in ("mean", 0, 1)]
    last = rows[3]
    assert last["shift"]["aer"] == 0.0 and last["shift"]["align_content"] == 1.0
    assert last["naive"]["aer"] > 0.5


def test_decoder_cross_attention_refuses_an_rnn_and_bad_input():
    with pytest.raises(TypeError, match="needs a Transformer"):
        explain.decoder_cross_attention(tiny_rnn(), PAIRS, SRC_VOCAB, TGT_VOCAB)
    with pytest.raises(ValueError, match="non-empty sequence of Pair"):
        explain.decoder_cross_attention(tiny_transformer(), [], SRC_VOCAB, TGT_VOCAB)
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a Pair"):
        explain.decoder_cross_attention(tiny_transformer(), [("s0",)], SRC_VOCAB, TGT_VOCAB)
    with pytest.raises(ValueError, match="bs must be >= 1"):
        explain.decoder_cross_attention(tiny_transformer(), PAIRS, SRC_VOCAB, TGT_VOCAB, bs=0)


# ----------------------------------------------------------------- divergences
def test_jensen_shannon_and_total_variation_on_known_distributions():
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]])  # (3, K)
    q = torch.tensor([[0.0, 1.0], [0.5, 0.5], [0.6, 0.4]])
    jsd = explain.jensen_shannon(p, q)
    assert float(jsd[0]) == pytest.approx(math.log(2))  # disjoint: the maximum
    assert float(jsd[1]) == 0.0
    m = (p[2] + q[2]) / 2

    def kl(a, b):
        return float((a * (a / b).log()).sum())

    assert float(jsd[2]) == pytest.approx((kl(p[2], m) + kl(q[2], m)) / 2)
    torch.testing.assert_close(explain.jensen_shannon(q, p), jsd)  # symmetric
    torch.testing.assert_close(explain.total_variation(p, q), torch.tensor([1.0, 0.0, 0.4]))
    with pytest.raises(ValueError, match="p and q must have one shape"):
        explain.jensen_shannon(p, q[:2])
    with pytest.raises(TypeError, match="q must be a floating-point tensor"):
        explain.total_variation(p, q.long())


# ----------------------------------------------------------------- the hook
def _batch():
    src, tgt_in, _ = collate(encode_pairs(PAIRS, SRC_VOCAB, TGT_VOCAB))  # (B, S+1), (B, T+1)
    return src, tgt_in


def test_replaced_attention_with_the_models_own_logits_changes_nothing_and_is_removed():
    model = tiny_rnn(attention="luong", score="general")
    src, tgt_in = _batch()
    with torch.no_grad():
        logits0, attn0 = model(src, tgt_in, return_attention=True)  # (B, T+1, V), (B, T+1, S+1)
        with explain.replaced_attention(model, attn0.clamp_min(1e-30).log()):
            logits1, attn1 = model(src, tgt_in, return_attention=True)
        torch.testing.assert_close(logits1, logits0, atol=1e-5, rtol=0)
        torch.testing.assert_close(attn1, attn0, atol=1e-6, rtol=0)
        z = torch.randn(attn0.shape, generator=torch.Generator().manual_seed(3))  # (B, T+1, S+1)
        with explain.replaced_attention(model, z):
            logits2, attn2 = model(src, tgt_in, return_attention=True)
        after = model(src, tgt_in)
    keep = (src != 0).unsqueeze(1)  # (B, 1, S+1)
    want = torch.softmax(z.masked_fill(~keep, -math.inf), -1)  # (B, T+1, S+1): padding gets 0
    torch.testing.assert_close(attn2, want)
    assert not torch.allclose(logits2, logits0)
    torch.testing.assert_close(after, logits0, atol=0, rtol=0)
    assert "_attend" not in vars(model)


def test_replaced_attention_is_removed_when_the_block_raises_and_checks_the_decode():
    model = tiny_rnn()
    src, tgt_in = _batch()
    z = torch.zeros(len(PAIRS), tgt_in.shape[1], src.shape[1])  # (B, T+1, S+1)
    with pytest.raises(RuntimeError, match="inside"), explain.replaced_attention(model, z):
        raise RuntimeError("inside")
    assert "_attend" not in vars(model)
    with pytest.raises(ValueError, match=r"logits are for \(B, S\) = \(4, 6\)"), explain.replaced_attention(model, z):
        model(src[:2], tgt_in[:2])
    assert "_attend" not in vars(model)
    with pytest.raises(ValueError, match="logits have 2 steps, but decoding reached step t=2"):
        with explain.replaced_attention(model, z[:, :2]):
            model(src, tgt_in)
    assert "_attend" not in vars(model)


def test_replaced_attention_refuses_models_and_logits_it_does_not_fit():
    z = torch.zeros(1, 2, 3)  # (B, T, S)
    with pytest.raises(TypeError, match="needs a Seq2SeqRNN"), explain.replaced_attention(tiny_transformer(), z):
        pass
    with pytest.raises(ValueError, match=r"with attention \(config.attention is None\)"):
        with explain.replaced_attention(tiny_rnn(attention=None, attn_dim=None), z):
            pass
    with pytest.raises(ValueError, match="plain global soft attention"):
        with explain.replaced_attention(tiny_rnn(coverage=True), z):
            pass
    with pytest.raises(ValueError, match=r"logits must be \(B, T, S\)"), explain.replaced_attention(tiny_rnn(), z[0]):
        pass
    with pytest.raises(TypeError, match="logits must be a floating-point tensor"):
        with explain.replaced_attention(tiny_rnn(), z.long()):
            pass


# ----------------------------------------------------------------- the adversarial search
def _output_tvd(model, found, pairs) -> list[np.ndarray]:
    """Re-run the model with the returned adversarial weights: per pair the (T+1,) TVD of its outputs."""
    src, tgt_in = _batch()
    z = torch.full((len(pairs), tgt_in.shape[1], src.shape[1]), -1e4)  # (B, T+1, S+1)
    for b, a in enumerate(found.adversarial):
        z[b, : a.shape[0], : a.shape[1]] = torch.from_numpy(a).clamp_min(1e-30).log()
    with torch.no_grad():
        p0 = torch.softmax(model(src, tgt_in), -1)  # (B, T+1, V)
        with explain.replaced_attention(model, z):
            p1 = torch.softmax(model(src, tgt_in), -1)  # (B, T+1, V)
    tvd = explain.total_variation(p1, p0)  # (B, T+1)
    return [tvd[b, : len(p.tgt) + 1].numpy() for b, p in enumerate(pairs)]


@pytest.mark.parametrize("away_from", explain.ADVERSARY_TARGETS)
def test_adversarial_attention_moves_the_weights_and_keeps_every_output_within_epsilon(away_from):
    model = tiny_rnn(attention="luong", score="general").train()  # train mode: the search must switch it off
    before = {k: v.clone() for k, v in model.state_dict().items()}
    eps = 0.02
    found = explain.adversarial_attention(
        model, PAIRS, SRC_VOCAB, TGT_VOCAB, epsilon=eps, away_from=away_from, steps=25, bs=3
    )
    assert model.training
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], atol=0, rtol=0)
    assert all(p.grad is None for p in model.parameters())
    recomputed = _output_tvd(model.eval(), found, PAIRS)
    for pair, a, t, t_again, jsd in zip(PAIRS, found.adversarial, found.tvd, recomputed, found.jsd, strict=True):
        assert a.shape == (len(pair.tgt) + 1, len(pair.src) + 1) and jsd.shape == (len(pair.tgt) + 1,)
        np.testing.assert_allclose(a.sum(1), 1.0, atol=1e-5)
        assert float(jsd.min()) >= -1e-7 and float(jsd.max()) <= math.log(2) + 1e-6
        assert float(t.max()) <= eps
        assert float(t_again.max()) <= eps + 1e-6  # an independent re-run agrees
        np.testing.assert_allclose(t_again, t, atol=1e-5)
    assert all(found.moved)
    assert float(np.mean(np.concatenate(found.jsd))) > 1e-3
    summary = explain.adversarial_summary(found, PAIRS)
    assert summary["max_tvd"] <= eps
    assert summary["sentences"] == 4 and summary["content_tokens"] == sum(len(p.tgt) for p in PAIRS)
    if away_from == "gold":
        assert summary["gold_mass_adversarial"] < summary["gold_mass_original"]
    else:
        assert summary["mean_jsd"] > 1e-3


def test_adversarial_attention_rejects_bad_arguments():
    model = tiny_rnn()
    bad = [
        (dict(epsilon=0.0), ValueError, "epsilon must be > 0"),
        (dict(epsilon=1.5), ValueError, r"epsilon must be in \(0, 1\)"),
        (dict(away_from="uniform"), ValueError, "away_from must be one of 'model', 'gold'"),
        (dict(steps=0), ValueError, "steps must be >= 1"),
        (dict(lr=-1.0), ValueError, "lr must be > 0"),
        (dict(penalty="big"), TypeError, "penalty must be a float"),
    ]
    for kw, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            explain.adversarial_attention(model, PAIRS, SRC_VOCAB, TGT_VOCAB, **kw)
    unaligned = [Pair(src=("s0", "s1"), tgt=("w0",))]
    with pytest.raises(ValueError, match="needs pairs with gold links"):
        explain.adversarial_attention(model, unaligned, SRC_VOCAB, TGT_VOCAB, away_from="gold")
    with pytest.raises(ValueError, match="non-empty sequence of Pair"):
        explain.adversarial_attention(model, [], SRC_VOCAB, TGT_VOCAB)
    with pytest.raises(TypeError, match="needs a Seq2SeqRNN"):
        explain.adversarial_attention(tiny_transformer(), PAIRS, SRC_VOCAB, TGT_VOCAB)
    found = explain.adversarial_attention(model, PAIRS[:2], SRC_VOCAB, TGT_VOCAB, steps=1)
    with pytest.raises(ValueError, match="found holds 2 sentences but 1 pairs"):
        explain.adversarial_summary(found, PAIRS[:1])
    with pytest.raises(ValueError, match=r"pairs\[0\] has no gold links"):
        explain.adversarial_summary(found, [Pair(src=p.src, tgt=p.tgt) for p in PAIRS[:2]])


# ----------------------------------------------------------------------------------------------
# variance across seeds
# ----------------------------------------------------------------------------------------------


def _seed_pairs():
    return [
        Pair(("a", "b", "c"), ("x", "y"), align=((0,), (2,)), content=(True, True)),
        Pair(("d", "e"), ("z",), align=((1,),), content=(False,)),
    ]


def test_seed_spread_of_identical_maps_is_zero_and_of_different_peaks_is_counted_by_hand():
    pairs = _seed_pairs()
    seed0 = [np.array([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]), np.array([[0.3, 0.7]])]
    same = explain.seed_spread([seed0, [m.copy() for m in seed0]], pairs)
    assert same["mean_jsd"] == pytest.approx(0.0, abs=1e-12)
    assert (same["same_top"], same["same_top_content"], same["all_top_on_gold"]) == (1.0, 1.0, 1.0)
    assert same["aer_spread"] == 0.0 and same["seeds"] == 2 and same["tokens"] == 3
    # seed 1 moves the first token's peak to "b" (off the gold link); the other rows are equal
    seed1 = [np.array([[0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]), np.array([[0.3, 0.7]])]
    out = explain.seed_spread([seed0, seed1, seed0], pairs)
    p, q = torch.tensor([0.8, 0.1, 0.1], dtype=torch.float64), torch.tensor([0.1, 0.8, 0.1], dtype=torch.float64)
    one = float(explain.jensen_shannon(p, q))
    # three seed pairs x three tokens; two of the seed pairs differ on one token each
    assert out["mean_jsd"] == pytest.approx(2 * one / 9)
    assert out["same_top"] == pytest.approx(2 / 3)  # tokens y and z agree, x does not
    assert out["same_top_content"] == pytest.approx(1 / 2)  # z is a function word
    assert out["all_top_on_gold"] == pytest.approx(1 / 2)
    assert out["aer"][0] < out["aer"][1] and out["aer_spread"] > 0


def test_seed_spread_renormalises_rows_that_lost_their_eos_column():
    pairs = _seed_pairs()
    full = [np.array([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]), np.array([[0.3, 0.7]])]
    half = [m / 2 for m in full]  # the other half of every row went to <eos>
    assert explain.seed_spread([full, half], pairs)["mean_jsd"] == pytest.approx(0.0, abs=1e-12)


def test_seed_spread_rejects_bad_input():
    pairs = _seed_pairs()
    seed0 = [np.ones((2, 3)) / 3, np.ones((1, 2)) / 2]
    with pytest.raises(ValueError, match="at least two seeds"):
        explain.seed_spread([seed0], pairs)
    with pytest.raises(ValueError, match="same length"):
        explain.seed_spread([seed0, seed0[:1]], pairs)
    with pytest.raises(ValueError, match=r"shape \(T, S\)"):
        explain.seed_spread([seed0, [np.ones((3, 3)), seed0[1]]], pairs)
    with pytest.raises(ValueError, match="gold alignments"):
        explain.seed_spread([seed0, seed0], [Pair(("a", "b", "c"), ("x", "y")), pairs[1]])


# ----------------------------------------------------------------- lesson 09: permutation test, gradients, ranks
@pytest.mark.numeric
def test_transformed_attention_with_the_identity_changes_nothing_and_is_removed():
    model = tiny_rnn(attention="luong", score="general")
    src, tgt_in = _batch()
    with torch.no_grad():
        logits0 = model(src, tgt_in)
        with explain.transformed_attention(model, lambda a, t: a):
            logits1 = model(src, tgt_in)
        with pytest.raises(RuntimeError, match="inside"), explain.transformed_attention(model, lambda a, t: a):
            raise RuntimeError("inside")
    torch.testing.assert_close(logits1, logits0, atol=1e-6, rtol=0)
    assert "_attend" not in vars(model)
    with pytest.raises(ValueError, match="plain global soft attention"):
        with explain.transformed_attention(tiny_rnn(coverage=True), lambda a, t: a):
            pass


@pytest.mark.numeric
def test_permutation_effect_matches_shuffling_one_step_by_hand():
    model = tiny_rnn()
    pair = identity_pair(5)
    K = 4
    tvd = explain.permutation_effect(model, pair, SRC_VOCAB, TGT_VOCAB, permutations=K, seed=3)  # (T, K)
    assert tvd.shape == (5, K) and (tvd >= 0).all() and (tvd <= 1).all() and tvd.max() > 1e-3
    # the same permutations, one step at a time, through replaced_attention
    T, S1 = 5, 6
    perm = torch.argsort(torch.rand(T * K, S1, generator=torch.Generator().manual_seed(3)), dim=-1)  # (T*K, S+1)
    src, tgt_in, _ = collate(encode_pairs([pair], SRC_VOCAB, TGT_VOCAB))  # (1, S+1), (1, T+1)
    with torch.no_grad():
        logits0, attn0 = model(src, tgt_in, return_attention=True)  # (1, T+1, V), (1, T+1, S+1)
        p0 = torch.softmax(logits0, -1)[0]  # (T+1, V)
        for t in (0, 2, 4):
            for k in range(K):
                a = attn0.clone()
                a[0, t] = attn0[0, t, perm[t * K + k]]
                with explain.replaced_attention(model, a.clamp_min(1e-30).log()):
                    p1 = torch.softmax(model(src, tgt_in), -1)[0]  # (T+1, V)
                want = 0.5 * (p1[t] - p0[t]).abs().sum()
                assert abs(float(tvd[t, k]) - float(want)) < 1e-5, (t, k)


def test_permutation_effect_rejects_bad_input():
    with pytest.raises(ValueError, match="permutations"):
        explain.permutation_effect(tiny_rnn(), identity_pair(3), SRC_VOCAB, TGT_VOCAB, permutations=0)
    with pytest.raises(ValueError, match="at least 2 words"):
        explain.permutation_effect(tiny_rnn(), identity_pair(1), SRC_VOCAB, TGT_VOCAB)
    with pytest.raises(TypeError, match="Seq2SeqRNN"):
        explain.permutation_effect(tiny_transformer(), identity_pair(3), SRC_VOCAB, TGT_VOCAB)


@pytest.mark.numeric
def test_gradient_importance_is_the_derivative_of_scaling_each_word_embedding():
    # d/de log p(y_t) at e = 1 when word j's embedding becomes (1 + e) e_j is grad . e_j: a central difference
    model = tiny_rnn().double()
    pair = identity_pair(4)
    g = explain.gradient_importance(model, pair, SRC_VOCAB, TGT_VOCAB, detach_attention=False)  # (T, S)
    assert g.shape == (4, 4) and (g >= 0).all()
    src, tgt_in, tgt_out = collate(encode_pairs([pair], SRC_VOCAB, TGT_VOCAB))
    eps = 1e-5

    def logp(j, scale):
        hook = model.src_emb.register_forward_hook(lambda m, i, out: out * torch.where(
            torch.arange(out.shape[1]).view(1, -1, 1) == j, torch.tensor(scale, dtype=out.dtype), 1.0))
        try:
            with torch.no_grad():
                lp = torch.log_softmax(model(src, tgt_in), -1)[0]  # (T+1, V)
        finally:
            hook.remove()
        return lp[torch.arange(4), tgt_out[0, :4]]  # (T,)

    for j in range(4):
        fd = (logp(j, 1 + eps) - logp(j, 1 - eps)) / (2 * eps)  # (T,)
        torch.testing.assert_close(g[:, j], fd.abs(), atol=1e-6, rtol=1e-4)
    cut = explain.gradient_importance(model, pair, SRC_VOCAB, TGT_VOCAB)  # the gradient stops at the weights
    assert not torch.allclose(cut, g)


def test_rank_agreement_and_gold_weight_on_hand_made_maps():
    pair = Pair(src=("a", "b", "c"), tgt=("x", "y", "z"), align=((0,), (2,), ()), content=(True, True, True))
    attn = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])  # (T, S)
    imp = np.array([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])  # same order in row 0, reversed top in row 1
    r = explain.rank_agreement([attn], [imp], [pair])
    # row 0: tau 1; row 1: pairs (0,1) +, (0,2) +, (1,2) - -> tau 1/3; row 2 has no gold link
    assert r["tokens"] == 2 and r["kendall_tau"] == pytest.approx((1 + 1 / 3) / 2)
    assert r["same_top"] == 0.5 and r["attention_top_on_gold"] == 0.5 and r["importance_top_on_gold"] == 1.0
    assert explain.gold_weight([attn], [pair]) == pytest.approx((0.7 + 0.3) / 2)
    with pytest.raises(ValueError, match="differ in length"):
        explain.rank_agreement([attn], [], [pair])
    with pytest.raises(ValueError, match=r"needs \(T, S\)"):
        explain.rank_agreement([attn[:2]], [imp], [pair])
    with pytest.raises(ValueError, match="has shape"):
        explain.gold_weight([attn[:, :2]], [pair])
    with pytest.raises(ValueError, match="no content token"):
        explain.gold_weight([attn], [Pair(src=pair.src, tgt=pair.tgt, align=pair.align, content=(False,) * 3)])
