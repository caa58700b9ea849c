"""GRU encoder-decoders: shapes, attention properties, padding invariance, fast path, errors."""

import pytest
import torch

from attnlab.data.vocab import BOS, PAD
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

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
    dict(attention=None, context_every_step=False),
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


def left_padded(src):
    """The same sentences with their padding moved to the front of each row."""
    out = torch.full_like(src, PAD)
    for b in range(src.size(0)):
        n = int((src[b] != PAD).sum())
        out[b, src.size(1) - n :] = src[b, :n]
    return out


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_right_padded_batch_equals_sentences_one_by_one_and_left_padding_is_refused(kw):
    """The silent wrong result this ends: a left-padded batch used to be read as padding + a
    truncated sentence and gave other logits than the sentences alone; it is now refused."""
    model = make(**kw)
    src, tgt_in = batch()
    logits = model(src, tgt_in)
    for b in range(3):
        n = int((src[b] != PAD).sum())
        alone = model(src[b : b + 1, :n], tgt_in[b : b + 1])
        torch.testing.assert_close(logits[b : b + 1], alone, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"src row 0 has padding \(id 0\) before a real token: .*right-padded"):
        model(left_padded(src), tgt_in)
    with pytest.raises(ValueError, match="src row 0 has padding"):
        model.encode(left_padded(src))


@pytest.mark.numeric
@pytest.mark.parametrize("every_step", [True, False])
def test_fused_path_equals_step_by_step_loop(every_step):
    model = make(None, context_every_step=every_step)
    src, tgt_in = batch()
    fused = model(src, tgt_in)
    memory = model.encode(src)
    state = model.init_state(memory)
    steps = []
    for t in range(tgt_in.size(1)):
        logits, state, _ = model.step(memory, state, tgt_in[:, t], t)
        steps.append(logits)
    torch.testing.assert_close(fused, torch.stack(steps, 1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("every_step", [True, False])
def test_without_context_every_step_c_only_sets_the_first_state(every_step):
    """Cho et al. (2014) feed c to every step; Sutskever et al. (2014) only start the decoder from it."""
    model = make(None, context_every_step=every_step)
    src, tgt_in = batch()
    memory = model.encode(src)
    state = model.init_state(memory)  # s_0 = tanh(W c): c's way in either way
    zeroed = dict(memory, summary=torch.zeros_like(memory["summary"]))  # c gone after s_0
    with torch.no_grad():
        logits, _, attn = model.step(memory, state, tgt_in[:, 0], 0)
        logits_zeroed, _, _ = model.step(zeroed, state, tgt_in[:, 0], 0)
    assert attn is None and torch.equal(logits, logits_zeroed) == (not every_step)
    H, V = 12, V_TGT  # without c at every step: no (H, 3H) GRU input weights for c, no (V, H) output weights
    fewer = sum(p.numel() for p in make(None).parameters()) - sum(p.numel() for p in model.parameters())
    assert fewer == (0 if every_step else 3 * H * H + V * H)


def test_context_every_step_is_the_no_attention_models_switch():
    with pytest.raises(ValueError, match="context_every_step=False is the no-attention model's switch"):
        RNNConfig(5, 5, attention="bahdanau", context_every_step=False)


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


def test_config_errors():
    with pytest.raises(ValueError, match="attention='transformer'"):
        RNNConfig(5, 5, attention="transformer")
    with pytest.raises(ValueError, match="hid_dim must be even and >= 2"):
        RNNConfig(5, 5, hid_dim=7)
    with pytest.raises(ValueError, match="Luong variant"):
        RNNConfig(5, 5, attention="bahdanau", local="m")


@pytest.mark.parametrize(
    "field, value, error, message",
    [
        ("src_vocab_size", 0, ValueError, "src_vocab_size must be >= 1, got 0"),
        ("tgt_vocab_size", -3, ValueError, "tgt_vocab_size must be >= 1, got -3"),
        ("emb_dim", 0, ValueError, "emb_dim must be >= 1, got 0"),
        ("emb_dim", 8.0, TypeError, "emb_dim must be an int, got float 8.0"),
        ("hid_dim", 0, ValueError, "hid_dim must be >= 1, got 0"),
        ("hid_dim", -4, ValueError, "hid_dim must be >= 1, got -4"),
        ("attn_dim", 0, ValueError, "attn_dim must be >= 1, got 0"),  # was silently replaced by hid_dim
        ("max_src_len", 0, ValueError, "max_src_len must be >= 1, got 0"),
        ("window", -1, ValueError, "window must be >= 0, got -1"),
        ("dropout", 1.0, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        ("input_feeding", "yes", TypeError, "input_feeding must be a bool, got str"),
        ("context_every_step", 0, TypeError, "context_every_step must be a bool, got int"),
    ],
)
def test_config_validates_every_size(field, value, error, message):
    with pytest.raises(error, match=message):
        RNNConfig(**{"src_vocab_size": 5, "tgt_vocab_size": 5, field: value})


def test_local_p_needs_a_window_of_at_least_one():
    """sigma = window / 2 would be 0 and the Gaussian 0/0 = NaN."""
    RNNConfig(5, 5, attention="luong", local="m", window=0)  # a one-word window is fine for local-m
    with pytest.raises(ValueError, match="local='p' needs window >= 1"):
        RNNConfig(5, 5, attention="luong", local="p", window=0)


def test_forward_input_errors():
    model = make("bahdanau")
    src, tgt_in = batch()
    with pytest.raises(ValueError, match=r"src must be \(B, S\) token ids, got shape \(7,\)"):
        model(src[0], tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=3, T\)"):
        model(src, tgt_in[:2])
    with pytest.raises(TypeError, match="src must hold integer token ids, got dtype torch.float32"):
        model(src.float(), tgt_in)
    with pytest.raises(TypeError, match="tgt_in must hold integer token ids, got dtype torch.bool"):
        model(src, tgt_in > 5)
    with pytest.raises(ValueError, match=rf"src holds token id {V_SRC}, outside the vocabulary \[0, {V_SRC}\)"):
        model(torch.where(src == PAD, PAD, V_SRC), tgt_in)
    with pytest.raises(ValueError, match=rf"tgt_in holds token id -1, outside the vocabulary \[0, {V_TGT}\)"):
        model(src, torch.full_like(tgt_in, -1))
    with pytest.raises(ValueError, match=r"tgt_in must have length >= 1 \(dim 1\), got shape \(3, 0\)"):
        model(src, tgt_in[:, :0])  # was an IndexError deep inside
    with pytest.raises(ValueError, match=r"src must have length >= 1 \(dim 1\), got shape \(3, 0\)"):
        model(src[:, :0], tgt_in)
    empty = src.clone()
    empty[1] = PAD
    with pytest.raises(ValueError, match="src row 1 is all padding"):
        model(empty, tgt_in)
    with pytest.raises(ValueError, match=r"teacher_forcing must be in \[0, 1\], got 1.5"):
        model(src, tgt_in, teacher_forcing=1.5)


def test_ids_on_another_device_than_the_model_are_refused():
    model = make("luong", score="dot").to("meta")
    src, tgt_in = batch()
    with pytest.raises(ValueError, match="src is on cpu but the model is on meta"):
        model.encode(src)
    with pytest.raises(ValueError, match="tgt_in is on cpu but the model is on meta"):
        model(src.to("meta"), tgt_in)


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong"])
def test_step_checks_its_inputs(attention):
    model = make(attention, **({"score": "dot"} if attention == "luong" else {}))
    src, tgt_in = batch()
    memory = model.encode(src)
    state = model.init_state(memory)
    y = tgt_in[:, 0]
    n = 2 if attention == "luong" else 1
    model.step(memory, state, y, 0)  # the right inputs pass
    with pytest.raises(ValueError, match=r"y_prev must be \(B,\) token ids, got shape \(3, 1\)"):
        model.step(memory, state, y[:, None], 0)
    with pytest.raises(ValueError, match=r"y_prev must be \(B=3,\) to match the memory, got shape \(2,\)"):
        model.step(memory, state, y[:2], 0)
    with pytest.raises(ValueError, match=rf"y_prev holds token id {V_TGT}, outside the vocabulary"):
        model.step(memory, state, torch.full_like(y, V_TGT), 0)
    with pytest.raises(TypeError, match="y_prev must hold integer token ids"):
        model.step(memory, state, y.float(), 0)
    with pytest.raises(ValueError, match="t must be >= 0, got -1"):
        model.step(memory, state, y, -1)
    with pytest.raises(ValueError, match=rf"state must be a tuple of {n} \(B, H\) tensors .*, got {n + 1} tensors"):
        model.step(memory, (*state, state[0]), y, 0)
    with pytest.raises(ValueError, match=r"state\[0\] must be \(B=3, H=12\), got \(2, 12\)"):
        model.step(memory, (state[0][:2], *state[1:]), y, 0)
    with pytest.raises(ValueError, match="state must be a tuple of .*, got Tensor"):
        model.step(memory, state[0], y, 0)


# ------------------------------------------------------------------ decoding from given states
STATE_VARIANTS = [
    dict(attention=None),
    dict(attention="bahdanau"),
    dict(attention="luong", score="dot"),
    dict(attention="bahdanau", coverage=True, prev_conv=3),
    dict(attention="luong", score="general", local="m", window=2),
]


def make_states(attention="bahdanau", H=12, **kw):
    torch.manual_seed(0)
    return Seq2SeqRNN(RNNConfig(None, V_TGT, emb_dim=8, hid_dim=H, attention=attention, source="states", **kw)).eval()


def states_batch(H=12):
    torch.manual_seed(2)
    states = torch.randn(3, 5, H)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    return states, mask


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_forward_is_decode_of_encode(kw):
    """The split changes nothing: forward(src) is decode(encode(src)), to the bit."""
    model = make(**kw)
    src, tgt_in = batch()
    logits, attn = model(src, tgt_in, return_attention=True)
    logits2, attn2 = model.decode(model.encode(src), tgt_in, return_attention=True)
    assert torch.equal(logits, logits2)
    assert (attn is None and attn2 is None) or torch.equal(attn, attn2)


def test_token_memory_and_states_memory_have_the_same_keys():
    tokens = make("bahdanau")
    src, _ = batch()
    states, mask = states_batch()
    from_states = make_states().memory_from_states(states, mask)
    assert list(tokens.encode(src)) == list(from_states) == ["states", "mask", "lengths", "summary", "prepared"]
    assert from_states["lengths"].tolist() == [5, 3, 5]
    assert list(make_states(None).memory_from_states(states)) == ["states", "mask", "lengths", "summary"]


def test_a_states_model_has_no_source_embedding_or_encoder_and_every_weight_is_used():
    model = make_states().train()
    names = {n for n, _ in model.named_parameters()}
    assert not any(n.startswith(("src_emb", "encoder")) for n in names)
    assert {n for n, _ in make("bahdanau").named_parameters()} - names == {
        n for n, _ in make("bahdanau").named_parameters() if n.startswith(("src_emb", "encoder"))
    }
    states, mask = states_batch()
    _, tgt_in = batch()
    model.decode(model.memory_from_states(states, mask), tgt_in).sum().backward()
    unused = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not unused


def test_summary_of_states_is_the_mean_over_the_mask():
    model = make_states()
    states, mask = states_batch()
    memory = model.memory_from_states(states, mask)
    torch.testing.assert_close(memory["summary"][1], states[1, :3].mean(0))
    torch.testing.assert_close(memory["summary"][0], states[0].mean(0))
    full = model.memory_from_states(states)
    assert full["mask"].all() and full["mask"].dtype == torch.bool
    torch.testing.assert_close(full["summary"], states.mean(1))


@pytest.mark.parametrize("kw", STATE_VARIANTS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_states_model_masks_and_ignores_masked_states(kw):
    model = make_states(**kw)
    states, mask = states_batch()
    _, tgt_in = batch()
    logits, attn = model.decode(model.memory_from_states(states, mask), tgt_in, return_attention=True)
    assert logits.shape == (3, 6, V_TGT)
    changed = states.clone()
    changed[1, 3:] = 100.0  # values under a False mask must not matter
    logits2, _ = model.decode(model.memory_from_states(changed, mask), tgt_in, return_attention=True)
    torch.testing.assert_close(logits, logits2)
    if kw["attention"] is not None:
        assert attn.shape == (3, 6, 5) and (attn[1, :, 3:] == 0).all()
        torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6))


def test_states_model_encode_forward_and_greedy_decoding_take_float_states():
    from attnlab.models.decoding import greedy_decode

    model = make_states()
    states, _ = states_batch()
    _, tgt_in = batch()
    memory = model.encode(states)
    assert memory["mask"].all()
    assert torch.equal(model(states, tgt_in), model.decode(model.memory_from_states(states), tgt_in))
    out = greedy_decode(model, states, max_len=5)
    assert out.tokens.shape[0] == 3 and out.attn.shape[2] == 5
    with pytest.raises(TypeError, match="src must be a floating-point tensor, got dtype torch.int64"):
        greedy_decode(model, torch.ones(3, 5, 12, dtype=torch.long))
    with pytest.raises(TypeError, match="src must be a floating-point tensor"):
        model(torch.ones(3, 5, 12, dtype=torch.long), tgt_in)
    with pytest.raises(ValueError, match=r"src must be \(B, S, H\), got shape \(3, 5\)"):
        model(torch.ones(3, 5), tgt_in)


def test_states_config_errors():
    with pytest.raises(ValueError, match="src_vocab_size must be None with source='states'.*got 5"):
        RNNConfig(5, 5, source="states")
    with pytest.raises(TypeError, match="src_vocab_size must be an int, got NoneType None"):
        RNNConfig(None, 5)
    with pytest.raises(ValueError, match="source must be one of 'tokens', 'states', got 'pixels'"):
        RNNConfig(5, 5, source="pixels")
    RNNConfig(None, 5, hid_dim=7, source="states")  # no bidirectional encoder: an odd size is fine


def test_states_and_mask_errors():
    model = make_states(H=12)
    states, mask = states_batch()
    with pytest.raises(TypeError, match="states must be a floating-point tensor"):
        model.memory_from_states(states.long())
    with pytest.raises(ValueError, match=r"states must be \(B, S, H\), got shape \(5, 12\)"):
        model.memory_from_states(states[0])
    with pytest.raises(ValueError, match=r"states must be \(B, S >= 1, H=12\), got shape \(3, 5, 8\)"):
        model.memory_from_states(states[..., :8])
    with pytest.raises(ValueError, match=r"states must be \(B, S >= 1, H=12\), got shape \(3, 0, 12\)"):
        model.memory_from_states(states[:, :0])
    with pytest.raises(TypeError, match="states has dtype torch.float64 but the model's weights are torch.float32"):
        model.memory_from_states(states.double())
    with pytest.raises(TypeError, match="mask must be a bool tensor .*got dtype torch.int64"):
        model.memory_from_states(states, mask.long())
    with pytest.raises(ValueError, match=r"mask must be \(B, S\) = \(3, 5\) .*got shape \(3, 4\)"):
        model.memory_from_states(states, mask[:, :4])
    with pytest.raises(ValueError, match=r"mask must be \(B, S\), got shape \(5,\)"):
        model.memory_from_states(states, mask[0])
    empty = mask.clone()
    empty[2] = False
    with pytest.raises(ValueError, match="mask row 2 has no True"):
        model.memory_from_states(states, empty)
    holes = mask.clone()
    holes[0, 1] = False
    model.memory_from_states(states, holes)  # soft attention takes any mask
    with pytest.raises(ValueError, match="mask row 0 has padding"):
        make_states("luong", score="general", local="m").memory_from_states(states, holes)
    with pytest.raises(ValueError, match="states is on cpu but the model is on meta"):
        make_states().to("meta").memory_from_states(states)
    with pytest.raises(TypeError, match=r"memory must be the dict of encode or memory_from_states .*got Tensor"):
        model.decode(states, batch()[1])
    with pytest.raises(TypeError, match=r"memory must be the dict .*got \['states'\]"):
        model.decode({"states": states}, batch()[1])
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=3, T\)"):
        model.decode(model.memory_from_states(states), batch()[1][:2])


# ------------------------------------------------------------------ several sources (Zoph & Knight 2016)
def sources_batch():
    """Three rows of 7 states from two sources: where each source's states lie differs per row."""
    torch.manual_seed(3)
    states = torch.randn(3, 7, 12)
    segments = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1, 0, 1, 0, 1, 0, 0], [0, 1, 1, 1, 1, 1, 1]])
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False  # row 1 keeps sources 0 at {1, 3} and 1 at {0, 2, 4}
    mask[2, 4] = False
    return states, mask, segments


@pytest.mark.parametrize("attention", ["bahdanau", "luong"])
def test_each_source_gets_its_own_distribution(attention):
    model = make_states(attention, sources=2, score="general" if attention == "luong" else "concat")
    states, mask, segments = sources_batch()
    _, tgt_in = batch()
    memory = model.memory_from_states(states, mask, segments=segments)
    assert list(memory) == ["states", "mask", "lengths", "summary", "prepared", "segments"]
    with torch.no_grad():
        logits, attn = model.decode(memory, tgt_in, return_attention=True)
    assert logits.shape == (3, 6, V_TGT) and attn.shape == (3, 6, 7)
    assert float(attn[~mask.unsqueeze(1).expand_as(attn)].abs().sum()) == 0.0  # masked states get nothing
    for k in range(2):
        block = (segments == k).unsqueeze(1).to(attn.dtype)  # (B, 1, S)
        torch.testing.assert_close((attn * block).sum(-1), torch.ones(3, 6))
    torch.testing.assert_close(attn.sum(-1), torch.full((3, 6), 2.0))


def test_two_sources_match_two_separate_softmaxes_written_out():
    """Step 0 of a Bahdanau decoder over two sources, computed by hand from the model's weights."""
    model = make_states("bahdanau", sources=2)
    states, mask, segments = sources_batch()
    memory = model.memory_from_states(states, mask, segments=segments)
    y = torch.full((3,), BOS)
    logits, _, attn = model.step(memory, model.init_state(memory), y, 0)
    with torch.no_grad():
        s0 = torch.tanh(model.bridge(memory["summary"]))  # (B, H)
        scores = model.score(s0, states, memory["prepared"])  # (B, S)
        for b in range(3):
            contexts = []
            for k in range(2):
                idx = [j for j in range(7) if mask[b, j] and segments[b, j] == k]
                w = torch.softmax(scores[b, idx], dim=0)  # this source's positions only
                torch.testing.assert_close(attn[b, idx], w)
                contexts.append((w.unsqueeze(1) * states[b, idx]).sum(0))
            context = torch.tanh(model.source_combine(torch.cat(contexts)))  # (H,)
            emb = model.tgt_emb(y[b : b + 1])[0]
            s1 = model._cell(torch.cat([emb, context]).unsqueeze(0), s0[b : b + 1])[0]
            want = model.out(torch.cat([s1, context, emb]))
            torch.testing.assert_close(logits[b], want)


def test_two_sources_train_every_weight_and_one_source_adds_none():
    model = make_states("bahdanau", sources=2).train()
    states, mask, segments = sources_batch()
    _, tgt_in = batch()
    model.decode(model.memory_from_states(states, mask, segments=segments), tgt_in).sum().backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    one = {n for n, _ in make_states("bahdanau").named_parameters()}
    assert {n for n, _ in model.named_parameters()} - one == {"source_combine.weight", "source_combine.bias"}
    assert not any(n.startswith("source_combine") for n in one)


def test_a_given_summary_replaces_the_mean():
    model = make_states("bahdanau", sources=2)
    states, mask, segments = sources_batch()
    summary = torch.randn(3, 12)
    memory = model.memory_from_states(states, mask, segments=segments, summary=summary)
    assert memory["summary"] is summary
    torch.testing.assert_close(model.init_state(memory)[0], torch.tanh(model.bridge(summary)))
    single = make_states("bahdanau")
    s_states, s_mask = states_batch()
    assert single.memory_from_states(s_states, s_mask, summary=summary)["summary"] is summary


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(sources=0), "sources must be >= 1"),
        (dict(sources=2.0), "sources must be an int"),
        (dict(sources=2, source="tokens"), "sources=2 needs source='states'"),
        (dict(sources=2, attention=None), "sources=2 combines plain soft attentions"),
        (dict(sources=2, coverage=True), "sources=2 combines plain soft attentions.*coverage=True"),
        (dict(sources=2, hard="gumbel"), "sources=2 combines plain soft attentions.*hard='gumbel'"),
        (dict(sources=3, prev_conv=3), "sources=3 combines plain soft attentions"),
        (dict(sources=2, monotonic=True), "sources=2 combines plain soft attentions"),
        (dict(sources=2, attention="luong", score="general", local="m"), "sources=2 combines plain soft"),
    ],
)
def test_multi_source_config_errors(kw, match):
    base = dict(src_vocab_size=None, tgt_vocab_size=5, attention="bahdanau", source="states")
    if kw.get("source") == "tokens":
        base["src_vocab_size"] = 5
    with pytest.raises((ValueError, TypeError), match=match):
        RNNConfig(**{**base, **kw})


def test_segments_and_summary_errors():
    model = make_states("bahdanau", sources=2)
    states, mask, segments = sources_batch()
    with pytest.raises(ValueError, match=r"sources=2: memory_from_states needs segments"):
        model.memory_from_states(states, mask)
    with pytest.raises(ValueError, match="segments is for a model of several sources; this one has sources=1"):
        make_states("bahdanau").memory_from_states(states, mask, segments=segments)
    with pytest.raises(TypeError, match=r"segments must hold integer source indices in \[0, 2\), got dtype"):
        model.memory_from_states(states, mask, segments=segments.float())
    with pytest.raises(TypeError, match="segments must hold integer source indices"):
        model.memory_from_states(states, mask, segments=segments.bool())
    with pytest.raises(ValueError, match=r"segments must be \(B, S\), got shape \(7,\)"):
        model.memory_from_states(states, mask, segments=segments[0])
    with pytest.raises(ValueError, match=r"segments must be \(B, S\) = \(3, 7\) on cpu .*got shape \(3, 6\)"):
        model.memory_from_states(states, mask, segments=segments[:, :6])
    with pytest.raises(ValueError, match=r"segments must be \(B, S\) = \(3, 7\) on cpu .*on meta"):
        model.memory_from_states(states, mask, segments=segments.to("meta"))
    with pytest.raises(ValueError, match=r"segments holds source index 2, outside \[0, sources=2\)"):
        model.memory_from_states(states, mask, segments=segments + 1)
    with pytest.raises(ValueError, match=r"segments holds source index -1"):
        model.memory_from_states(states, mask, segments=segments - 1)
    hidden = mask.clone()
    hidden[1, [0, 2, 4]] = False  # row 1 keeps no state of source 1
    with pytest.raises(ValueError, match="segments row 1 has no True mask position of source 1"):
        model.memory_from_states(states, hidden, segments=segments)
    no_first = segments.clone()
    no_first[2, 0] = 1  # row 2 is all source 1
    with pytest.raises(ValueError, match="segments row 2 has no True mask position of source 0"):
        model.memory_from_states(states, mask, segments=no_first)
    with pytest.raises(ValueError, match=r"summary must be \(B, H\) = \(3, 12\) on cpu .*got shape \(3, 11\)"):
        model.memory_from_states(states, mask, segments=segments, summary=torch.zeros(3, 11))
    with pytest.raises(ValueError, match=r"summary must be \(B, H\), got shape \(12,\)"):
        model.memory_from_states(states, mask, segments=segments, summary=torch.zeros(12))
    with pytest.raises(TypeError, match="summary must be a floating-point tensor"):
        model.memory_from_states(states, mask, segments=segments, summary=torch.zeros(3, 12, dtype=torch.long))
    with pytest.raises(TypeError, match="summary has dtype torch.float64 but the states are torch.float32"):
        model.memory_from_states(states, mask, segments=segments, summary=torch.zeros(3, 12, dtype=torch.float64))
    memory = model.memory_from_states(states, mask, segments=segments)
    _, tgt_in = batch()
    del memory["segments"]
    with pytest.raises(TypeError, match=r"memory must be the dict .*'segments'\]"):
        model.decode(memory, tgt_in)
    with pytest.raises(TypeError, match=r"memory must be the dict .*'segments'\]"):
        model.step(memory, model.init_state(memory), tgt_in[:, 0], 0)
    with pytest.raises(ValueError, match="a bare src tensor does not say which source"):
        model.encode(states)
    with pytest.raises(ValueError, match="a bare src tensor does not say which source"):
        model.check_source(states)
