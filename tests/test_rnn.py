"""GRU encoder-decoders: shapes, attention properties, padding invariance, fast path, errors."""

import pytest
import torch

from attnlab.data import BOS, PAD
from attnlab.rnn import RNNConfig, Seq2SeqRNN

V_SRC, V_TGT = 20, 23


def make(attention=None, **kw):
    torch.manual_seed(0)
    return Seq2SeqRNN(RNNConfig(V_SRC, V_TGT, emb_dim=8, hid_dim=12, attention=attention, **kw)).eval()


def batch():
    torch.manual_seed(1)
    src = torch.randint(4, V_SRC, (3, 7))
    src[0, 5:] = PAD
    src[2, 3:] = PAD
    tgt_in = torch.randint(4, V_TGT, (3, 6))
    tgt_in[:, 0] = BOS
    return src, tgt_in


VARIANTS = [
    dict(attention=None),
    dict(attention="bahdanau"),
    dict(attention="luong", score="dot"),
    dict(attention="luong", score="general", input_feeding=False),
    dict(attention="luong", score="concat"),
    dict(attention="luong", score="scaled_dot"),
    dict(attention="luong", score="location", max_src_len=16),
    dict(attention="luong", score="general", local="m", window=2),
    dict(attention="luong", score="general", local="p", window=2),
]


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_shapes_and_attention_is_a_distribution_over_real_tokens(kw):
    model = make(**kw)
    src, tgt_in = batch()
    logits, attn = model(src, tgt_in, return_attention=True)
    assert logits.shape == (3, 6, V_TGT)
    if kw["attention"] is None:
        assert attn is None
        return
    assert attn.shape == (3, 6, 7)
    assert (attn[src.unsqueeze(1).expand_as(attn) == PAD] == 0).all(), "padding got attention"
    if kw.get("local") != "p":  # local-p multiplies by a Gaussian: no longer sums to 1
        torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6))


@pytest.mark.parametrize("kw", VARIANTS[:3], ids=["none", "bahdanau", "luong"])
def test_padded_batch_equals_sentences_one_by_one(kw):
    model = make(**kw)
    src, tgt_in = batch()
    logits = model(src, tgt_in)
    for b in range(3):
        n = int((src[b] != PAD).sum())
        alone = model(src[b : b + 1, :n], tgt_in[b : b + 1])
        torch.testing.assert_close(logits[b : b + 1], alone, atol=1e-5, rtol=1e-5)


def test_fused_path_equals_step_by_step_loop():
    model = make(None)
    src, tgt_in = batch()
    fused = model(src, tgt_in)
    memory = model.encode(src)
    state = model.init_state(memory)
    steps = []
    for t in range(tgt_in.size(1)):
        logits, state, _ = model.step(memory, state, tgt_in[:, t], t)
        steps.append(logits)
    torch.testing.assert_close(fused, torch.stack(steps, 1), atol=1e-5, rtol=1e-5)


def test_bahdanau_scores_from_previous_state_luong_from_current():
    """Bahdanau's first attention depends only on s_0 (no target token seen yet); Luong's first
    attention already depends on the first input token."""
    src, tgt_in = batch()
    other = tgt_in.clone()
    other[:, 0] = 5  # change the first decoder input
    b = make("bahdanau")
    torch.testing.assert_close(
        b(src, tgt_in, return_attention=True)[1][:, 0], b(src, other, return_attention=True)[1][:, 0]
    )
    lu = make("luong", score="general")
    assert not torch.allclose(
        lu(src, tgt_in, return_attention=True)[1][:, 0], lu(src, other, return_attention=True)[1][:, 0]
    )


def test_teacher_forcing_off_changes_inputs_but_not_shapes():
    model = make("bahdanau")
    src, tgt_in = batch()
    torch.manual_seed(0)
    free = model(src, tgt_in, teacher_forcing=0.0)
    assert free.shape == (3, 6, V_TGT)
    assert not torch.allclose(free, model(src, tgt_in))


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="attention='transformer'"):
        RNNConfig(5, 5, attention="transformer")
    with pytest.raises(ValueError, match="hid_dim must be even"):
        RNNConfig(5, 5, hid_dim=7)
    with pytest.raises(ValueError, match="Luong variant"):
        RNNConfig(5, 5, attention="bahdanau", local="m")
    model = make("bahdanau")
    src, tgt_in = batch()
    with pytest.raises(ValueError, match=r"src must be \(B, S\)"):
        model(src[0], tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=3, T\)"):
        model(src, tgt_in[:2])
    empty = src.clone()
    empty[1] = PAD
    with pytest.raises(ValueError, match="all-padding row"):
        model(empty, tgt_in)
