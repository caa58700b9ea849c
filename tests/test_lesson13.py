"""Lesson 13's additions: Xu et al.'s objective (summed NLL, beta gate, the penalty's floor), the speller's
peak moves, distinct distractors, the shipped speller and HAN runs, and the multi-source split overlap."""

import pytest
import torch
import torch.nn.functional as F

from attnlab.data.corpus import scenes as sc
from attnlab.data.corpus import triples
from attnlab.data.vocab import PAD
from attnlab.models import vision
from attnlab.models.rnn import Seq2SeqRNN
from attnlab.models.speech import peak_moves
from attnlab.training import experiments, hierarchical_experiments, multisource_experiments, results, speech_experiments
from attnlab.training import vision_experiments as vx


@pytest.mark.numeric
def test_caption_nll_sums_over_each_caption_and_averages_over_images():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 7, generator=g)
    target = torch.tensor([[3, 4, 5, PAD], [6, 3, PAD, PAD]])
    by_hand = 0.0
    for b in range(2):
        for t in range(4):
            if target[b, t] != PAD:
                by_hand -= float(F.log_softmax(logits[b, t], -1)[target[b, t]])
    assert float(vision.caption_nll(logits, target)) == pytest.approx(by_hand / 2, rel=1e-6)
    with pytest.raises(ValueError, match="target must be"):
        vision.caption_nll(logits, target[:, :3])


@pytest.mark.numeric
def test_uniform_columns_reach_the_floor_and_nothing_goes_below_it():
    S, T = 9, 4
    keep = torch.ones(1, T, dtype=torch.bool)
    uniform = torch.full((1, T, S), 1 / S)
    floor = float(vision.uniform_columns_floor(torch.tensor([T]), S))
    assert floor == pytest.approx((S - T) ** 2 / S)
    assert float(vision.doubly_stochastic_loss(uniform, keep)) == pytest.approx(floor)
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        attn = torch.softmax(3 * torch.randn(1, T, S, generator=g), -1)
        assert float(vision.doubly_stochastic_loss(attn, keep)) >= floor - 1e-9
    with pytest.raises(ValueError, match="lengths must lie"):
        vision.uniform_columns_floor(torch.tensor([S + 1]), S)


@pytest.mark.numeric
def test_the_gated_decoder_adds_only_the_gate_and_scales_the_context():
    cfg = vision.CaptionerConfig(tgt_vocab_size=12, beta_gate=True, hid_dim=16, emb_dim=8, width=8)
    model = vision.Captioner(cfg).eval()
    dec = model.decoder
    assert isinstance(dec, vision.GatedStatesDecoder)
    assert {n for n, _ in dec.named_children()} - {n for n, _ in Seq2SeqRNN(dec.config).named_children()} == {"f_beta"}
    with torch.no_grad():
        memory = model.encode(torch.rand(3, 3, 48, 48))
        s0 = dec.init_state(memory)[0]
        plain, attn, _ = Seq2SeqRNN._attend(dec, s0, memory, 0)
        gated, attn2, _ = dec._attend(s0, memory, 0)
    torch.testing.assert_close(gated, torch.sigmoid(dec.f_beta(s0)) * plain)
    torch.testing.assert_close(attn, attn2)
    assert type(vision.Captioner(vision.CaptionerConfig(tgt_vocab_size=12)).decoder) is Seq2SeqRNN
    with pytest.raises(TypeError, match="beta_gate must be a bool"):
        vision.CaptionerConfig(tgt_vocab_size=12, beta_gate=1)


def test_xu_presets_use_the_summed_nll_without_smoothing():
    xu = vx.preset("captioner_xu", "cpu")
    assert xu.nll == "caption_sum" and xu.label_smoothing == 0 and xu.model["beta_gate"] is True
    assert (
        xu.model["doubly_stochastic"] == 1.0 and "doubly_stochastic" not in vx.preset("captioner_xu_nods", "cpu").model
    )
    assert vx.preset("captioner", "cpu").nll == "token_mean"
    with pytest.raises(ValueError, match="caption_sum"):
        vx.VisionExperiment(name="x", family="captioner", task="caption", nll="caption_sum", label_smoothing=0.1)


def test_peak_moves_count_forward_stationary_and_backward_apart():
    attn = torch.zeros(5, 4)
    for t, peak in enumerate((0, 1, 1, 3, 2)):
        attn[t, peak] = 1.0
    assert peak_moves(attn) == (2, 1, 1)
    assert peak_moves(attn, 3) == (1, 1, 0)


def test_distinct_distractors_never_share_the_answer_and_the_default_is_unchanged():
    cfg = sc.SceneConfig(n_objects=(2, 3))
    before = sc.classification_set(60, task="circle_colour", seed=5, config=cfg)
    again = sc.classification_set(60, task="circle_colour", seed=5, config=cfg, distinct_distractors=False)
    assert torch.equal(before.images, again.images) and torch.equal(before.labels, again.labels)
    assert sc.shares_label(before).any()  # the default draws same-colour distractors
    fixed = sc.classification_set(60, task="circle_colour", seed=5, config=cfg, distinct_distractors=True)
    assert not sc.shares_label(fixed).any()
    with pytest.raises(TypeError, match="distinct_distractors must be a bool"):
        sc.classification_set(2, task="circle_colour", seed=0, config=cfg, distinct_distractors="yes")


@pytest.mark.parametrize(
    "module, name",
    [
        (speech_experiments, "transcriber"),
        (speech_experiments, "transcriber_content"),
        *[
            (hierarchical_experiments, hierarchical_experiments.run_name(n, s))
            for n in hierarchical_experiments.HAN_RUNS
            for s in hierarchical_experiments.HAN_SEEDS
        ],
    ],
)
def test_lesson13_runs_are_shipped_small_and_match_their_results(module, name):
    model, meta, source = module.load_trained(name, prefer_live=False)
    assert source == results.SHIPPED
    res = results.read_result(name, shipped=True)
    assert meta["metrics"]["train_steps"] == res["train_steps"] > 0
    assert results.checkpoint_path(name, shipped=True).with_suffix(".safetensors").stat().st_size <= 5e6


def test_under_use_shipped_the_runs_load_instead_of_training(monkeypatch, capsys):
    monkeypatch.setenv(experiments.SHIPPED_VAR, "1")
    _, res = speech_experiments.run("transcriber")
    _, han = hierarchical_experiments.run("han_emb", seed=2)
    out = capsys.readouterr().out
    assert "loaded the shipped 'transcriber'" in out and "loaded the shipped 'han_emb_seed2'" in out
    assert res["source"].startswith("shipped") and han["seed"] == 2
    with pytest.raises(KeyError, match="unknown HAN run"):
        hierarchical_experiments.run_name("nope")


def test_the_multisource_test_split_overlaps_the_pair_training_splits_as_the_lesson_says():
    """The triples are drawn apart from the pair corpora: measure how many test sentences the pair splits hold
    (the single-source baselines trained on them), and check the figure lesson 13 prints from the results."""
    test = triples.make_triple_splits(n_train=0, n_valid=0).test
    overlap = multisource_experiments.split_overlap(test)
    assert overlap == results.read_comparison("lesson13_multisource")["overlap"]
    assert overlap["n_test"] == len(test) == 2000
    for lang in ("fr", "ko"):
        assert overlap[lang]["train"] <= 0.02 * len(test)  # small, not zero: 25 and 24 when measured
