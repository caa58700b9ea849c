"""The decoder-only model of lesson 11: masks, attention equal to PyTorch's, no leakage, cache = full forward, errors."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab.core.masks import causal_mask, to_nn_mha_mask
from attnlab.data.vocab import BOS, PAD, Vocab
from attnlab.models.decoder_only import DecoderOnly, DecoderOnlyConfig, DecoderOnlyLayer, lm_mask, window_mask
from attnlab.models.decoding import greedy_decode
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint
from attnlab.training.families import family_of

V_SRC, V_TGT = 20, 23
ATOL = RTOL = 1e-5
MASKS = pytest.mark.parametrize("mask", ["causal", "prefix"])


def make(**kw):
    torch.manual_seed(0)
    cfg = dict(d_model=32, num_heads=4, num_layers=2, dim_feedforward=48, max_len=40)
    return DecoderOnly(DecoderOnlyConfig(V_SRC, V_TGT, **{**cfg, **kw})).eval()


def batch():
    torch.manual_seed(1)
    src = torch.randint(4, V_SRC, (3, 9))
    src[0, 7:] = PAD
    src[2, 3:] = PAD
    tgt_in = torch.randint(4, V_TGT, (3, 8))
    tgt_in[:, 0] = BOS
    return src, tgt_in


# ----------------------------------------------------------------------------- the two masks


def test_lm_masks_drawn():
    is_src = torch.tensor([True, True, True, False, False])  # x1 x2 <eos> | <sep> y1
    causal = lm_mask(is_src, "causal")
    prefix = lm_mask(is_src, "prefix")
    assert torch.equal(causal, causal_mask(5))
    expected = torch.tensor(
        [
            [1, 1, 1, 0, 0],  # the source sees the whole source ...
            [1, 1, 1, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 1, 1, 1, 0],  # ... the target the source and its own past
            [1, 1, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(prefix, expected)
    assert torch.equal(prefix[3:], causal[3:])  # the target rows are the same in both


def test_lm_mask_errors():
    with pytest.raises(ValueError, match="kind"):
        lm_mask(torch.tensor([True, False]), "bidirectional")
    with pytest.raises(TypeError, match="is_source"):
        lm_mask(torch.tensor([1, 0]), "causal")


def test_window_mask_keeps_the_sinks():
    pos = torch.arange(6)[None]  # (1, 6)
    w = window_mask(pos, pos, window=2, sinks=1)[0] & causal_mask(6)
    assert w[5].tolist() == [True, False, False, False, True, True]
    assert window_mask(pos, pos, window=2)[0, 5, 0].item() is False


# ----------------------------------------------------------------------------- equal to PyTorch


@pytest.mark.numeric
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_layer_equals_nn_encoder_layer_with_causal_mask(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(16, 4, 40, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderOnlyLayer(16, 4, 40, norm_first=norm_first).load_from_torch(ref).eval()
    x = torch.randn(3, 7, 16)
    expected = ref(x, src_mask=to_nn_mha_mask(causal_mask(7)), is_causal=True)
    for need_weights in (False, True):
        got, _ = ours(x, keep=causal_mask(7), need_weights=need_weights)
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=RTOL)


@pytest.mark.numeric
def test_causal_attention_equals_sdpa():
    """The model's own causal self-attention, weights path and fused path, against F.scaled_dot_product_attention."""
    model = make()
    src, tgt_in = batch()
    src = src[:1, :7]  # one unpadded row: then the model's mask is exactly the causal one
    x, keep, is_src, pos = model._sequence(src, tgt_in[:1])
    layer = model.layers[0]
    h = layer.norm1(x)  # pre-LN: attention reads the normalised input
    attn = layer.self_attn
    q, k, v = attn._project(h, h, h)  # (1, H, L, D) each
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (1, H, L, D)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(1, x.shape[1], -1))  # (1, L, E)
    mask = model._mask(keep, is_src, pos, x.shape[1])
    for need_weights in (False, True):
        got, _ = attn(h, h, h, attn_keep=mask, need_weights=need_weights)
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=RTOL)


# ----------------------------------------------------------------------------- no future leakage


@settings(max_examples=25, deadline=None)
@given(
    cut=st.integers(min_value=1, max_value=7),
    new=st.lists(st.integers(min_value=4, max_value=V_TGT - 1), min_size=1, max_size=7),
    mask=st.sampled_from(["causal", "prefix"]),
)
def test_no_future_leakage(cut, new, mask):
    """Changing target tokens from position ``cut`` on leaves the logits of positions before ``cut`` unchanged."""
    model = make(mask=mask)
    src, tgt_in = batch()
    changed = tgt_in.clone()
    n = min(len(new), tgt_in.shape[1] - cut)
    changed[:, cut : cut + n] = torch.tensor(new[:n])
    with torch.no_grad():
        a, b = model(src, tgt_in), model(src, changed)
    torch.testing.assert_close(a[:, :cut], b[:, :cut], atol=1e-5, rtol=1e-5)


@MASKS
def test_source_never_sees_the_target(mask):
    """Source positions never attend to target positions, in either mask."""
    model = make(mask=mask)
    src, tgt_in = batch()
    full = model.attention_maps(src, tgt_in)["self"]  # (B, N, H, L, L)
    S = src.shape[1]
    assert full[:, :, :, :S, S:].abs().max() == 0


def test_prefix_source_reads_both_ways():
    model = make(mask="prefix")
    src, tgt_in = batch()
    maps = model.attention_maps(src, tgt_in)["self"]  # (B, N, H, L, L)
    assert maps[1, 0, 0, 0, 1:9].sum() > 0  # the first source token looks ahead inside the source
    assert make(mask="causal").attention_maps(src, tgt_in)["self"][1, 0, 0, 0, 1:].sum() == 0


# ----------------------------------------------------------------------------- cache = full forward


@pytest.mark.numeric
@MASKS
def test_cached_steps_equal_full_forward(mask):
    model = make(mask=mask)
    src, tgt_in = batch()
    with torch.no_grad():
        logits, attn = model(src, tgt_in, return_attention=True)
        memory = model.encode(src)
        state = model.init_state(memory)
        steps, attns = [], []
        for t in range(tgt_in.shape[1]):
            lg, state, a = model.step(memory, state, tgt_in[:, t], t)
            steps.append(lg)
            attns.append(a)
    torch.testing.assert_close(torch.stack(steps, 1), logits, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(torch.stack(attns, 1), attn, atol=ATOL, rtol=RTOL)


@MASKS
def test_greedy_same_with_and_without_cache(mask):
    model = make(mask=mask)
    src, _ = batch()
    fast = greedy_decode(model, src, max_len=12)
    with model.kv_cache(False):
        slow = greedy_decode(model, src, max_len=12)
    assert torch.equal(fast.tokens, slow.tokens)


@pytest.mark.numeric
def test_a_sentence_alone_equals_it_in_a_padded_batch():
    model = make()
    src, tgt_in = batch()
    with torch.no_grad():
        together = model(src, tgt_in)
        alone = model(src[2:, :3], tgt_in[2:])
    torch.testing.assert_close(alone, together[2:], atol=ATOL, rtol=RTOL)


@MASKS
def test_window_changes_nothing_when_it_covers_everything(mask):
    model = make(mask=mask)
    src, tgt_in = batch()
    with torch.no_grad():
        full = model(src, tgt_in)
        with model.attention_window(64):
            same = model(src, tgt_in)
        with model.attention_window(3):
            narrow = model(src, tgt_in)
    torch.testing.assert_close(same, full)
    assert not torch.allclose(narrow, full)


def test_checkpoint_round_trip(tmp_path):
    model = make(mask="prefix")
    assert family_of(model).name == "decoder_only"
    src, tgt_in = batch()
    src_vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *[f"s{i}" for i in range(V_SRC - 4)]])
    tgt_vocab = Vocab(["<pad>", "<bos>", "<eos>", "<unk>", *[f"t{i}" for i in range(V_TGT - 4)]])
    save_checkpoint(model, tmp_path / "m", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    back, meta = load_checkpoint(tmp_path / "m")
    assert back.config == model.config and meta["kind"] == "decoder_only"
    with torch.no_grad():
        torch.testing.assert_close(back.eval()(src, tgt_in), model(src, tgt_in))


# ----------------------------------------------------------------------------- errors


def test_sequence_longer_than_the_context():
    model = make(max_len=12)
    src, tgt_in = batch()
    with pytest.raises(ValueError, match="context is max_len=12"):
        model(src, tgt_in)
    memory = model.encode(src[:, :5])
    state = model.init_state(memory)
    with pytest.raises(ValueError, match="max_len=12"):
        for t in range(20):
            _, state, _ = model.step(memory, state, tgt_in[:, 0], t)


def test_bad_inputs():
    model = make()
    src, tgt_in = batch()
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, tgt_in[:2])
    with pytest.raises(ValueError, match="all-padding"):
        model(torch.zeros(1, 3, dtype=torch.long), tgt_in[:1])
    with pytest.raises(ValueError, match="mask"):
        DecoderOnlyConfig(V_SRC, V_TGT, mask="bidirectional")
    with pytest.raises(ValueError, match="positions"):
        DecoderOnlyConfig(V_SRC, V_TGT, positions="rope")
    with pytest.raises(ValueError, match="window"):
        with model.attention_window(0):
            pass
