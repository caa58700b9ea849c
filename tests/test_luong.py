"""Luong attention inside the model: one step by hand, input feeding, local-m/local-p windows,
the location score, and the lesson-03 presets (the score functions alone: ``test_scores.py``)."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.data.vocab import BOS, PAD
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.training import experiments

V_SRC, V_TGT, E, H = 20, 23, 8, 12
LUONG_PRESETS = [n for n in experiments.EXPERIMENTS if n.startswith("luong_")]


def make(**kw):
    torch.manual_seed(0)
    return Seq2SeqRNN(RNNConfig(V_SRC, V_TGT, emb_dim=E, hid_dim=H, attention="luong", **kw)).eval()


def batch(T=9):
    """Three sources of lengths 5, 7, 3 (padded to 7) and T >= 7 decoder inputs."""
    torch.manual_seed(1)
    src = torch.randint(4, V_SRC, (3, 7))
    src[0, 5:] = PAD
    src[2, 3:] = PAD
    tgt_in = torch.randint(4, V_TGT, (3, T))
    tgt_in[:, 0] = BOS
    return src, tgt_in


def gru_by_hand(x, h, gru):
    """PyTorch's GRU equations written out (gate order r, z, n)."""
    W_ir, W_iz, W_in = gru.weight_ih_l0.chunk(3)
    W_hr, W_hz, W_hn = gru.weight_hh_l0.chunk(3)
    b_ir, b_iz, b_in = gru.bias_ih_l0.chunk(3)
    b_hr, b_hz, b_hn = gru.bias_hh_l0.chunk(3)
    r = torch.sigmoid(x @ W_ir.T + b_ir + h @ W_hr.T + b_hr)
    z = torch.sigmoid(x @ W_iz.T + b_iz + h @ W_hz.T + b_hz)
    n = torch.tanh(x @ W_in.T + b_in + r * (h @ W_hn.T + b_hn))
    return (1 - z) * n + z * h


@torch.no_grad()
def test_two_luong_steps_by_hand():
    """h_t = GRU([E y; h~_{t-1}], h_{t-1}); a_t = softmax(h_t^T W h_j); c_t = sum a h_j;
    h~_t = tanh(W_c [c_t; h_t]); logits = W_s h~_t."""
    model = make(score="general")
    src, tgt_in = batch()
    memory = model.encode(src)
    hs, mask = memory["states"], memory["mask"]  # (B, S, H), (B, S)
    h = torch.tanh(model.bridge(memory["summary"]))  # h_0
    feed = torch.zeros_like(h)  # h~_0 = 0
    state = model.init_state(memory)
    for t in range(2):
        x = torch.cat([model.tgt_emb(tgt_in[:, t]), feed], dim=-1)
        h = gru_by_hand(x, h, model.decoder)
        scores = torch.einsum("bq,qk,bsk->bs", h, model.score.W.weight, hs).masked_fill(~mask, -math.inf)
        alpha = torch.softmax(scores, dim=-1)
        c = torch.einsum("bs,bsk->bk", alpha, hs)
        feed = torch.tanh(torch.cat([c, h], dim=-1) @ model.W_c.weight.T)
        logits = model.out(feed)
        got, state, attn = model.step(memory, state, tgt_in[:, t], t)
        torch.testing.assert_close(attn, alpha)
        torch.testing.assert_close(state[0], h)
        torch.testing.assert_close(state[1], feed)
        torch.testing.assert_close(got, logits)


@torch.no_grad()
def test_input_feeding_on_and_off():
    src, tgt_in = batch()
    on, off = make(score="dot"), make(score="dot", input_feeding=False)
    assert on.decoder.input_size == E + H and off.decoder.input_size == E
    for model, matters in ((on, True), (off, False)):
        memory = model.encode(src)
        h0, _ = model.init_state(memory)
        y = tgt_in[:, 1]
        a = model.step(memory, (h0, torch.zeros_like(h0)), y, 1)[0]
        b = model.step(memory, (h0, torch.randn_like(h0)), y, 1)[0]
        assert (not torch.allclose(a, b)) == matters  # h~_{t-1} reaches step t only with feeding
    # and the full forward pass of the fed model differs from the unfed one in shape of the input only
    assert on(src, tgt_in).shape == off(src, tgt_in).shape == (3, tgt_in.size(1), V_TGT)


@torch.no_grad()
@pytest.mark.parametrize("D", [0, 1, 2])
def test_local_m_weights_live_in_the_window_around_t(D):
    model = make(score="general", local="m", window=D)
    src, tgt_in = batch(T=9)  # T > S: the centre must stop at the last source token
    _, attn = model(src, tgt_in, return_attention=True)  # (B, T, S)
    lengths = (src != PAD).sum(1)
    for b in range(3):
        for t in range(tgt_in.size(1)):
            centre = min(t, int(lengths[b]) - 1)
            allowed = [j for j in range(7) if abs(j - centre) <= D and j < lengths[b]]
            outside = [j for j in range(7) if j not in allowed]
            assert (attn[b, t, outside] == 0).all(), (b, t, attn[b, t])
            assert attn[b, t, allowed].sum().item() == pytest.approx(1.0, abs=1e-6)
    if D == 0:  # a window of one word is hard, monotonic attention: one-hot on min(t, len-1)
        assert ((attn == 0) | (attn == 1)).all()


@torch.no_grad()
def test_local_p_window_and_gaussian_by_hand():
    D = 2
    model = make(score="general", local="p", window=D)
    src, tgt_in = batch()
    memory = model.encode(src)
    state = model.init_state(memory)
    S = src.size(1)
    pos = torch.arange(S, dtype=torch.float32)
    for t in range(3):
        _, state, attn = model.step(memory, state, tgt_in[:, t], t)
        h_t = state[0]
        # p_t = (S_x - 1) * sigmoid(v_p^T tanh(W_p h_t)), recomputed from the weights
        frac = torch.sigmoid(torch.tanh(h_t @ model.position.W_p.weight.T) @ model.position.v_p.weight.T)[:, 0]
        p_t = frac * (memory["lengths"].float() - 1)
        inside = ((pos[None] - p_t[:, None]).abs() <= D) & memory["mask"]  # (B, S)
        assert (attn[~inside] == 0).all(), "weight outside [p_t - D, p_t + D]"
        scores = torch.einsum("bq,qk,bsk->bs", h_t, model.score.W.weight, memory["states"])
        align = torch.softmax(scores.masked_fill(~inside, -math.inf), dim=-1)
        gauss = torch.exp(-((pos[None] - p_t[:, None]) ** 2) / (2 * (D / 2) ** 2))  # sigma = D / 2
        torch.testing.assert_close(attn, align * gauss)
        assert (attn.sum(-1) <= 1 + 1e-6).all()


@torch.no_grad()
def test_location_score_in_the_model():
    model = make(score="location", max_src_len=8)
    src, tgt_in = batch()
    memory = model.encode(src)
    state = model.init_state(memory)
    _, _, attn = model.step(memory, state, tgt_in[:, 0], 0)
    h_1 = model._cell(torch.cat([model.tgt_emb(tgt_in[:, 0]), state[1]], -1), state[0])
    expected = torch.softmax(
        (h_1 @ model.score.W.weight.T + model.score.W.bias)[:, :7].masked_fill(src == PAD, -math.inf), -1
    )
    torch.testing.assert_close(attn, expected)  # softmax(W_a h_t), cut to the source, padding masked
    too_long = torch.randint(4, V_SRC, (1, 9))
    with pytest.raises(ValueError, match="max_len=8, got S=9"):
        model(too_long, tgt_in[:1])


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_luong_presets_share_bahdanaus_training_settings(profile):
    expected = {"luong_dot", "luong_general", "luong_concat", "luong_scaled_dot", "luong_location"}
    assert expected | {"luong_local_m", "luong_local_p"} <= set(LUONG_PRESETS)
    ref = experiments.preset("bahdanau", profile)
    for name in LUONG_PRESETS:
        exp = experiments.preset(name, profile)
        for field in ("seconds", "bs", "lr", "wd", "label_smoothing", "family"):
            assert getattr(exp, field) == getattr(ref, field), (name, field)
        for size in ("emb_dim", "hid_dim", "attn_dim"):
            assert exp.model[size] == ref.model[size]
        assert exp.model["attention"] == "luong"
        RNNConfig(10, 10, **exp.model)  # every preset builds a valid config
    assert experiments.preset("luong_local_p", profile).model["score"] == "general"
