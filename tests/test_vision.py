"""Image models: patches, region encoders, the captioner on the decoding protocol, the ViT, rollout,
the CNN baseline, and their checkpoints. Random tensors only (the scene generator is tested apart)."""

import math

import pytest
import torch

from attnlab.data.vocab import BOS, EOS, PAD, Vocab
from attnlab.models.decoding import beam_search, beam_steps, greedy_decode, sequence_logprob
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.models.vision import (
    Captioner,
    CaptionerConfig,
    CNNClassifier,
    CNNConfig,
    ConvEncoder,
    PatchEncoder,
    ViT,
    ViTConfig,
    attention_rollout,
    doubly_stochastic_loss,
    patchify,
    unpatchify,
)
from attnlab.training import families as models
from attnlab.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, vocab_sides

V = 14
SMALL_CAP = dict(image_size=24, grid=4, width=8, emb_dim=8, hid_dim=16)
SMALL_VIT = dict(image_size=24, patch=6, d_model=16, num_heads=2, num_layers=2, dim_feedforward=32)


def images(B=3, size=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(B, 3, size, size, generator=g)  # (B, C, H, W)


def captions(B=3, T=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, V, (B, T), generator=g)  # (B, T)
    tgt[:, 0] = BOS
    tgt[0, 3:] = PAD
    return tgt


def captioner(**kw):
    torch.manual_seed(0)
    return Captioner(CaptionerConfig(V, **{**SMALL_CAP, **kw})).eval()


def vit(**kw):
    torch.manual_seed(0)
    return ViT(ViTConfig(5, **{**SMALL_VIT, **kw})).eval()


# ------------------------------------------------------------------ patches
@pytest.mark.parametrize("patch, size", [(1, (4, 6)), (2, (4, 6)), (4, 8), (8, 24)])
def test_patchify_round_trip_and_patch_order(patch, size):
    H, W = (size, size) if isinstance(size, int) else size
    x = torch.rand(2, 3, H, W)
    p = patchify(x, patch)
    n_cols = W // patch
    assert p.shape == (2, (H // patch) * n_cols, 3 * patch * patch)
    assert torch.equal(unpatchify(p, patch, size), x)
    n = p.shape[1] - 1  # the last patch: grid row n // n_cols, column n % n_cols, channel-major pixels
    r, c = divmod(n, n_cols)
    assert torch.equal(p[:, n], x[:, :, r * patch : (r + 1) * patch, c * patch : (c + 1) * patch].reshape(2, -1))


def test_patch_errors():
    x = torch.rand(2, 3, 10, 10)
    with pytest.raises(ValueError, match="image size 10x10 is not divisible by patch=4"):
        patchify(x, 4)
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        patchify((x * 255).to(torch.uint8), 5)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\), got shape \(3, 10, 10\)"):
        patchify(x[0], 5)
    with pytest.raises(ValueError, match="patch must be >= 1, got 0"):
        patchify(x, 0)
    p = patchify(x, 5)  # (2, 4, 75)
    with pytest.raises(ValueError, match=r"patches must be \(B, N=4, C\*5\*5\) for 10x10 images, got shape \(2, 3, 75\)"):
        unpatchify(p[:, :3], 5, 10)
    with pytest.raises(ValueError, match=r"patches must be \(B, N=4, C\*5\*5\)"):
        unpatchify(p[..., :70], 5, 10)
    with pytest.raises(ValueError, match="image size 10x12 is not divisible by patch=5"):
        unpatchify(p, 5, (10, 12))
    with pytest.raises(ValueError, match=r"image_size must be an int or a pair \(H, W\)"):
        unpatchify(p, 5, (10, 10, 3))


# ------------------------------------------------------------------ region encoders
@pytest.mark.parametrize("grid", [1, 3, 4, 6, 8, 24])
def test_conv_encoder_gives_one_feature_per_grid_cell(grid):
    enc = ConvEncoder(3, 4, grid, image_size=24, out_dim=5).eval()
    assert enc(images()).shape == (3, grid * grid, 5)


def test_conv_regions_are_row_major_squares_of_the_image():
    """Changing the top-left corner's pixels changes region 0 and leaves the far corner region alone
    (eval mode: BatchNorm does not mix the batch; the receptive field is 31 pixels)."""
    torch.manual_seed(0)
    enc = ConvEncoder(3, 8, 6, image_size=48).eval()
    x = images(1, 48)
    y = x.clone()
    y[:, :, :8, :8] = 1.0 - y[:, :, :8, :8]
    a, b = enc(x), enc(y)  # (1, 36, D)
    assert not torch.allclose(a[:, 0], b[:, 0])
    assert torch.equal(a[:, 35], b[:, 35])


def test_positions_tell_identical_regions_apart():
    flat = torch.full((1, 3, 24, 24), 0.5)
    torch.manual_seed(0)
    plain = ConvEncoder(3, 4, 4, image_size=24, positions=False).eval()(flat)  # (1, 16, 4)
    torch.testing.assert_close(plain[0, 5], plain[0, 6])  # two interior regions, same content
    torch.manual_seed(0)
    placed = ConvEncoder(3, 4, 4, image_size=24).eval()(flat)
    assert not torch.allclose(placed[0, 5], placed[0, 6])
    patches = PatchEncoder(3, 6, 24, 7)(flat)
    assert patches.shape == (1, 16, 7) and not torch.allclose(patches[0, 5], patches[0, 6])


def test_encoder_errors():
    with pytest.raises(ValueError, match="grid=5 must divide image_size=24"):
        ConvEncoder(3, 4, 5, image_size=24)
    with pytest.raises(ValueError, match="image size 24x24 is not divisible by patch=5"):
        PatchEncoder(3, 5, 24, 8)
    with pytest.raises(TypeError, match="positions must be a bool"):
        ConvEncoder(3, 4, 4, image_size=24, positions=1)
    enc = ConvEncoder(3, 4, 4, image_size=24)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\), got \(3, 3, 12, 12\)"):
        enc(images(size=12))
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\), got \(3, 1, 24, 24\)"):
        enc(images()[:, :1])
    with pytest.raises(TypeError, match="images has dtype torch.float64 but the model's weights are torch.float32"):
        enc(images().double())
    with pytest.raises(ValueError, match="images is on cpu but the model is on meta"):
        enc.to("meta")(images())


# ------------------------------------------------------------------ captioner
@pytest.mark.parametrize("encoder", ["conv", "patch"])
def test_captioner_shapes_and_attention_over_regions(encoder):
    model = captioner(encoder=encoder)
    assert isinstance(model.decoder, Seq2SeqRNN) and model.decoder.config.source == "states"
    logits, attn = model(images(), captions(), return_attention=True)
    assert logits.shape == (3, 5, V) and attn.shape == (3, 5, 16)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 5))
    assert torch.equal(model(images(), captions()), logits)


def test_captioner_speaks_the_decoding_protocol():
    """greedy_decode / beam_search run on it, agree with step-by-step greedy, and score like forward."""
    model = captioner()
    x = images(4)
    out = greedy_decode(model, x, max_len=6)
    assert out.tokens.shape[0] == 4 and out.attn.shape[::2] == (4, 16)
    with torch.no_grad():
        memory = model.encode(x)
        state, y, manual = model.init_state(memory), torch.full((4,), BOS), []
        for t in range(out.tokens.shape[1]):
            logits, state, _ = model.step(memory, state, y, t)
            logits[:, [PAD, BOS]] = -math.inf
            y = logits.argmax(-1)
            manual.append(y)
    manual = torch.stack(manual, 1)  # (4, T)
    for b in range(4):
        n = int(out.lengths[b])
        assert out.tokens[b, :n].tolist() == manual[b, :n].tolist()
    beam = beam_search(model, x, beam=3, max_len=6)
    tgt_out = beam.tokens.clone()
    tgt_in = torch.cat([torch.full((4, 1), BOS), tgt_out[:, :-1]], 1)
    tgt_in[tgt_in == EOS] = PAD
    torch.testing.assert_close(sequence_logprob(model, x, tgt_in, tgt_out), beam.scores, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\)"):
        beam_steps(model, images(size=12))  # checked at the call, by the model's check_source


def test_captioner_is_batch_independent_in_eval_mode():
    model = captioner()
    x, tgt = images(), captions()
    logits = model(x, tgt)
    for b in range(3):
        torch.testing.assert_close(logits[b : b + 1], model(x[b : b + 1], tgt[b : b + 1]), atol=1e-5, rtol=1e-5)


def test_doubly_stochastic_loss_by_hand_and_padding_does_not_count():
    attn = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]])  # (1, T=3, S=2)
    keep = torch.tensor([[True, True, False]])
    assert doubly_stochastic_loss(attn, keep).item() == 0.0  # each region got exactly 1 over the real steps
    assert doubly_stochastic_loss(attn, torch.ones(1, 3, dtype=torch.bool)).item() == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"keep must be a bool \(B, T\) = \(1, 3\)"):
        doubly_stochastic_loss(attn, keep.float())


def test_captioner_leaves_the_doubly_stochastic_penalty_in_aux_loss():
    x, tgt = images(), captions()
    off = captioner().train()
    off(x, tgt)
    assert off.aux_loss is None
    model = captioner(doubly_stochastic=0.7).train()
    torch.manual_seed(3)
    _, attn = model(x, tgt, return_attention=True)
    torch.testing.assert_close(model.aux_loss, 0.7 * doubly_stochastic_loss(attn, tgt != PAD))
    assert model.aux_loss.requires_grad
    model.eval()
    model(x, tgt)
    assert model.aux_loss is None  # a loss for training only


def test_captioner_config_and_input_errors():
    with pytest.raises(ValueError, match="encoder must be one of 'conv', 'patch', got 'resnet'"):
        CaptionerConfig(V, encoder="resnet")
    with pytest.raises(ValueError, match="grid=5 must divide image_size=48"):
        CaptionerConfig(V, grid=5)
    with pytest.raises(ValueError, match="doubly_stochastic must be >= 0"):
        CaptionerConfig(V, doubly_stochastic=-1.0)
    with pytest.raises(ValueError, match="hid_dim must be >= 1, got 0"):
        CaptionerConfig(V, hid_dim=0)
    with pytest.raises(ValueError, match="tgt_vocab_size must be >= 1, got 0"):
        CaptionerConfig(0)
    with pytest.raises(TypeError, match="config must be a CaptionerConfig, got ViTConfig"):
        Captioner(ViTConfig(3))
    model = captioner()
    with pytest.raises(ValueError, match=r"tgt_in must be \(B=3, T\), got shape \(2, 5\)"):
        model(images(), captions()[:2])
    with pytest.raises(ValueError, match=rf"tgt_in holds token id {V}, outside the vocabulary"):
        model(images(), torch.full((3, 4), V))
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        model((images() * 255).to(torch.uint8), captions())
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\), got \(0, 3, 24, 24\)"):
        model.encode(images()[:0])


# ------------------------------------------------------------------ ViT and rollout
def test_vit_logits_and_per_layer_attention():
    model = vit()
    logits, maps = model(images(), return_attention=True)
    assert logits.shape == (3, 5)
    assert len(maps) == 2 and all(m.shape == (3, 2, 17, 17) for m in maps)  # N = 16 patches + class token
    for m in maps:
        torch.testing.assert_close(m.sum(-1), torch.ones(3, 2, 17))
    torch.testing.assert_close(model(images()), logits, atol=1e-5, rtol=1e-5)


def test_vit_class_token_reads_every_patch():
    model = vit()
    x = images(1)
    for n in (0, 15):
        y = x.clone()
        r, c = divmod(n, 4)
        y[:, :, r * 6 : (r + 1) * 6, c * 6 : (c + 1) * 6] = 0.0
        assert not torch.allclose(model(x), model(y)), n


def test_vit_config_errors():
    with pytest.raises(ValueError, match="image size 48x48 is not divisible by patch=5"):
        ViTConfig(3, patch=5)
    with pytest.raises(ValueError, match="d_model=30 is not divisible by num_heads=4"):
        ViTConfig(3, d_model=30)
    with pytest.raises(ValueError, match="num_layers must be >= 1, got 0"):
        ViTConfig(3, num_layers=0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        ViTConfig(3, dropout=1.0)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\)"):
        vit()(images(size=48))


def test_rollout_rows_sum_to_one_and_identity_stays_identity():
    L = 5
    eye = torch.eye(L).expand(2, 3, L, L)  # (B, h, L, L)
    torch.testing.assert_close(attention_rollout([eye]), torch.eye(L).expand(2, L, L))
    torch.testing.assert_close(attention_rollout([eye, eye, eye], residual=False), torch.eye(L).expand(2, L, L))
    maps = vit()(images(), return_attention=True)[1]
    r = attention_rollout(maps)
    assert r.shape == (3, 17, 17) and (r >= 0).all()
    torch.testing.assert_close(r.sum(-1), torch.ones(3, 17))


def test_rollout_by_hand():
    torch.manual_seed(0)
    a1, a2 = torch.softmax(torch.randn(1, 2, 3, 3), -1), torch.softmax(torch.randn(1, 2, 3, 3), -1)
    m1, m2 = a1.mean(1), a2.mean(1)  # (1, 3, 3)
    torch.testing.assert_close(attention_rollout([a1, a2], residual=False), m2 @ m1)
    i = torch.eye(3)
    torch.testing.assert_close(attention_rollout([a1, a2]), ((m2 + i) / 2) @ ((m1 + i) / 2))
    zero = torch.zeros(1, 1, 3, 3)  # fully masked queries without residual: zero rows, no NaN
    assert torch.equal(attention_rollout([zero], residual=False), torch.zeros(1, 3, 3))


def test_rollout_errors():
    with pytest.raises(TypeError, match="attentions must be a non-empty list"):
        attention_rollout([])
    with pytest.raises(TypeError, match="attentions must be a non-empty list"):
        attention_rollout(torch.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match=r"attentions\[1\] must be \(B, h, L, L\) like attentions\[0\] \(1, 1, 2, 2\)"):
        attention_rollout([torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)])
    with pytest.raises(ValueError, match=r"attentions\[0\] must be \(B, h, L, L\)"):
        attention_rollout([torch.ones(1, 1, 2, 3)])
    with pytest.raises(ValueError, match=r"attentions\[0\] must be \(B, h, L, L\), got shape \(2, 2\)"):
        attention_rollout([torch.ones(2, 2)])
    with pytest.raises(TypeError, match="residual must be a bool"):
        attention_rollout([torch.ones(1, 1, 2, 2)], residual=1)


# ------------------------------------------------------------------ CNN baseline
def test_cnn_classifier_interface_and_errors():
    torch.manual_seed(0)
    model = CNNClassifier(CNNConfig(4, image_size=24, width=8, grid=4)).eval()
    assert model(images()).shape == (3, 4)
    assert not any(n.startswith("encoder.pos") for n, _ in model.named_parameters())  # pooled: no positions
    with pytest.raises(ValueError, match="grid=5 must divide image_size=48"):
        CNNConfig(4, grid=5)
    with pytest.raises(ValueError, match="num_classes must be >= 1, got 0"):
        CNNConfig(0)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\) = \(B, 3, 24, 24\)"):
        model(images(size=48))


# ------------------------------------------------------------------ families and checkpoints
CAPTION_VOCAB = Vocab.build([[f"w{i}" for i in range(V - 4)]])


def _families():
    torch.manual_seed(0)
    return {
        "captioner": Captioner(CaptionerConfig(V, **SMALL_CAP, doubly_stochastic=0.5)),
        "vit": ViT(ViTConfig(5, **SMALL_VIT)),
        "cnn": CNNClassifier(CNNConfig(5, image_size=24, width=8, grid=4)),
    }


@pytest.mark.parametrize("family", ["captioner", "vit", "cnn"])
def test_image_families_round_trip_through_checkpoints(tmp_path, family):
    model = _families()[family]
    inputs = (images(8), captions(8)) if family == "captioner" else (images(8),)
    model.train()(*inputs)  # a training step moves the BatchNorm statistics away from their initial values
    vocabs = {"tgt_vocab": CAPTION_VOCAB} if family == "captioner" else {}
    path = save_checkpoint(model, tmp_path / family, **vocabs, metrics={"accuracy": 0.5})
    loaded, meta = load_checkpoint(path)
    assert models.family_of(loaded).name == meta["kind"] == family and loaded.config == model.config
    assert "src_vocab" not in meta and (("tgt_vocab" in meta) == (family == "captioner"))
    model.eval()
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    if family == "captioner":
        assert meta["tgt_vocab"] == CAPTION_VOCAB
        assert torch.equal(model(images(), captions()), loaded(images(), captions()))
        assert torch.equal(greedy_decode(model, images()).tokens, greedy_decode(loaded, images()).tokens)
    else:
        assert torch.equal(model(images()), loaded(images()))


def test_vocabularies_follow_the_family(tmp_path):
    assert vocab_sides(CaptionerConfig(V)) == ("tgt",)
    assert vocab_sides(ViTConfig(3)) == vocab_sides(CNNConfig(3)) == ()
    assert vocab_sides(RNNConfig(5, 6)) == ("src", "tgt") and vocab_sides(RNNConfig(None, 6, source="states")) == ("tgt",)
    cap, vit_model = _families()["captioner"], _families()["vit"]
    with pytest.raises(CheckpointError, match="a captioner model with this config needs a tgt vocabulary"):
        save_checkpoint(cap, tmp_path / "c")
    with pytest.raises(CheckpointError, match="a captioner model with this config has no src vocabulary"):
        save_checkpoint(cap, tmp_path / "c", src_vocab=CAPTION_VOCAB, tgt_vocab=CAPTION_VOCAB)
    with pytest.raises(CheckpointError, match="a vit model with this config has no tgt vocabulary"):
        save_checkpoint(vit_model, tmp_path / "v", tgt_vocab=CAPTION_VOCAB)
    small = Vocab.build([["a"]])
    with pytest.raises(CheckpointError, match=f"tgt_vocab has 5 tokens but the config's tgt_vocab_size is {V}"):
        save_checkpoint(cap, tmp_path / "c", tgt_vocab=small)
    assert not list(tmp_path.iterdir())


def test_a_states_rnn_round_trips_with_its_target_vocabulary_only(tmp_path):
    torch.manual_seed(0)
    model = Seq2SeqRNN(RNNConfig(None, V, emb_dim=8, hid_dim=10, attention="bahdanau", source="states"))
    path = save_checkpoint(model, tmp_path / "s", tgt_vocab=CAPTION_VOCAB)
    loaded, meta = load_checkpoint(path)
    assert "src_vocab" not in meta and meta["tgt_vocab"] == CAPTION_VOCAB
    states = torch.randn(2, 3, 10)
    model.eval()
    assert torch.equal(model(states, captions(2)), loaded(states, captions(2)))


def test_a_captioner_checkpoint_without_its_vocabulary_is_refused(tmp_path):
    import json

    path = save_checkpoint(_families()["captioner"], tmp_path / "c", tgt_vocab=CAPTION_VOCAB)
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta.pop("tgt_vocab")
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="c.json lacks the field 'tgt_vocab'"):
        load_checkpoint(path)
