"""Lesson 13's training and evaluation library: the attention-on-object metrics on hand-built tensors,
the image loaders, a few-step run through checkpoint and results, the shipped-run switch, bad input."""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.data.corpus import scenes as sc
from attnlab.data.vocab import PAD
from attnlab.models.vision import Captioner, CNNClassifier, ViT
from attnlab.training import results
from attnlab.training import vision_experiments as vx
from attnlab.training.checkpoint import CheckpointError

SMALL = dict(n_train=48, n_valid=12, n_test=4)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ATTNLAB_USE_SHIPPED", raising=False)
    monkeypatch.delenv("ATTNLAB_MAX_STEPS", raising=False)
    monkeypatch.setenv("ATTNLAB_PROFILE", "cpu")
    return tmp_path


def small_data(name):
    return vx.make_data(vx.preset(name, "cpu"), **SMALL)


def scene(*objects):
    return sc.make_scene([sc.make_object(*o) for o in objects])


# ------------------------------------------------------------------ metrics on hand-built tensors
def test_a_map_peaked_on_the_gold_cell_scores_one_and_elsewhere_zero():
    gold = torch.zeros(2, 9, dtype=torch.bool)
    gold[:, 4] = True  # the object covers the centre cell
    attn = torch.full((2, 9), 0.05)
    attn[0, 4] = 0.6  # row 0 peaks on the object, row 1 beside it
    attn[1, 5] = 0.6
    assert vx.peak_on_gold(attn, gold).tolist() == [True, False]
    torch.testing.assert_close(vx.mass_on_gold(attn, gold), torch.tensor([0.6, 0.05]))
    scores = vx.region_scores(attn, gold)["all"]
    assert scores == {"peak": 0.5, "mass": 0.325, "chance": round(1 / 9, 4), "count": 2}


def test_region_scores_count_only_rows_with_an_object_and_in_their_group():
    gold = torch.zeros(3, 4, dtype=torch.bool)
    gold[0, 0] = gold[1, 1] = True  # row 2 names no object (a function word): never counted
    attn = torch.eye(4)[[0, 2, 3]]  # row 0 on its object, row 1 not
    groups = {"a": torch.tensor([True, False, True]), "b": torch.tensor([False, True, True]), "none": torch.zeros(3).bool()}
    s = vx.region_scores(attn, gold, groups)
    assert (s["a"]["peak"], s["a"]["count"]) == (1.0, 1)
    assert (s["b"]["peak"], s["b"]["mass"], s["b"]["count"]) == (0.0, 0.0, 1)
    assert s["none"]["count"] == 0 and math.isnan(s["none"]["peak"])


def test_metric_errors():
    gold = torch.zeros(2, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"attn and gold must have one shape \(\.\.\., G\)"):
        vx.peak_on_gold(torch.rand(2, 5), gold)
    with pytest.raises(TypeError, match="gold must be a bool tensor"):
        vx.mass_on_gold(torch.rand(2, 4), gold.float())
    with pytest.raises(TypeError, match="attn must be a floating-point tensor"):
        vx.peak_on_gold(torch.ones(2, 4, dtype=torch.long), gold)
    with pytest.raises(ValueError, match=r"groups\['x'\] must be a bool tensor of shape \(2,\)"):
        vx.region_scores(torch.rand(2, 4), gold, {"x": torch.ones(3, dtype=torch.bool)})


def test_region_mask_marks_the_patches_holding_a_pixel():
    masks = torch.zeros(1, 6, 6, dtype=torch.bool)
    masks[0, 2, 3] = True  # patch row 1, column 1 of a 3 x 3 grid of 2-pixel patches
    masks[0, 5, 0] = True  # patch row 2, column 0
    out = vx.region_mask(masks, 3)
    assert out.shape == (1, 9)
    assert torch.nonzero(out[0]).flatten().tolist() == [4, 6]
    with pytest.raises(ValueError, match="grid=4 must divide the mask size 6x6"):
        vx.region_mask(masks, 4)
    with pytest.raises(TypeError, match="masks must be a bool tensor"):
        vx.region_mask(masks.float(), 3)


def test_vit_attention_maps_read_the_class_token_row_over_the_patches():
    L = 4  # class token + 3 patches
    w = torch.zeros(1, 2, L, L)
    w[0, 0, 0] = torch.tensor([0.5, 0.5, 0.0, 0.0])  # head 0: half on itself, half on patch 0
    w[0, 1, 0] = torch.tensor([0.0, 0.0, 0.0, 1.0])  # head 1: all on patch 2
    w[:, :, 1:] = torch.eye(L)[1:]  # patch tokens attend to themselves
    maps = vx.vit_attention_maps([w])
    # head mean: (0.25, 0.25, 0, 0.5) -> patches (0.25, 0, 0.5) renormalised
    torch.testing.assert_close(maps["class_token"], torch.tensor([[1 / 3, 0.0, 2 / 3]]))
    torch.testing.assert_close(maps["rollout"].sum(-1), torch.ones(1))
    # the cut drops the class token's weight on itself: 0.25 in the last layer's head mean
    torch.testing.assert_close(maps["class_token_self"], torch.tensor([0.25]))
    assert 0 < float(maps["rollout_self"]) < 1


def test_coverage_penalty_by_hand():
    attn = torch.zeros(1, 3, 2)
    attn[0, :2, 0] = 1.0  # two steps on region 0, the padded third would put 1 on region 1
    attn[0, 2, 1] = 1.0
    tgt_in = torch.tensor([[1, 5, PAD]])
    assert vx.coverage_penalty(attn, tgt_in) == pytest.approx((1 - 2) ** 2 + (1 - 0) ** 2)


# ------------------------------------------------------------------ captions
def test_caption_scores_overall_and_by_number_of_objects():
    one = scene(("circle", "red", "small", 0, 0))
    two = scene(("square", "blue", "large", 0, 0), ("cross", "green", "small", 1, 2))
    hyps = [list(one.tokens), list(two.tokens[:-1]) + ["circle"], ["a", "a"]]
    s = vx.caption_scores(hyps, [one, two, one])
    assert s["exact_match"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["grammatical"] == pytest.approx(2 / 3, abs=1e-4)  # "a a" is no caption
    assert s["by_bucket"]["1"]["exact_match"] == 0.5 and s["by_bucket"]["1"]["count"] == 2
    assert s["by_bucket"]["2"]["exact_match"] == 0.0 and s["by_bucket"]["2"]["bleu"] > 50
    with pytest.raises(ValueError, match="hyps and scenes must have the same length"):
        vx.caption_scores(hyps[:2], [one, two, one])


def test_word_classes_are_aligned_with_tgt_out():
    s = [scene(("circle", "red", "small", 0, 0)), scene(("square", "blue", "large", 0, 0), ("cross", "green", "small", 1, 2))]
    _, tgt_out = sc.encode_captions(s)
    classes = vx.token_word_classes(s)
    assert classes.shape == tuple(tgt_out.shape)
    vocab = sc.caption_vocab()
    for i, row in enumerate(classes):
        for t, c in enumerate(row):
            word = vocab.itos[int(tgt_out[i, t])]
            assert c == (sc.WORD_CLASSES[word] if int(tgt_out[i, t]) > 3 else "")
    with pytest.raises(ValueError, match="T must be >= 11"):
        vx.token_word_classes(s, 5)


class GoldLooker(nn.Module):
    """A stand-in captioner whose attention at step t is one-hot on a gold cell of token t + shift."""

    def __init__(self, scenes, shift=0):
        super().__init__()
        self.config = type("C", (), {"grid": 6})()
        self.w = nn.Parameter(torch.zeros(1))
        gold = sc.token_region_batch(scenes, 6)  # (N, T, G)
        rolled = torch.roll(gold, shifts=-shift, dims=1)
        idx = rolled.float().argmax(-1)  # (N, T) first gold cell (0 for rows without one)
        self.attn = F.one_hot(idx, 36).float()  # (N, T, G)

    def forward(self, images, tgt_in, return_attention=False):
        attn = self.attn[: len(images)]
        return torch.zeros(*tgt_in.shape, 22), attn


def test_forced_attention_is_read_token_by_token_against_the_gold_object():
    scenes = sc.make_scene_splits(n_train=0, n_valid=0, test_per_bucket=4, seed=3).test
    right = vx.attention_on_objects(GoldLooker(scenes), scenes)
    assert {g: right[g]["peak"] for g in ("noun", "colour", "size")} == {"noun": 1.0, "colour": 1.0, "size": 1.0}
    assert right["noun"]["count"] == sum(s.n_objects for s in scenes)
    # one token late: a size's attention then sits on its own object's colour (same object: still right),
    # a noun's on the next word ("left", "a" ...: no region, the argmax falls on cell 0)
    late = vx.attention_on_objects(GoldLooker(scenes, shift=1), scenes)
    assert late["size"]["peak"] == 1.0 and late["noun"]["peak"] < 0.5


# ------------------------------------------------------------------ loaders
def test_caption_loaders_give_image_caption_batches_in_a_seeded_order():
    data = small_data("captioner")
    a = vx.caption_dataloaders(data, bs=8, seed=0, device="cpu")
    x, tin, tout = a.train.one_batch()
    assert x.shape == (8, 3, 48, 48) and x.dtype == torch.float32
    assert tin.shape == tout.shape and tin.shape[0] == 8 and tin.dtype == torch.int64
    assert torch.equal(tin[:, 1:][tin[:, 1:] != PAD], tout[:, :-1][tin[:, 1:] != PAD])
    first = [b[1] for b in a.train]
    again = [b[1] for b in vx.caption_dataloaders(data, bs=8, seed=0, device="cpu").train]
    other = [b[1] for b in vx.caption_dataloaders(data, bs=8, seed=1, device="cpu").train]
    assert all(torch.equal(p, q) for p, q in zip(first, again, strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(first, other, strict=True))
    assert sum(len(b) for b in first) == len(data.train)
    second = [b[1] for b in a.train]  # the next epoch has another order
    assert not all(torch.equal(p, q) for p, q in zip(first, second, strict=True))


def test_classification_loaders_and_a_single_validation_batch():
    data = small_data("vit_scenes")
    dls = vx.classification_dataloaders(data, bs=8, device="cpu")
    x, y = dls.train.one_batch()
    assert x.shape == (8, 3, 48, 48) and y.shape == (8,) and y.dtype == torch.int64
    (batch,) = list(dls.valid)
    assert torch.equal(batch[1], data.valid.labels)


def test_make_data_classification_splits_share_no_scene():
    data = small_data("vit_scenes")
    keys = [{s.key for s in part.scenes} for part in (data.train, data.valid, data.test)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert {s.n_objects for s in data.train.scenes} <= {2, 3}


# ------------------------------------------------------------------ run, checkpoints, results
@pytest.mark.parametrize("name", ["captioner_ds", "vit_scenes", "cnn_scenes"])
def test_a_few_step_run_writes_files_that_load_back_the_same_model(data_dir, name):
    model, res = vx.run(name, steps=3, data=small_data(name), progress=False)
    assert res["train_steps"] == 3 and res["budget"] == "3 steps" and res["seed"] == 0
    assert res["params"] == sum(p.numel() for p in model.parameters())
    assert res["loss_curve"] and res["loss_curve"][-1]["step"] == 3
    base = results.checkpoint_path(name, shipped=False)
    assert base.with_suffix(".safetensors").exists()
    assert results.read_result(name, shipped=False) == json.loads(json.dumps(res))
    loaded, meta, source = vx.load_trained(name)
    assert source == results.LIVE and meta["corpus_version"] == vx.SCENES_VERSION
    images = small_data(name).test.images if name != "captioner_ds" else sc.images_tensor(small_data(name).test)
    if name == "captioner_ds":
        assert isinstance(loaded, Captioner) and meta["tgt_vocab"] == sc.caption_vocab()
        assert vx.caption_images(loaded, images) == vx.caption_images(model, images)
        assert "noun" in res["attention_on_object"] and set(res["by_bucket"]) == {"1", "2", "3"}
        assert res["tokens_per_second"] > 0
    else:
        assert isinstance(loaded, ViT if name == "vit_scenes" else CNNClassifier)
        assert meta["label_names"] == list(sc.COLOURS)
        with torch.no_grad():
            torch.testing.assert_close(loaded(images), model.eval()(images), rtol=0, atol=0)
        assert ("attention_on_object" in res) == (name == "vit_scenes")
        assert res["images_per_second"] > 0


def test_the_classifier_loss_curve_is_the_mean_validation_loss(data_dir):
    data = small_data("cnn_scenes")
    model, res = vx.run("cnn_scenes", steps=2, data=data, progress=False, save=False)
    with torch.no_grad():
        want = float(F.cross_entropy(model(data.valid.images), data.valid.labels))
    assert res["loss_curve"][-1]["valid_loss"] == pytest.approx(want, abs=1e-3)
    assert not results.results_path("cnn_scenes", shipped=False).exists()  # save=False writes nothing


def test_max_steps_caps_the_budget(data_dir, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_STEPS", "2")
    _, res = vx.run("cnn_scenes", steps=5, data=small_data("cnn_scenes"), progress=False, save=False)
    assert res["train_steps"] == 2 and res["budget_capped_by"] == "ATTNLAB_MAX_STEPS=2"


def test_use_shipped_loads_instead_of_training(data_dir, monkeypatch):
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    with pytest.raises(CheckpointError, match="no checkpoint of 'cnn_scenes'"):
        vx.run("cnn_scenes", progress=False)
    monkeypatch.delenv("ATTNLAB_USE_SHIPPED")
    vx.run("cnn_scenes", steps=1, data=small_data("cnn_scenes"), progress=False)  # a live run is not a shipped one
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    with pytest.raises(CheckpointError, match="has no shipped checkpoint"):
        vx.run("cnn_scenes", progress=False)
    monkeypatch.delenv("ATTNLAB_USE_SHIPPED")
    shipped, _ = vx.run("cnn_scenes", steps=2, data=small_data("cnn_scenes"), ship=True, progress=False)
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    model, res = vx.run("cnn_scenes", progress=False)
    assert res["source"].startswith("shipped") and res["train_steps"] == 2
    images = small_data("cnn_scenes").test.images
    with torch.no_grad():
        torch.testing.assert_close(model(images), shipped.eval()(images), rtol=0, atol=0)
    # another budget or seed trains (here for one step), shipped or not
    _, trained = vx.run("cnn_scenes", steps=1, data=small_data("cnn_scenes"), progress=False, save=False)
    assert "source" not in trained and trained["train_steps"] == 1


def test_a_checkpoint_of_older_scenes_or_another_model_is_refused(data_dir):
    vx.run("cnn_scenes", steps=1, data=small_data("cnn_scenes"), progress=False)
    meta_path = results.checkpoint_path("cnn_scenes", shipped=False).with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "corpus_version": "scenes-0"}))
    with pytest.raises(CheckpointError, match="trained on scenes 'scenes-0', now 'scenes-1'"):
        vx.load_trained("cnn_scenes")
    vx.run("vit_scenes", steps=1, data=small_data("vit_scenes"), progress=False)
    for suffix in (".json", ".safetensors"):  # a ViT checkpoint under the CNN's name
        src = results.checkpoint_path("cnn_scenes", shipped=False).with_suffix(suffix)
        src.write_bytes(results.checkpoint_path("vit_scenes", shipped=False).with_suffix(suffix).read_bytes())
    with pytest.raises(CheckpointError, match="holds a 'vit' model, but 'cnn_scenes' is a 'cnn'"):
        vx.load_trained("cnn_scenes")


def test_bad_names_and_arguments_give_clear_errors(data_dir):
    with pytest.raises(KeyError, match="unknown lesson-13 experiment 'nope'; known: .*captioner"):
        vx.preset("nope")
    with pytest.raises(KeyError, match="unknown lesson-13 experiment 'nope'"):
        vx.run("nope")
    with pytest.raises(KeyError, match="unknown lesson-13 experiment 'nope'"):
        vx.load_trained("nope")
    with pytest.raises(CheckpointError, match="no checkpoint of 'captioner' for the current scenes"):
        vx.load_trained("captioner")
    with pytest.raises(ValueError, match="profile must be one of"):
        vx.preset("captioner", "tpu")
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        vx.run("captioner", steps=0)
    with pytest.raises(ValueError, match="data for 'captioner' must be SceneSplits"):
        vx.run("captioner", steps=1, data=small_data("vit_scenes"))
    with pytest.raises(TypeError, match="seed must be an int"):
        vx.run("captioner", steps=1, seed=1.5)
    with pytest.raises(ValueError, match="a vit model cannot learn the task 'caption'"):
        vx.VisionExperiment(name="x", family="vit", task="caption")
    with pytest.raises(ValueError, match="n_train must be >= 1"):
        vx.make_data(vx.preset("captioner", "cpu"), n_train=0)


def test_presets_cover_both_profiles_and_differ_only_where_they_should():
    for profile in ("cpu", "gpu"):
        cap, ds = vx.preset("captioner", profile), vx.preset("captioner_ds", profile)
        assert ds.model["doubly_stochastic"] > 0 and cap.model.get("doubly_stochastic", 0) == 0
        assert {**ds.model, "doubly_stochastic": 0} == {**cap.model, "doubly_stochastic": 0}
        vit, cnn = vx.preset("vit_scenes", profile), vx.preset("cnn_scenes", profile)
        same = ("task", "steps", "bs", "lr", "n_train", "n_valid", "n_test", "n_objects")
        assert all(getattr(vit, f) == getattr(cnn, f) for f in same)
        assert vx.build_model(vit).config.num_classes == len(sc.COLOURS)


def test_comparison_rows_and_table():
    cap = {
        "task": "caption", "bleu": 90.0, "exact_match": 0.9,
        "by_bucket": {"1": {"exact_match": 1.0}, "2": {"exact_match": 0.8}},
        "attention_on_object": {g: {"peak": 0.9, "mass": 0.5, "chance": 0.1} for g in ("noun", "colour", "size")},
        "coverage_penalty": 3.0, "params": 10, "train_steps": 5, "train_seconds": 1.5,
    }
    cls = {"task": "red_shape", "accuracy": 0.7, "chance": 0.25, "params": 7, "train_steps": 5, "train_seconds": 1.0}
    rows = vx.comparison_rows({"captioner": cap, "cnn_scenes": cls})
    assert rows[0]["em_2"] == 0.8 and rows[0]["noun_peak"] == 0.9 and rows[1]["accuracy"] == 0.7
    text = vx.format_table(rows)
    lines = text.splitlines()
    assert len(lines) == 3 and "em_1" in lines[0] and lines[2].split()[0] == "cnn_scenes"
    assert "-" in lines[2].split()  # the CNN has no BLEU
    assert np.all([len(x) == len(lines[0]) for x in lines])


def test_make_test_data_is_the_test_split_without_the_rest():
    for name in ("captioner", "vit_scenes"):
        exp = vx.preset(name, "cpu")
        alone, whole = vx.make_test_data(exp, n_test=4), vx.make_data(exp, **SMALL).test
        if name == "captioner":
            assert [s.key for s in alone] == [s.key for s in whole] and len(alone) == 12
        else:
            assert alone.scenes == whole.scenes and torch.equal(alone.images, whole.images)


# ------------------------------------------------------------------ the shipped models
SHIPPED_NAMES = ("captioner", "captioner_ds", "vit_scenes", "cnn_scenes")


@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_model_reproduces_its_results_and_meets_the_targets(name):
    torch.set_num_threads(1)
    r = results.read_result(name, shipped=True)
    ckpt = results.checkpoint_path(name, shipped=True).with_suffix(".safetensors")
    assert ckpt.stat().st_size <= 5_000_000
    model, meta, source = vx.load_trained(name, prefer_live=False)
    assert source == results.SHIPPED and meta["metrics"] == r and r["budget"] == vx.preset(name, "cpu").budget
    test = vx.make_test_data(vx.preset(name, r["profile"]))
    if r["task"] == "caption":
        got = vx.evaluate_captioner(model, test)
        assert {b: v["exact_match"] for b, v in got["by_bucket"].items()} == {
            b: v["exact_match"] for b, v in r["by_bucket"].items()
        }
        for group, v in got["attention_on_object"].items():
            assert v["peak"] == pytest.approx(r["attention_on_object"][group]["peak"], abs=2e-3), group
        if name == "captioner":  # the lesson's targets on the cpu profile
            assert r["by_bucket"]["1"]["exact_match"] >= 0.9 and r["by_bucket"]["2"]["exact_match"] >= 0.9
            assert r["attention_on_object"]["noun"]["peak"] >= 0.9
    else:
        got = vx.evaluate_classifier(model, test)
        assert got["accuracy"] == r["accuracy"]
        if name == "vit_scenes":  # five colours: chance is about 0.2; a broken model stays near it
            assert r["accuracy"] >= 0.8
            for k in ("class_token", "rollout"):
                assert got["attention_on_object"][k]["peak"] == pytest.approx(
                    r["attention_on_object"][k]["peak"], abs=2e-3
                )


def test_fit_classifier_trains_through_fit_budget_and_counts_every_image(data_dir):
    """One training loop for text and images: fit_classifier is fit_budget with the cross-entropy of
    class logits and accuracy, and every image counts -- class 0 is a class, not <pad>."""
    from fastai.metrics import accuracy

    data = small_data("cnn_scenes")
    assert bool((data.train.labels == PAD).any())  # some labels are 0, which a token count would skip
    dls = vx.classification_dataloaders(data, bs=8, seed=0, device="cpu")
    model = vx.build_model(vx.preset("cnn_scenes", "cpu"), len(data.train.label_names))
    learn, stats = vx.fit_classifier(model, dls, steps=3, progress=False, label_smoothing=0.1, loss_every=3)
    assert stats.steps == 3 and stats.tokens == 3 * 8
    assert isinstance(learn.loss_func, nn.CrossEntropyLoss) and learn.loss_func.label_smoothing == 0.1
    assert [m.name for m in learn.metrics] == [accuracy.__name__]
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\)"):
        vx.fit_classifier(model, dls, steps=1, progress=False, label_smoothing=1.5)
