"""The Transformer: layers equal to PyTorch's, KV cache equal to recomputation, no leakage, errors."""

import pytest
import torch
from torch import nn

from attnlab.core.masks import causal_mask, padding_mask, to_nn_mha_mask
from attnlab.data.vocab import BOS, EOS, PAD, Vocab
from attnlab.models.decoding import beam_search, greedy_decode, sequence_logprob
from attnlab.models.transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    PositionalEncoding,
    Transformer,
    TransformerConfig,
    sinusoid_frequencies,
    sinusoid_shift_matrix,
    sinusoidal_table,
)
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint

V_SRC, V_TGT = 20, 23
ATOL = RTOL = 1e-5  # float32; observed differences are ~1e-7 or exactly 0
PLACEMENTS = pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])


def make(**kw):
    torch.manual_seed(0)
    cfg = dict(d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=48, max_len=32)
    return Transformer(TransformerConfig(V_SRC, V_TGT, **{**cfg, **kw})).eval()


def batch():
    torch.manual_seed(1)
    src = torch.randint(4, V_SRC, (3, 9))
    src[0, 7:] = PAD
    src[2, 3:] = PAD
    tgt_in = torch.randint(4, V_TGT, (3, 8))
    tgt_in[:, 0] = BOS
    return src, tgt_in


# ----------------------------------------------------------------------------- layers vs PyTorch


@pytest.mark.numeric
@PLACEMENTS
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_encoder_layer_equals_nn_transformer_encoder_layer(norm_first, need_weights):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = EncoderLayer(16, 4, 40, norm_first=norm_first).load_from_torch(ref).eval()
    x = torch.randn(3, 7, 16)  # (B, S, E)
    real = padding_mask(torch.tensor([7, 4, 2]), 7)  # (B, S), True = real token (course convention)
    expected = ref(x, src_key_padding_mask=to_nn_mha_mask(real))  # nn.*: True = blocked
    got, w = ours(x, src_keep=real, need_weights=need_weights)
    # PyTorch's fast path may write zeros at padded query positions; compare the real ones
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=RTOL)
    if need_weights:
        assert w.shape == (3, 4, 7, 7) and (w[~real[:, None, None, :].expand_as(w)] == 0).all()


@pytest.mark.numeric
@PLACEMENTS
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_decoder_layer_equals_nn_transformer_decoder_layer(norm_first, need_weights):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(16, 4, 40, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderLayer(16, 4, 40, norm_first=norm_first).load_from_torch(ref).eval()
    y, memory = torch.randn(3, 6, 16), torch.randn(3, 7, 16)  # (B, T, E), (B, S, E)
    src_real = padding_mask(torch.tensor([7, 4, 2]), 7)  # (B, S)
    tgt_real = padding_mask(torch.tensor([6, 5, 3]), 6)  # (B, T)
    expected = ref(
        y,
        memory,
        tgt_mask=to_nn_mha_mask(causal_mask(6)),
        tgt_key_padding_mask=to_nn_mha_mask(tgt_real),
        memory_key_padding_mask=to_nn_mha_mask(src_real),
    )
    got, w_self, w_cross = ours(y, memory, src_keep=src_real, tgt_keep=tgt_real, need_weights=need_weights)
    torch.testing.assert_close(got[tgt_real], expected[tgt_real], atol=ATOL, rtol=RTOL)
    # and with the causal mask alone (how the Transformer calls it)
    expected = ref(y, memory, tgt_mask=to_nn_mha_mask(causal_mask(6)), memory_key_padding_mask=to_nn_mha_mask(src_real))
    torch.testing.assert_close(ours(y, memory, src_keep=src_real)[0], expected, atol=ATOL, rtol=RTOL)
    if need_weights:
        assert (w_self.triu(diagonal=1) == 0).all(), "decoder self-attention saw the future"
        assert (w_cross[~src_real[:, None, None, :].expand_as(w_cross)] == 0).all()


@pytest.mark.numeric
def test_pre_ln_encoder_stack_equals_nn_transformer_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, batch_first=True, norm_first=True)
    ref = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False).eval()
    ours = Encoder(2, 16, 4, 40, norm_first=True).eval()
    for mine, theirs in zip(ours.layers, ref.layers, strict=True):
        mine.load_from_torch(theirs)
    ours.norm.load_state_dict(ref.norm.state_dict())
    x, real = torch.randn(2, 5, 16), padding_mask(torch.tensor([5, 3]), 5)
    expected = ref(x, src_key_padding_mask=to_nn_mha_mask(real))
    torch.testing.assert_close(ours(x, src_keep=real)[0][real], expected[real], atol=ATOL, rtol=RTOL)


@pytest.mark.numeric
@PLACEMENTS
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_cross_attention_on_projected_keys_values_equals_projecting_again(norm_first, need_weights):
    torch.manual_seed(0)
    layer = DecoderLayer(16, 4, 40, norm_first=norm_first).eval()
    y, memory = torch.randn(3, 6, 16), torch.randn(3, 7, 16)  # (B, T, E), (B, S, E)
    keep = padding_mask(torch.tensor([7, 4, 2]), 7)  # (B, S)
    a = layer(y, memory, src_keep=keep, need_weights=need_weights)
    b = layer(y, src_keep=keep, cross_kv=layer.cross_kv(memory), need_weights=need_weights)
    for x, z in zip(a, b, strict=True):
        if x is None:
            assert z is None
        else:
            torch.testing.assert_close(x, z, atol=0, rtol=0)
    with pytest.raises(ValueError, match="give memory"):
        layer(y, src_keep=keep)


def test_pytorch_mask_names_are_refused_by_layers_and_stacks():
    """nn.Transformer* names mean True = blocked (and tgt_mask is their causal mask): they fail loudly here."""
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    enc, dec = EncoderLayer(16, 4, 32), DecoderLayer(16, 4, 32)
    with pytest.raises(TypeError, match=r"EncoderLayer.forward\(\) got src_key_padding_mask=.*pass src_keep="):
        enc(x, src_key_padding_mask=pad)
    with pytest.raises(TypeError, match=r"got src_mask=.*True means \*blocked\*.*pass src_keep="):
        enc(x, src_mask=pad)
    with pytest.raises(TypeError, match="positional argument"):
        enc(x, pad)  # a mask passed by position, as nn.TransformerEncoderLayer(src, src_mask) takes it
    with pytest.raises(TypeError, match=r"DecoderLayer.forward\(\) got tgt_mask=.*no such argument"):
        dec(x, memory, tgt_mask=torch.zeros(5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="got memory_key_padding_mask=.*pass src_keep="):
        dec(x, memory, memory_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="got tgt_key_padding_mask=.*pass tgt_keep="):
        dec(x, memory, tgt_key_padding_mask=pad)
    with pytest.raises(TypeError, match=r"Encoder.forward\(\) got mask="):
        Encoder(1, 16, 4, 32)(x, mask=pad)
    with pytest.raises(TypeError, match=r"Decoder.forward\(\) got memory_key_padding_mask="):
        Decoder(1, 16, 4, 32)(x, memory, memory_key_padding_mask=pad)


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: EncoderLayer(0, 4, 32), ValueError, "d_model must be >= 1, got 0"),
        (lambda: EncoderLayer(16, 0, 32), ValueError, "num_heads must be >= 1, got 0"),
        (lambda: DecoderLayer(16, -4, 32), ValueError, "num_heads must be >= 1, got -4"),
        (lambda: DecoderLayer(16, 3, 32), ValueError, "d_model=16 is not divisible by num_heads=3"),
        (lambda: EncoderLayer(16, 4, 0), ValueError, "dim_feedforward must be >= 1, got 0"),
        (lambda: DecoderLayer(16, 4, 32, dropout=1.0), ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        (lambda: EncoderLayer(16, 4, 32, layer_norm_eps=0.0), ValueError, "layer_norm_eps must be a positive"),
        (lambda: EncoderLayer(16, 4, 32, norm_first=1), TypeError, "norm_first must be a bool"),
        (lambda: Encoder(0, 16, 4, 32), ValueError, "num_layers must be >= 1, got 0"),
        (lambda: Decoder(2.0, 16, 4, 32), TypeError, "num_layers must be an int, got float"),
        (lambda: FeedForward(16, -1), ValueError, "dim_feedforward must be >= 1, got -1"),
        (lambda: PositionalEncoding("learned", 8, 0), ValueError, "max_len must be >= 1, got 0"),
        (lambda: PositionalEncoding("sinusoidal", 0, 8), ValueError, "d_model must be >= 1, got 0"),
        (lambda: sinusoidal_table(-1, 8), ValueError, "max_len must be >= 0, got -1"),
        (lambda: TransformerConfig(5, 5, d_model=0), ValueError, "d_model must be >= 1, got 0"),
        (lambda: TransformerConfig(5, 5, max_len=0), ValueError, "max_len must be >= 1, got 0"),
        (lambda: TransformerConfig(5, 0), ValueError, "tgt_vocab_size must be >= 1, got 0"),
        (lambda: TransformerConfig(5, 5, dim_feedforward=-8), ValueError, "dim_feedforward must be >= 1, got -8"),
        (lambda: TransformerConfig(5, 5, num_heads=0), ValueError, "num_heads must be >= 1, got 0"),
        (lambda: TransformerConfig(5, 5, dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
        (lambda: TransformerConfig(5, 5, tie_embeddings="yes"), TypeError, "tie_embeddings must be a bool"),
        (lambda: Transformer({"src_vocab_size": 5}), TypeError, "config must be a TransformerConfig, got dict"),
    ],
)
def test_sizes_are_checked_in_every_constructor(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_load_from_torch_refuses_the_other_placement():
    ref = nn.TransformerEncoderLayer(16, 4, 40, batch_first=True, norm_first=True)
    with pytest.raises(ValueError, match="norm_first mismatch"):
        EncoderLayer(16, 4, 40, norm_first=False).load_from_torch(ref)
    with pytest.raises(ValueError, match="linear1 shape mismatch"):
        EncoderLayer(16, 4, 24, norm_first=True).load_from_torch(ref)


# ----------------------------------------------------------------------------- positions


@pytest.mark.numeric
def test_sinusoid_frequencies_by_hand_are_those_of_the_table_and_the_shift():
    omega = sinusoid_frequencies(8)  # (E/2,)
    by_hand = torch.tensor([10000 ** (-2 * i / 8) for i in range(4)], dtype=torch.float64)
    torch.testing.assert_close(omega, by_hand)
    pe = sinusoidal_table(5, 8)  # (P, E)
    pos = torch.arange(5, dtype=torch.float64)[:, None]  # (P, 1)
    torch.testing.assert_close(pe[:, 0::2], torch.sin(pos * by_hand).float())
    torch.testing.assert_close(pe[:, 1::2], torch.cos(pos * by_hand).float())
    m = sinusoid_shift_matrix(3, 8)  # (E, E): 2x2 rotations by 3 * omega_i
    torch.testing.assert_close(m[0::2, 0::2].diagonal(), torch.cos(3 * by_hand).float())
    torch.testing.assert_close(m[0::2, 1::2].diagonal(), torch.sin(3 * by_hand).float())
    with pytest.raises(ValueError, match="even d_model"):
        sinusoid_frequencies(7)


@pytest.mark.numeric
def test_sinusoid_shift_is_a_fixed_rotation():
    pe = sinusoidal_table(60, 16)  # (P, E)
    assert pe.shape == (60, 16) and pe.abs().max() <= 1
    for k in (1, 5, -3):
        m = sinusoid_shift_matrix(k, 16)  # (E, E)
        pos = torch.arange(max(0, -k), 60 - max(0, k))
        torch.testing.assert_close(pe[pos + k], pe[pos] @ m.T, atol=1e-5, rtol=0)
        torch.testing.assert_close(m @ m.T, torch.eye(16), atol=1e-6, rtol=0)


@pytest.mark.numeric
def test_without_positions_the_encoder_is_permutation_equivariant():
    model = make(positions="none")
    src = torch.randint(4, V_SRC, (1, 6))
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    states, _, _ = model._encode(src)
    states_perm, _, _ = model._encode(src[:, perm])
    torch.testing.assert_close(states_perm, states[:, perm], atol=ATOL, rtol=RTOL)
    for kind in ("sinusoidal", "learned"):
        model = make(positions=kind)
        states, _, _ = model._encode(src)
        assert not torch.allclose(model._encode(src[:, perm])[0], states[:, perm], atol=1e-3)


# ----------------------------------------------------------------------------- the model

VARIANTS = [
    dict(),
    dict(norm_first=False),
    dict(positions="learned", tie_embeddings=True),
    dict(num_decoder_layers=3, num_heads=2, activation="gelu"),
]
VARIANT_IDS = ["pre-LN", "post-LN", "learned-tied", "3-layers-gelu"]


@pytest.mark.numeric
@pytest.mark.parametrize("kw", VARIANTS, ids=VARIANT_IDS)
def test_incremental_steps_with_cache_equal_the_full_forward(kw):
    model = make(**kw)
    src, tgt_in = batch()
    full, attn = model(src, tgt_in, return_attention=True)  # (B, T, V), (B, T, S)
    for use_cache in (True, False):
        with model.kv_cache(use_cache):
            memory = model.encode(src)
            state = model.init_state(memory)
            logits, attns = [], []
            for t in range(tgt_in.size(1)):
                step_logits, state, step_attn = model.step(memory, state, tgt_in[:, t], t)
                logits.append(step_logits)
                attns.append(step_attn)
        torch.testing.assert_close(torch.stack(logits, 1), full, atol=ATOL, rtol=RTOL)
        torch.testing.assert_close(torch.stack(attns, 1), attn, atol=ATOL, rtol=RTOL)
    assert state["ys"].shape == tgt_in.shape  # the last loop ran without the cache


@pytest.mark.numeric
@pytest.mark.parametrize("kw", VARIANTS[:3], ids=VARIANT_IDS[:3])
@pytest.mark.parametrize("beam", [1, 3])
def test_decoding_with_cache_gives_the_same_tokens_as_without(kw, beam):
    model = make(**kw)
    src, _ = batch()
    fast = beam_search(model, src, beam=beam, max_len=12)
    with model.kv_cache(False):
        slow = beam_search(model, src, beam=beam, max_len=12)
    assert model.use_cache  # restored
    assert torch.equal(fast.tokens, slow.tokens) and torch.equal(fast.lengths, slow.lengths)
    torch.testing.assert_close(fast.scores, slow.scores, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(fast.attn, slow.attn, atol=ATOL, rtol=RTOL)


@pytest.mark.numeric
def test_beam_scores_are_sequence_logprobs():
    model = make()
    src, _ = batch()
    out = beam_search(model, src, beam=3, max_len=10)
    tgt_out = out.tokens.clone()
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt_out[:, :-1]], 1)
    tgt_in[tgt_in == EOS] = PAD
    torch.testing.assert_close(sequence_logprob(model, src, tgt_in, tgt_out), out.scores, atol=1e-4, rtol=1e-4)


@pytest.mark.numeric
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_changing_a_future_target_token_leaves_earlier_logits_unchanged(norm_first):
    model = make(norm_first=norm_first)
    src, tgt_in = batch()
    changed = tgt_in.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 4) % (V_TGT - 4) + 4  # another real token at position 4
    with torch.no_grad():
        moved = (model(src, changed) - model(src, tgt_in)).abs().amax(-1)  # (B, T)
    assert (moved[:, :4] <= 1e-6).all(), moved
    assert (moved[:, 4:] > 1e-4).all(), moved


@pytest.mark.numeric
@pytest.mark.parametrize("kw", VARIANTS[:2], ids=VARIANT_IDS[:2])
def test_padded_batch_equals_sentences_one_by_one(kw):
    model = make(**kw)
    src, tgt_in = batch()
    logits = model(src, tgt_in)
    decoded = greedy_decode(model, src, max_len=10)
    for b in range(3):
        n = int((src[b] != PAD).sum())
        alone = model(src[b : b + 1, :n], tgt_in[b : b + 1])
        torch.testing.assert_close(logits[b : b + 1], alone, atol=ATOL, rtol=RTOL)
        one = greedy_decode(model, src[b : b + 1, :n], max_len=10)
        k = int(one.lengths[0])
        assert decoded.tokens[b, :k].tolist() == one.tokens[0, :k].tolist()


def test_attention_maps_for_the_head_viewer():
    model = make(num_encoder_layers=3)
    src, tgt_in = batch()
    maps = model.attention_maps(src, tgt_in)
    assert maps["encoder"].shape == (3, 3, 4, 9, 9)
    assert maps["decoder"].shape == (3, 2, 4, 8, 8)
    assert maps["cross"].shape == (3, 2, 4, 8, 9)
    real = src != PAD  # (B, S)
    for name in ("encoder", "cross"):
        w = maps[name]
        assert (w[~real[:, None, None, None, :].expand_as(w)] == 0).all(), f"{name} attends to padding"
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert (maps["decoder"].triu(diagonal=1) == 0).all()
    _, attn = model(src, tgt_in, return_attention=True)
    torch.testing.assert_close(attn, maps["cross"][:, -1].mean(1))


def test_dropout_is_active_in_training_mode_only():
    model = make(dropout=0.3).train()
    src, tgt_in = batch()
    torch.manual_seed(0)
    a = model(src, tgt_in)
    assert not torch.allclose(a, model(src, tgt_in))
    model.eval()
    torch.testing.assert_close(model(src, tgt_in), model(src, tgt_in))


# ----------------------------------------------------------------------------- hostile inputs


def test_source_longer_than_the_positional_table_names_both_lengths():
    model = make(max_len=16)
    with pytest.raises(ValueError, match=r"20 positions.*max_len=16"):
        model(torch.randint(4, V_SRC, (2, 20)), torch.full((2, 3), BOS))
    with pytest.raises(ValueError, match=r"20 positions.*max_len=16"):
        model.encode(torch.randint(4, V_SRC, (2, 20)))
    with pytest.raises(ValueError, match=r"17 positions.*max_len=16"):
        model(torch.randint(4, V_SRC, (2, 5)), torch.full((2, 17), BOS))
    memory = model.encode(torch.randint(4, V_SRC, (2, 5)))
    state = model.init_state(memory)
    with pytest.raises(ValueError, match=r"step t=16.*17 positions.*max_len=16"):
        model.step(memory, state, torch.full((2,), BOS), 16)
    # without positions there is no table to run out of
    assert make(max_len=16, positions="none")(torch.randint(4, V_SRC, (1, 20)), torch.full((1, 3), BOS)).shape[1] == 3


def test_empty_target_and_empty_source():
    model = make()
    src, _ = batch()
    with pytest.raises(ValueError, match=r"tgt_in must have length >= 1 \(dim 1\), got shape \(3, 0\)"):
        model(src, torch.zeros(3, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"src must have length >= 1 \(dim 1\), got shape \(3, 0\)"):
        model.encode(torch.zeros(3, 0, dtype=torch.long))
    src[1] = PAD
    with pytest.raises(ValueError, match="all-padding row"):
        model(src, torch.full((3, 2), BOS))


def test_wrong_dims_and_dtypes():
    model = make()
    src, tgt_in = batch()
    with pytest.raises(ValueError, match=r"src must be \(B, S\).*\(3, 9, 1\)"):
        model(src.unsqueeze(-1), tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must be \(B, T\)"):
        model(src, tgt_in[0])
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=3, T\)"):
        model(src, tgt_in[:2])
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), tgt_in)
    memory = model.encode(src)
    state = model.init_state(memory)
    with pytest.raises(ValueError, match=r"y_prev must be \(B,\)"):
        model.step(memory, state, tgt_in[:, :1], 0)
    with pytest.raises(ValueError, match="y_prev has 2 rows"):
        model.step(memory, state, tgt_in[:2, 0], 0)


def test_token_ids_outside_the_vocabulary_are_refused():
    model = make()
    src, tgt_in = batch()
    bad_src = src.clone()
    bad_src[0, 0] = V_SRC
    with pytest.raises(ValueError, match=rf"src holds token id {V_SRC}, outside the vocabulary \[0, {V_SRC}\)"):
        model(bad_src, tgt_in)
    bad_tgt = tgt_in.clone()
    bad_tgt[1, 2] = -1
    with pytest.raises(ValueError, match=rf"tgt_in holds token id -1, outside the vocabulary \[0, {V_TGT}\)"):
        model(src, bad_tgt)
    memory = model.encode(src)
    with pytest.raises(ValueError, match=rf"y_prev holds token id {V_TGT}"):
        model.step(memory, model.init_state(memory), torch.full((3,), V_TGT), 0)


def test_a_decoder_state_from_another_batch_is_refused():
    model = make()
    src, _ = batch()
    memory = model.encode(src)  # B = 3
    other = model.init_state(model.encode(src[:2]))  # a cache for B = 2
    with pytest.raises(ValueError, match=r"cache\['k'\] must be \(B, H, S, D\) = \(3, 4, S, 8\).*another batch"):
        model.step(memory, other, torch.full((3,), BOS), 0)
    with pytest.raises(TypeError, match="memory must be the dict that encode"):
        model.step(memory["states"], other, torch.full((3,), BOS), 0)
    with pytest.raises(ValueError, match=r"state has no key/value cache for decoder layer 0"):
        model.step(memory, {}, torch.full((3,), BOS), 0)
    with pytest.raises(ValueError, match="t must be >= 0, got -1"):
        model.step(memory, model.init_state(memory), torch.full((3,), BOS), -1)


def test_tensors_on_another_device_are_refused():
    model = make()
    src, tgt_in = batch()
    with pytest.raises(ValueError, match=r"src is on meta but the model is on cpu"):
        model(src.to("meta"), tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in is on meta but the model is on cpu"):
        model(src, tgt_in.to("meta"))
    memory = model.encode(src)
    with pytest.raises(ValueError, match=r"y_prev is on meta"):
        model.step(memory, model.init_state(memory), tgt_in[:, 0].to("meta"), 0)


def test_bad_configs():
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        TransformerConfig(5, 5, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by num_kv_heads=3"):
        TransformerConfig(5, 5, num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="positions='xpos'"):
        TransformerConfig(5, 5, positions="xpos")
    with pytest.raises(ValueError, match="num_decoder_layers must be >= 1, got 0"):
        TransformerConfig(5, 5, num_decoder_layers=0)
    with pytest.raises(ValueError, match="even d_model"):
        TransformerConfig(5, 5, d_model=15, num_heads=3)
    with pytest.raises(ValueError, match="positions='absolute'"):
        PositionalEncoding("absolute", 8, 10)


# ----------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("kw", [dict(), dict(positions="learned", tie_embeddings=True, norm_first=False)])
def test_checkpoint_round_trip(tmp_path, kw):
    model = make(**kw)
    src, tgt_in = batch()
    src_vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *[f"s{i}" for i in range(V_SRC - 4)]])
    tgt_vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *[f"t{i}" for i in range(V_TGT - 4)]])
    save_checkpoint(model, tmp_path / "tiny", src_vocab=src_vocab, tgt_vocab=tgt_vocab, metrics={"bleu": 1.0})
    loaded, meta = load_checkpoint(tmp_path / "tiny")
    assert isinstance(loaded, Transformer) and loaded.config == model.config
    assert meta["kind"] == "transformer" and meta["metrics"] == {"bleu": 1.0} and meta["tgt_vocab"] == tgt_vocab
    assert "src_pos.table" not in meta["shapes"]  # the sinusoids are rebuilt, not stored
    torch.testing.assert_close(loaded(src, tgt_in), model(src, tgt_in), atol=0, rtol=0)
