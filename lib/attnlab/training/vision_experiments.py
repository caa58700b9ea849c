"""Lesson 13's training and evaluation: the captioners, the Vision Transformer and its CNN baseline on
generated scenes, each scored against the gold image regions.

Named presets (:data:`VISION_EXPERIMENTS`, one per profile, budgets in optimiser steps):

* ``captioner`` -- Show, Attend and Tell (Xu et al. 2015) on :mod:`attnlab.data.corpus.scenes`: a small CNN
  gives a ``6 x 6`` grid of region features, lesson 2's Bahdanau decoder attends over them;
* ``captioner_ds`` -- the same with the doubly stochastic penalty
  ``lambda * sum_i (1 - sum_t alpha_ti)^2`` switched on, beside the course's per-token NLL with label
  smoothing (a departure from the paper: the penalty then weighs up to ``T`` times more);
* ``captioner_xu`` -- Xu et al.'s objective: the NLL summed over each caption (``nll="caption_sum"``,
  no label smoothing) plus the penalty (``lambda = 1``), and the gating scalar ``beta_t`` on the context;
* ``captioner_xu_nods`` -- the same objective and gate without the penalty;
* ``vit_scenes`` -- a small Vision Transformer (Dosovitskiy et al. 2021) naming the colour of the one
  circle among one or two other shapes (``task="circle_colour"``);
* ``cnn_scenes`` -- the CNN baseline on the same task and data;
* ``vit_scenes_1500``, ``cnn_scenes_1500`` -- both on 1,500 training images instead of 6,000.

:func:`run` trains one (through the fastai toolkit of :mod:`attnlab.training.train`), evaluates it on its
test split and writes the checkpoint and results in the foundation's format
(:mod:`attnlab.training.checkpoint`, :mod:`attnlab.training.results`): the learner's own run below ``data/runs``,
``ship=True`` the committed files. ``ATTNLAB_USE_SHIPPED=1`` loads a shipped run instead of training
it, and ``ATTNLAB_MAX_STEPS`` caps every budget, as for :func:`attnlab.training.experiments.run`.
:func:`load_trained` reads a trained model back.

Evaluation (plain functions on tensors, so each can be checked by hand):

* captions: :func:`caption_images` (greedy decoding, :func:`attnlab.models.decoding.greedy_decode`) and
  :func:`caption_scores` (BLEU, exact match, grammatical share, overall and by number of objects);
* attention on the gold object: :func:`peak_on_gold` (is the most attended region on the object?),
  :func:`mass_on_gold` (how much attention lies on it) and :func:`region_scores` (both, per group of
  tokens, beside the score a random peak would get). For captions the attention is read with the
  reference caption forced (:func:`forced_caption_attention`): the gold object of every token is
  then known, whatever the model would have written. :func:`attention_on_objects` groups the
  tokens by word class (nouns, colours, sizes);
* classification: :func:`classify` (accuracy), :func:`vit_attention_maps` (the class token's
  attention in the last layer, heads averaged, and attention rollout, Abnar & Zuidema 2020) and
  :func:`region_mask` (the gold pixel mask on the patch grid).

Training data are regenerated from fixed seeds (:func:`make_data`); nothing is downloaded. The data
seed is fixed; ``seed`` of :func:`run` seeds the initialisation and the training order only.

Shape legend
------------
N  images (scenes)
B  batch size
C  colour channels
H, W  image height and width
T  caption length + 1 (``<bos>`` in front of the decoder input, ``<eos>`` after the output)
G  regions of the attention grid, ``g * g`` (``g = grid``)
S  regions the captioner attends over (``G``)
L  ViT tokens, ``G + 1`` (class token first)
K  classes
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from fastai.metrics import accuracy
from torch import nn

from attnlab.core.checks import check_choice, check_positive_int, check_probability, check_tensor, eval_mode
from attnlab.core.profiles import get_device, get_profile
from attnlab.data.corpus import scenes as sc
from attnlab.data.loaders import SeededSortedDL
from attnlab.data.metrics import corpus_bleu, exact_match
from attnlab.data.vocab import PAD
from attnlab.models.decoding import device_of, greedy_decode
from attnlab.models.vision import CaptionNLL, ViT, attention_rollout, doubly_stochastic_loss
from attnlab.training import experiments
from attnlab.training import families as models
from attnlab.training.experiments import RunPlan, capped_budget, record_run, use_shipped
from attnlab.training.train import (
    TrainStats,
    fit_budget,
)

__all__ = [
    "SCENES_VERSION",
    "DATA_SEED",
    "CAPTION_TASK",
    "VisionExperiment",
    "VISION_EXPERIMENTS",
    "preset",
    "ClassificationSplits",
    "make_data",
    "make_test_data",
    "caption_dataloaders",
    "classification_dataloaders",
    "build_model",
    "fit_classifier",
    "run",
    "load_trained",
    "caption_images",
    "caption_scores",
    "forced_caption_attention",
    "token_word_classes",
    "peak_on_gold",
    "mass_on_gold",
    "region_scores",
    "attention_on_objects",
    "coverage_penalty",
    "evaluate_captioner",
    "region_mask",
    "vit_attention_maps",
    "classify",
    "evaluate_classifier",
    "comparison_rows",
    "format_table",
]

# Recorded in checkpoints; bump when a change to attnlab.data.corpus.scenes alters the generated scenes.
SCENES_VERSION = "scenes-1"
DATA_SEED = 0  # the data are the same for every training seed (as for the text corpus)
CAPTION_TASK = "caption"
NLL_KINDS = ("token_mean", "caption_sum")  # the course's per-token mean; Xu et al.'s sum over each caption
TASKS = (CAPTION_TASK, *sc.CLASSIFICATION_TASKS)
IMAGE_FAMILIES = ("captioner", "vit", "cnn")
WORD_GROUPS = ("noun", "colour", "size")  # the word classes that name an object or one of its attributes
_EVAL_BS = 250


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VisionExperiment:
    """A named training recipe for one profile.

    Attributes:
        name: results/checkpoint name.
        family: ``"captioner"``, ``"vit"`` or ``"cnn"`` (:data:`attnlab.training.families.FAMILIES`).
        task: ``"caption"`` or a classification task of :data:`attnlab.data.corpus.scenes.CLASSIFICATION_TASKS`.
        model: keyword arguments of the family's config (the vocabulary or class count comes from the task).
        steps: training budget in optimiser steps.
        bs: batch size.
        lr: peak one-cycle learning rate.
        wd: weight decay.
        label_smoothing: label smoothing of the loss.
        nll: a captioner's loss, ``"token_mean"`` (the course's masked cross-entropy, averaged over the
            tokens) or ``"caption_sum"`` (Xu et al.'s, :func:`attnlab.models.vision.caption_nll`; no
            label smoothing).
        n_train: training scenes.
        n_valid: validation scenes.
        n_test: test scenes per number of objects (captioning) or in all (classification).
        n_objects: the numbers of objects a scene may have (:class:`attnlab.data.corpus.scenes.SceneConfig`).
        description: one line for tables.
    """

    name: str
    family: str
    task: str
    model: dict = field(default_factory=dict)
    steps: int = 1000
    bs: int = 64
    lr: float = 3e-3
    wd: float = 0.0
    label_smoothing: float = 0.0
    nll: str = "token_mean"
    n_train: int = 6000
    n_valid: int = 300
    n_test: int = 100
    n_objects: tuple[int, ...] = (1, 2, 3)
    description: str = ""

    @property
    def seconds(self) -> None:
        """Lesson 13's models train to step budgets only (the time budget of :func:`record_run` is None)."""
        return None

    def __post_init__(self):
        check_choice("family", self.family, IMAGE_FAMILIES)
        check_choice("task", self.task, TASKS)
        if (self.family == "captioner") != (self.task == CAPTION_TASK):
            raise ValueError(f"experiment {self.name!r}: a {self.family} model cannot learn the task {self.task!r}")
        for name in ("steps", "bs", "n_train", "n_valid", "n_test"):
            check_positive_int(name, getattr(self, name))
        check_choice("nll", self.nll, NLL_KINDS)
        if self.nll == "caption_sum" and (self.family != "captioner" or self.label_smoothing):
            raise ValueError(
                f"experiment {self.name!r}: nll='caption_sum' is a captioner's loss without label smoothing"
            )
        object.__setattr__(self, "n_objects", self.scene_config.n_objects)  # checked and sorted there

    @property
    def budget(self) -> str:
        """The budget as a learner reads it, e.g. ``"1,000 steps"``."""
        return f"{self.steps:,} steps"

    @property
    def scene_config(self) -> sc.SceneConfig:
        """The geometry of the scenes (the default one, with this preset's numbers of objects)."""
        return sc.SceneConfig(n_objects=tuple(self.n_objects))

    def with_budget(self, steps: int | None = None) -> VisionExperiment:
        """This experiment with another step budget (``None``: unchanged)."""
        return self if steps is None else dataclasses.replace(self, steps=check_positive_int("steps", steps))


# Tuned on the 2-core course machine, one thread, seed 0 (test: 100 scenes per number of objects).
# A captioner step (batch 64) costs about 0.15 s, so 700 steps take about 110 s. At the RNN presets'
# lr 7e-3 exact match on two-object scenes (the hardest bucket: its relation word compares two
# positions) was 0.91 after 600 steps and 1.0 after 1,000; at lr 1e-2 it was 0.95 after 600 and 0.99
# after 750. The nouns' attention peaked on their object for >= 99.5 % of them in every run.
# The doubly stochastic penalty: with lambda = 0.05, 0.1 and 1 alike it falls to the same floor (18.9
# on the test captions: a caption has fewer words than the 36 regions, so the columns cannot all sum
# to 1), and the nouns' attention leaves the object (peak on it for 3-14 % of nouns, about chance,
# 10 %) while the colour words keep theirs (99 %); exact match stays 0.93-0.97 (lr 7e-3, 1,000 steps).
# lambda = 1 is the paper's value.
_CAPTIONER_CPU = dict(encoder="conv", grid=6, width=32, emb_dim=32, hid_dim=96)
_CAPTIONER_GPU = dict(encoder="conv", grid=6, width=64, emb_dim=64, hid_dim=256)
_CAPTION_CPU = dict(steps=700, bs=64, lr=1e-2, label_smoothing=0.1, n_train=6000, n_valid=300, n_test=100)
_CAPTION_GPU = dict(steps=4000, bs=128, lr=3e-3, label_smoothing=0.1, n_train=20000, n_valid=600, n_test=100)
# The classification task: the colour of the one circle among other shapes, with one or two
# distractors in every image (so the model must find the circle by its shape before reading its
# colour). "red_shape" was too easy to tell the models apart: both reached 100 % in 1,500 steps (the
# CNN's validation loss fell below 0.01 by step 300, the ViT's by step 975). On "circle_colour",
# 1,000 steps (about 60 s for either model): the ViT 0.988 with 6,000 training images, 0.937 with
# 1,500 (0.922 after 1,500 steps: more steps overfit), the CNN 1.0 with either.
_CLASSIFY = dict(task="circle_colour", n_objects=(2, 3))
_CLASSIFY_CPU = dict(steps=1000, bs=64, lr=3e-3, n_train=6000, n_valid=400, n_test=600, **_CLASSIFY)
_CLASSIFY_GPU = dict(steps=6000, bs=128, lr=1e-3, n_train=20000, n_valid=1000, n_test=1000, **_CLASSIFY)
_VIT_CPU = dict(patch=8, d_model=64, num_heads=4, num_layers=2, dim_feedforward=128)
_VIT_GPU = dict(patch=8, d_model=192, num_heads=6, num_layers=6, dim_feedforward=384, dropout=0.1)

# name -> profile -> VisionExperiment
VISION_EXPERIMENTS: dict[str, dict[str, VisionExperiment]] = {}


def _add(name: str, family: str, description: str, cpu: dict, gpu: dict) -> None:
    VISION_EXPERIMENTS[name] = {
        "cpu": VisionExperiment(name=name, family=family, description=description, **cpu),
        "gpu": VisionExperiment(name=name, family=family, description=description, **gpu),
    }


_CAPTIONER_DESC = "CNN regions (6x6) + GRU decoder with Bahdanau attention"
_add(
    "captioner",
    "captioner",
    _CAPTIONER_DESC,
    dict(task=CAPTION_TASK, model=_CAPTIONER_CPU, **_CAPTION_CPU),
    dict(task=CAPTION_TASK, model=_CAPTIONER_GPU, **_CAPTION_GPU),
)
_add(
    "captioner_ds",
    "captioner",
    f"{_CAPTIONER_DESC}, doubly stochastic penalty (lambda = 1)",
    dict(task=CAPTION_TASK, model={**_CAPTIONER_CPU, "doubly_stochastic": 1.0}, **_CAPTION_CPU),
    dict(task=CAPTION_TASK, model={**_CAPTIONER_GPU, "doubly_stochastic": 1.0}, **_CAPTION_GPU),
)
# Xu et al.'s objective (see caption_nll): the summed NLL is about 10 times the per-token mean on
# these captions, so lambda = 1 weighs the penalty about 10 times less than in captioner_ds.
_XU = dict(nll="caption_sum", label_smoothing=0.0)
_add(
    "captioner_xu",
    "captioner",
    f"{_CAPTIONER_DESC}, Xu et al.'s objective (summed NLL + penalty, lambda = 1) and beta gate",
    dict(
        task=CAPTION_TASK,
        model={**_CAPTIONER_CPU, "doubly_stochastic": 1.0, "beta_gate": True},
        **{**_CAPTION_CPU, **_XU},
    ),
    dict(
        task=CAPTION_TASK,
        model={**_CAPTIONER_GPU, "doubly_stochastic": 1.0, "beta_gate": True},
        **{**_CAPTION_GPU, **_XU},
    ),
)
_add(
    "captioner_xu_nods",
    "captioner",
    f"{_CAPTIONER_DESC}, summed NLL and beta gate, no penalty",
    dict(task=CAPTION_TASK, model={**_CAPTIONER_CPU, "beta_gate": True}, **{**_CAPTION_CPU, **_XU}),
    dict(task=CAPTION_TASK, model={**_CAPTIONER_GPU, "beta_gate": True}, **{**_CAPTION_GPU, **_XU}),
)
_add(
    "vit_scenes",
    "vit",
    "Vision Transformer (8x8 patches, pre-LN), colour of the circle",
    dict(model=_VIT_CPU, **_CLASSIFY_CPU),
    dict(model=_VIT_GPU, **_CLASSIFY_GPU),
)
_add(
    "cnn_scenes",
    "cnn",
    "CNN (3 strided convolutions, mean of the regions), colour of the circle",
    dict(model=dict(width=32, grid=6), **_CLASSIFY_CPU),
    dict(model=dict(width=64, grid=6), **_CLASSIFY_GPU),
)

# The same two models on a quarter of the training images (1,500): how much the ViT's gap to the CNN grows.
_SMALL = dict(n_train=1500)
_add(
    "vit_scenes_1500",
    "vit",
    "Vision Transformer (8x8 patches, pre-LN), colour of the circle, 1,500 training images",
    dict(model=_VIT_CPU, **{**_CLASSIFY_CPU, **_SMALL}),
    dict(model=_VIT_GPU, **{**_CLASSIFY_GPU, **_SMALL}),
)
_add(
    "cnn_scenes_1500",
    "cnn",
    "CNN (3 strided convolutions, mean of the regions), colour of the circle, 1,500 training images",
    dict(model=dict(width=32, grid=6), **{**_CLASSIFY_CPU, **_SMALL}),
    dict(model=dict(width=64, grid=6), **{**_CLASSIFY_GPU, **_SMALL}),
)


def preset(name: str, profile: str | None = None) -> VisionExperiment:
    """The :class:`VisionExperiment` called ``name`` for ``profile`` (default: the active profile).

    Raises:
        KeyError: an unknown name (the message lists the known ones).
        ValueError: an unknown profile.
    """
    return experiments.pick_preset(VISION_EXPERIMENTS, name, profile, what="lesson-13 experiment")


# --------------------------------------------------------------------------------------------
# Data and loaders
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassificationSplits:
    """Train / valid / test :class:`attnlab.data.corpus.scenes.ClassificationSet`; no scene content in two of them."""

    train: sc.ClassificationSet
    valid: sc.ClassificationSet
    test: sc.ClassificationSet


@functools.lru_cache(maxsize=4)
def _make_test(task: str, n_test: int, n_objects: tuple[int, ...]):
    config = sc.SceneConfig(n_objects=n_objects)
    if task == CAPTION_TASK:  # equal to make_scene_splits(...).test (drawn first there)
        return sc.make_scene_test_split(seed=DATA_SEED, per_bucket=n_test, config=config)
    return sc.classification_set(n_test, task=task, seed=DATA_SEED + 2, config=config)


@functools.lru_cache(maxsize=4)
def _make_data(task: str, n_train: int, n_valid: int, n_test: int, n_objects: tuple[int, ...]):
    config = sc.SceneConfig(n_objects=n_objects)
    if task == CAPTION_TASK:
        return sc.make_scene_splits(
            n_train=n_train, n_valid=n_valid, test_per_bucket=n_test, seed=DATA_SEED, config=config
        )
    # the test set first (as for the text corpus), then valid and train around it
    test = _make_test(task, n_test, n_objects)
    valid = sc.classification_set(n_valid, task=task, seed=DATA_SEED + 1, config=config, exclude=test.scenes)
    train = sc.classification_set(n_train, task=task, seed=DATA_SEED, config=config, exclude=test.scenes + valid.scenes)
    return ClassificationSplits(train=train, valid=valid, test=test)


def make_data(
    exp: VisionExperiment,
    *,
    n_train: int | None = None,
    n_valid: int | None = None,
    n_test: int | None = None,
) -> sc.SceneSplits | ClassificationSplits:
    """The generated data of an experiment (cached: the same sizes are drawn once per process).

    Args:
        exp: the experiment (its task, sizes and numbers of objects).
        n_train, n_valid, n_test: other sizes than the preset's (e.g. a small run in a test).

    Returns:
        :class:`attnlab.data.corpus.scenes.SceneSplits` for captioning (``n_test`` scenes per number of
        objects), :class:`ClassificationSplits` for a classification task (``n_test`` in all).
    """
    if not isinstance(exp, VisionExperiment):
        raise TypeError(f"exp must be a VisionExperiment (see preset), got {type(exp).__name__}")
    sizes = {"n_train": n_train, "n_valid": n_valid, "n_test": n_test}
    sizes = {k: getattr(exp, k) if v is None else check_positive_int(k, v) for k, v in sizes.items()}
    return _make_data(exp.task, sizes["n_train"], sizes["n_valid"], sizes["n_test"], tuple(exp.n_objects))


def make_test_data(exp: VisionExperiment, *, n_test: int | None = None) -> list[sc.Scene] | sc.ClassificationSet:
    """The test split of :func:`make_data` alone, without drawing or rendering the training scenes.

    Args:
        exp: the experiment.
        n_test: another size than the preset's.

    Returns:
        The test scenes (captioning) or :class:`attnlab.data.corpus.scenes.ClassificationSet`, equal to
        ``make_data(exp, n_test=n_test).test``.
    """
    if not isinstance(exp, VisionExperiment):
        raise TypeError(f"exp must be a VisionExperiment (see preset), got {type(exp).__name__}")
    n = exp.n_test if n_test is None else check_positive_int("n_test", n_test)
    return _make_test(exp.task, n, tuple(exp.n_objects))


def _dataloaders(train: tuple[torch.Tensor, ...], valid: tuple[torch.Tensor, ...], *, bs, valid_bs, seed, device):
    """fastai ``DataLoaders`` over in-memory tensors: shuffled training batches in an order fixed by
    ``(seed, epoch)`` (the course's seeded loader, :class:`attnlab.data.loaders.SeededSortedDL`, with
    ``bucketed=False``: images need no length buckets), validation in order."""
    from fastai.data.core import DataLoaders
    from fastai.data.load import DataLoader
    from torch.utils.data import TensorDataset

    if device is None:
        device = get_device()
    bs = check_positive_int("bs", bs)
    train_ds, valid_ds = TensorDataset(*train), TensorDataset(*valid)
    train_dl = SeededSortedDL(
        train_ds, res=[0] * len(train_ds), shuffle=True, seed=seed, bucketed=False, bs=bs, device=device
    )
    valid_dl = DataLoader(valid_ds, bs=valid_bs, shuffle=False, device=device)
    return DataLoaders(train_dl, valid_dl, device=device)


def caption_dataloaders(
    splits: sc.SceneSplits, *, bs: int = 64, seed: int = 0, device: str | torch.device | None = None
):
    """fastai ``DataLoaders`` of ``(images (B, C, H, W), tgt_in (B, T), tgt_out (B, T))`` batches.

    ``n_inp`` is 2, so the learner calls ``model(images, tgt_in)`` and scores ``tgt_out``, as for
    the text models. Captions are padded to the longest of their split.

    Args:
        splits: the scenes (``test`` is not used).
        bs: batch size.
        seed: seed of the training order.
        device: where batches go (default: the active profile's device).
    """
    vocab = sc.caption_vocab()
    parts = [(sc.images_tensor(s), *sc.encode_captions(s, vocab)) for s in (splits.train, splits.valid)]
    if not splits.train or not splits.valid:
        raise ValueError(f"need training and validation scenes, got {len(splits.train)} and {len(splits.valid)}")
    return _dataloaders(*parts, bs=bs, valid_bs=bs, seed=seed, device=device)


def classification_dataloaders(
    splits: ClassificationSplits, *, bs: int = 64, seed: int = 0, device: str | torch.device | None = None
):
    """fastai ``DataLoaders`` of ``(images (B, C, H, W), labels (B,))`` batches (``n_inp`` 1).

    The validation set is one batch, so the validation loss of :class:`attnlab.training.train.LossCurve`
    (a mean over batches weighted by :func:`attnlab.training.train.target_count`, one per label here) is
    exactly the mean loss over the validation images.

    Args:
        splits: the data (``test`` is not used).
        bs: batch size.
        seed: seed of the training order.
        device: where batches go (default: the active profile's device).
    """
    if len(splits.train.labels) == 0 or len(splits.valid.labels) == 0:
        raise ValueError(
            f"need training and validation images, got {len(splits.train.labels)} and {len(splits.valid.labels)}"
        )
    parts = [(s.images, s.labels) for s in (splits.train, splits.valid)]
    return _dataloaders(*parts, bs=bs, valid_bs=len(splits.valid.labels), seed=seed, device=device)


def build_model(exp: VisionExperiment, num_classes: int | None = None) -> nn.Module:
    """A freshly initialised model of ``exp`` (through the family registry).

    Args:
        exp: the experiment.
        num_classes: classes of a classifier (default: the task's label count).
    """
    image = dict(image_size=exp.scene_config.image_size)
    if exp.family == "captioner":
        config = {"tgt_vocab_size": len(sc.caption_vocab()), **image, **exp.model}
    else:
        k = _num_classes(exp.task, exp.n_objects) if num_classes is None else num_classes
        check_positive_int("num_classes", k)
        config = {"num_classes": k, **image, **exp.model}
    return models.build_model(exp.family, config)


def _num_classes(task: str, n_objects: tuple[int, ...]) -> int:
    return {"count": len(n_objects), "circle_colour": len(sc.COLOURS), "red_shape": len(sc.SHAPES)}[task]


# --------------------------------------------------------------------------------------------
# Training a classifier
# --------------------------------------------------------------------------------------------


def fit_classifier(model: nn.Module, dls, *, label_smoothing: float = 0.0, **fit) -> tuple[object, TrainStats]:
    """Train an image classifier with :func:`attnlab.training.train.fit_budget`, the text models' own training.

    The same fastai ``Learner`` and callbacks (:class:`attnlab.training.train.Budget` driving the one-cycle
    schedule by the step budget, :class:`~attnlab.training.train.LossCurve`,
    :class:`~attnlab.training.train.StepProgress`, gradient clipping); only the loss and the metric differ:
    the cross-entropy of ``(B, K)`` logits against ``(B,)`` labels and accuracy.

    Args:
        model: called as ``model(images)``, returning ``(B, K)`` logits.
        dls: fastai ``DataLoaders`` of ``(images, labels)`` (:func:`classification_dataloaders`).
        label_smoothing: of the cross-entropy, in ``[0, 1)``.
        fit: the budget and the rest of :func:`attnlab.training.train.fit_budget`'s keyword arguments
            (``steps``, ``seconds``, ``lr``, ``wd``, ``clip``, ``pct_start``, ``max_epochs``, ``progress``,
            ``loss_every``, ``profile``, ``cbs``).

    Returns:
        ``(learner, stats)``; ``stats.tokens`` counts the training **images** (one label each) and
        ``stats.tokens_per_second`` their rate.
    """
    loss = nn.CrossEntropyLoss(label_smoothing=check_probability("label_smoothing", label_smoothing))
    return fit_budget(model, dls, loss_func=loss, metrics=[accuracy], **fit)


# --------------------------------------------------------------------------------------------
# run / load
# --------------------------------------------------------------------------------------------


def run(
    name: str,
    *,
    profile: str | None = None,
    steps: int | None = None,
    ship: bool = False,
    seed: int = 0,
    progress: bool = True,
    save: bool = True,
    data: sc.SceneSplits | ClassificationSplits | None = None,
    produced_by: str | None = None,
) -> tuple[nn.Module, dict]:
    """Train a lesson-13 preset, evaluate it on its test split, write its checkpoint and results.

    Args:
        name: a preset of :data:`VISION_EXPERIMENTS`.
        profile: ``cpu``/``gpu`` (default: the active profile).
        steps: another step budget than the preset's.
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        seed: training seed (initialisation and batch order; the data do not change).
        progress: show a progress bar of the budget.
        save: write the files at all (``False``: only return the model and results).
        data: data from :func:`make_data` to use instead of the preset's (e.g. smaller).
        produced_by: the command recorded in the results (default: "live run", or the lesson's
            script with ``ship``).

    With ``ATTNLAB_USE_SHIPPED=1`` a run of the preset's budget, seed 0 and data is loaded from the
    shipped files instead (``results["source"]`` says so); ``ATTNLAB_MAX_STEPS`` caps the budget
    (``results["budget_capped_by"]``).

    Returns:
        ``(model, results)``: the model in eval mode on the profile's device, and the results dict
        (what :func:`evaluate_captioner` or :func:`evaluate_classifier` measured, plus ``params``,
        ``seed``, ``budget``, ``train_steps``, ``train_seconds``, ``tokens_per_second`` (captioner) or
        ``images_per_second`` (classifiers), ``loss_curve``, ``corpus_version`` (:data:`SCENES_VERSION`),
        ``data`` (sizes and numbers of objects of the splits) and the provenance of
        :func:`attnlab.training.results.provenance`).

    Raises:
        KeyError: an unknown name.
        ValueError: a bad budget or seed, a data object of the wrong task, or a distributed launch
            (these small models train on one process).
    """
    exp = preset(name, profile)
    profile = profile or get_profile()
    experiments.check_one_process_run("lesson-13 models", seed=seed, steps=steps)
    if use_shipped() and steps is None and seed == 0 and not ship and data is None:
        return experiments.load_shipped_run(name, load_trained, "run scripts/lesson13_experiments.py")
    exp, capped = capped_budget(exp.with_budget(steps))
    if data is None:
        data = make_data(exp)
    want = sc.SceneSplits if exp.task == CAPTION_TASK else ClassificationSplits
    if not isinstance(data, want):
        raise ValueError(f"data for {name!r} must be {want.__name__} (see make_data), got {type(data).__name__}")
    captioner = exp.family == "captioner"
    extra = {"experiment": dataclasses.asdict(exp), "task": exp.task}
    if not captioner:
        extra["label_names"] = list(data.train.label_names)
    if produced_by is None:
        produced_by = "python scripts/lesson13_experiments.py" if ship else "live run"
    plan = RunPlan(
        exp=exp,
        out=name,
        dataloaders=lambda device: (caption_dataloaders if captioner else classification_dataloaders)(
            data, bs=exp.bs, seed=seed, device=device
        ),
        build=lambda: build_model(exp, None if captioner else len(data.train.label_names)),
        evaluate=lambda model: (
            evaluate_captioner(model, data.test) if captioner else evaluate_classifier(model, data.test)
        ),
        header={"model": name, "experiment": name, "family": exp.family, "task": exp.task},
        record={"corpus_version": SCENES_VERSION, "data": _data_record(exp, data)},
        checkpoint=dict(
            tgt_vocab=sc.caption_vocab() if captioner else None, extra=extra, corpus_version=SCENES_VERSION
        ),
        fit=(functools.partial(_fit_summed, exp) if exp.nll == "caption_sum" else fit_budget)
        if captioner
        else fit_classifier,
        rate="tokens_per_second" if captioner else "images_per_second",
        profile=profile,
        seed=seed,
        ship=ship,
        save=save,
        progress=progress,
        produced_by=produced_by,
        capped=capped,
    )
    return record_run(plan)


def _fit_summed(exp: VisionExperiment, model, dls, *, label_smoothing: float = 0.0, **fit):
    """:func:`attnlab.training.train.fit_budget` with Xu et al.'s summed caption NLL as the loss."""
    if label_smoothing:
        raise ValueError(f"{exp.name!r}: the summed NLL has no label smoothing, got {label_smoothing}")
    return fit_budget(model, dls, loss_func=CaptionNLL(), **fit)


def _data_record(exp: VisionExperiment, data) -> dict:
    """What the model was trained and tested on."""
    if isinstance(data, sc.SceneSplits):
        sizes = {"train": len(data.train), "valid": len(data.valid), "test": len(data.test)}
    else:
        sizes = {"train": len(data.train.labels), "valid": len(data.valid.labels), "test": len(data.test.labels)}
    return {"version": SCENES_VERSION, "task": exp.task, "n_objects": list(exp.n_objects), "seed": DATA_SEED, **sizes}


def load_trained(name: str, *, prefer_live: bool = True, device: str | torch.device = "cpu"):
    """Load a trained lesson-13 model: the learner's own run when there is one, else the shipped one.

    Args:
        name: a preset name (``"captioner"``, ``"captioner_ds"``, ``"vit_scenes"``, ``"cnn_scenes"``).
        prefer_live: look at the learner's run first (``False``: the shipped checkpoint first).
        device: where to put the model.

    Returns:
        ``(model, meta, source)``: the model in eval mode, the checkpoint's JSON (``tgt_vocab`` a
        :class:`attnlab.data.vocab.Vocab` for a captioner, ``label_names`` for a classifier), and
        ``"live run"`` or ``"shipped"``.

    Raises:
        KeyError: an unknown name.
        CheckpointError: no place holds a checkpoint of the current scenes, or one that exists is
            damaged or holds another model (a damaged file is reported, never skipped).
    """
    if not isinstance(name, str) or name not in VISION_EXPERIMENTS:
        raise KeyError(f"unknown lesson-13 experiment {name!r}; known: {sorted(VISION_EXPERIMENTS)}")
    return experiments.find_trained(
        name,
        expected=lambda meta: SCENES_VERSION,
        data="scenes",
        hint="run it (attnlab.training.vision_experiments.run) or scripts/lesson13_experiments.py",
        family=VISION_EXPERIMENTS[name]["cpu"].family,
        prefer_live=prefer_live,
        device=device,
    )


# --------------------------------------------------------------------------------------------
# Attention against gold regions (any model)
# --------------------------------------------------------------------------------------------


def _check_pair(attn: torch.Tensor, gold: torch.Tensor) -> None:
    check_tensor("attn", attn, shape_text="(..., G)")
    check_tensor("gold", gold, shape_text="(..., G)")
    if not attn.is_floating_point():
        raise TypeError(f"attn must be a floating-point tensor, got dtype {attn.dtype}")
    if gold.dtype != torch.bool:
        raise TypeError(f"gold must be a bool tensor (True on the object's regions), got dtype {gold.dtype}")
    if attn.shape != gold.shape or attn.dim() == 0 or attn.shape[-1] == 0:
        raise ValueError(
            f"attn and gold must have one shape (..., G) with G >= 1, got {tuple(attn.shape)} and {tuple(gold.shape)}"
        )


def peak_on_gold(attn: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Whether the most attended region lies on the gold object.

    Args:
        attn: float ``(..., G)`` attention over regions.
        gold: bool ``(..., G)``, True on the regions holding a pixel of the object.

    Returns:
        ``(...)`` bool. Ties go to the first region of the row (``torch.argmax``).
    """
    _check_pair(attn, gold)
    top = attn.argmax(-1, keepdim=True)  # (..., 1)
    return gold.gather(-1, top).squeeze(-1)  # (...)


def mass_on_gold(attn: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Attention that lies on the gold object: ``sum_i attn_i [i on the object]``.

    Args:
        attn: float ``(..., G)`` (rows summing to 1 give a share).
        gold: bool ``(..., G)``.

    Returns:
        ``(...)`` float.
    """
    _check_pair(attn, gold)
    return (attn * gold.to(attn.dtype)).sum(-1)  # (...)


def region_scores(
    attn: torch.Tensor, gold: torch.Tensor, groups: Mapping[str, torch.Tensor] | None = None
) -> dict[str, dict]:
    """Peak-on-object and mass-on-object, per group of rows.

    A row counts when its ``groups`` mask is True and its gold region is not empty (a word that
    names no object, padding, an image without the object are left out).

    Args:
        attn: float ``(..., G)``.
        gold: bool ``(..., G)``.
        groups: ``{name: bool (...)}``; default one group ``"all"`` of every row.

    Returns:
        ``{name: {"peak", "mass", "chance", "count"}}``: the share of rows whose peak is on the
        object, the mean attention mass on it, ``chance`` the mean share of regions the object
        covers (what a peak placed at random would score, and the mass of uniform attention), and
        the number of rows counted. With no row counted the three figures are NaN.
    """
    _check_pair(attn, gold)
    if groups is None:
        groups = {"all": torch.ones(attn.shape[:-1], dtype=torch.bool, device=attn.device)}
    hits = peak_on_gold(attn, gold).float()  # (...)
    mass = mass_on_gold(attn, gold).float()  # (...)
    share = gold.float().mean(-1)  # (...)
    present = gold.any(-1)  # (...)
    out = {}
    for key, mask in groups.items():
        check_tensor(f"groups[{key!r}]", mask)
        if mask.dtype != torch.bool or mask.shape != attn.shape[:-1]:
            raise ValueError(
                f"groups[{key!r}] must be a bool tensor of shape {tuple(attn.shape[:-1])}, got "
                f"{mask.dtype} {tuple(mask.shape)}"
            )
        keep = mask.to(present.device) & present  # (...)
        n = int(keep.sum())
        if n == 0:
            out[key] = {"peak": math.nan, "mass": math.nan, "chance": math.nan, "count": 0}
            continue
        out[key] = {
            "peak": round(float(hits[keep].mean()), 4),
            "mass": round(float(mass[keep].mean()), 4),
            "chance": round(float(share[keep].mean()), 4),
            "count": n,
        }
    return out


# --------------------------------------------------------------------------------------------
# Captioning
# --------------------------------------------------------------------------------------------


def _scenes(scenes, name="scenes") -> list[sc.Scene]:
    out = list(scenes)
    if not out:
        raise ValueError(f"{name} must hold at least one scene")
    for s in out:
        if not isinstance(s, sc.Scene):
            raise TypeError(f"{name} must hold Scene objects, got {type(s).__name__}")
    return out


def _max_caption_len(scenes: Sequence[sc.Scene]) -> int:
    """Most tokens a caption of these scenes' geometry can have, ``<eos>`` included."""
    k = max(max(s.config.n_objects) for s in scenes)
    return 5 * k + 1  # k phrases of 4 words, at most k words between them (a relation of two, or separators)


def caption_images(model, images: torch.Tensor, *, bs: int = _EVAL_BS, max_len: int | None = None) -> list[list[str]]:
    """Greedy captions of a batch of images.

    Args:
        model: a :class:`attnlab.models.vision.Captioner`.
        images: float ``(N, C, H, W)``.
        bs: images per decoding batch.
        max_len: most tokens per caption, ``<eos>`` included (default 16: three objects).

    Returns:
        ``N`` token lists (no specials).
    """
    bs = check_positive_int("bs", bs)
    limit = 16 if max_len is None else check_positive_int("max_len", max_len)
    vocab = sc.caption_vocab()
    device = device_of(model)
    out: list[list[str]] = []
    with eval_mode(model):
        for i in range(0, len(images), bs):
            dec = greedy_decode(model, images[i : i + bs].to(device), max_len=limit)
            out.extend(vocab.decode(row, strip=True) for row in dec.tokens.cpu())
    return out


def caption_scores(hyps: Sequence[Sequence[str]], scenes: Sequence[sc.Scene]) -> dict:
    """BLEU, exact match and the share of grammatical captions, overall and by number of objects.

    Args:
        hyps: one token list per scene.
        scenes: the scenes (their captions are the references).

    Returns:
        ``{"bleu", "exact_match", "grammatical", "count", "by_bucket": {"1": {...}, ...}}``.
    """
    scenes = _scenes(scenes)
    hyps = [list(h) for h in hyps]
    if len(hyps) != len(scenes):
        raise ValueError(f"hyps and scenes must have the same length, got {len(hyps)} and {len(scenes)}")

    def score(idx):
        h = [hyps[i] for i in idx]
        r = [list(scenes[i].tokens) for i in idx]
        return {
            "bleu": round(corpus_bleu(h, r), 2),
            "exact_match": round(exact_match(h, r), 4),
            "grammatical": round(float(np.mean([sc.parse_caption(x) is not None for x in h])), 4),
            "count": len(idx),
        }

    buckets: dict[str, list[int]] = {}
    for i, s in enumerate(scenes):
        buckets.setdefault(s.bucket, []).append(i)
    return {**score(range(len(scenes))), "by_bucket": {b: score(buckets[b]) for b in sorted(buckets, key=int)}}


def token_word_classes(scenes: Sequence[sc.Scene], T: int | None = None) -> np.ndarray:
    """The word class of every caption token, aligned with ``tgt_out`` of
    :func:`attnlab.data.corpus.scenes.encode_captions`.

    Args:
        scenes: the scenes.
        T: columns (default: the longest caption + 1).

    Returns:
        ``(N, T)`` array of str: ``"noun"``, ``"colour"``, ``"size"``, ``"function"``, and ``""`` at
        ``<eos>`` and padding.
    """
    scenes = _scenes(scenes)
    longest = max(len(s.tokens) for s in scenes) + 1
    T = longest if T is None else check_positive_int("T", T)
    if T < longest:
        raise ValueError(f"T must be >= {longest} (the longest caption + <eos>), got {T}")
    out = np.full((len(scenes), T), "", dtype=object)  # (N, T)
    for i, s in enumerate(scenes):
        out[i, : len(s.tokens)] = s.word_classes
    return out


def forced_caption_attention(model, scenes: Sequence[sc.Scene], *, bs: int = _EVAL_BS):
    """The captioner's attention while it reads the reference captions (teacher forcing).

    Row ``t`` is the attention with which the model predicts token ``t`` of the caption (``tgt_out[:, t]``),
    so the object it should look at is the gold one of :func:`attnlab.data.corpus.scenes.token_region_batch`.

    Args:
        model: a :class:`attnlab.models.vision.Captioner`.
        scenes: the scenes.
        bs: images per batch.

    Returns:
        ``(attn (N, T, S), gold (N, T, G = S) bool, tgt_in (N, T))``, on the CPU; ``attn`` is zero
        at padded steps.
    """
    scenes = _scenes(scenes)
    bs = check_positive_int("bs", bs)
    grid = model.config.grid
    images = sc.images_tensor(scenes)  # (N, C, H, W)
    tgt_in, _ = sc.encode_captions(scenes)  # (N, T)
    device = device_of(model)
    parts = []
    with eval_mode(model):
        for i in range(0, len(scenes), bs):
            _, attn = model(images[i : i + bs].to(device), tgt_in[i : i + bs].to(device), return_attention=True)
            parts.append(attn.float().cpu())  # (b, T, S)
    attn = torch.cat(parts)  # (N, T, S)
    attn = attn * (tgt_in != PAD).unsqueeze(-1).to(attn.dtype)  # (N, T, S)
    gold = sc.token_region_batch(scenes, grid)  # (N, T, G)
    return attn, gold, tgt_in


def attention_on_objects(model, scenes: Sequence[sc.Scene], *, bs: int = _EVAL_BS) -> dict[str, dict]:
    """:func:`region_scores` of the forced attention, for nouns, colours and sizes separately.

    Returns:
        ``{"noun": {"peak", "mass", "chance", "count"}, "colour": {...}, "size": {...}}``.
    """
    attn, gold, tgt_in = forced_caption_attention(model, scenes, bs=bs)
    classes = token_word_classes(scenes, tgt_in.shape[1])  # (N, T)
    groups = {g: torch.from_numpy(classes == g) for g in WORD_GROUPS}
    return region_scores(attn, gold, groups)


def coverage_penalty(attn: torch.Tensor, tgt_in: torch.Tensor) -> float:
    """The doubly stochastic term ``sum_i (1 - sum_t alpha_ti)^2`` per image, averaged (Xu et al. 2015).

    Args:
        attn: float ``(N, T, S)`` attention (from :func:`forced_caption_attention`).
        tgt_in: ``(N, T)`` decoder inputs; their padding does not count.

    Returns:
        The mean over the images (0 when every region gets a total attention of exactly 1).
    """
    return float(doubly_stochastic_loss(attn, tgt_in != PAD))


def evaluate_captioner(model, scenes: Sequence[sc.Scene], *, bs: int = _EVAL_BS) -> dict:
    """Everything the lesson measures on a captioner, on the given (test) scenes.

    Returns:
        :func:`caption_scores` of the greedy captions, plus ``attention_on_object``
        (:func:`attention_on_objects`) and ``coverage_penalty`` (:func:`coverage_penalty` of the
        forced attention).
    """
    scenes = _scenes(scenes)
    hyps = caption_images(model, sc.images_tensor(scenes), bs=bs, max_len=_max_caption_len(scenes))
    res = caption_scores(hyps, scenes)
    attn, gold, tgt_in = forced_caption_attention(model, scenes, bs=bs)
    classes = token_word_classes(scenes, tgt_in.shape[1])  # (N, T)
    res["attention_on_object"] = region_scores(attn, gold, {g: torch.from_numpy(classes == g) for g in WORD_GROUPS})
    res["coverage_penalty"] = round(coverage_penalty(attn, tgt_in), 4)
    return res


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------


def region_mask(masks: torch.Tensor, grid: int) -> torch.Tensor:
    """Pixel masks on a ``grid x grid`` patch grid: a region is True when it holds a pixel of the mask.

    Args:
        masks: bool ``(N, H, W)``.
        grid: ``g``; it must divide ``H`` and ``W``.

    Returns:
        ``(N, G)`` bool, region ``row * g + col`` (the patch order of :func:`attnlab.models.vision.patchify`).
    """
    check_tensor("masks", masks, dims=3, shape_text="(N, H, W)")
    if masks.dtype != torch.bool:
        raise TypeError(f"masks must be a bool tensor, got dtype {masks.dtype}")
    g = check_positive_int("grid", grid)
    N, H, W = masks.shape
    if H % g or W % g:
        raise ValueError(f"grid={g} must divide the mask size {H}x{W}")
    cells = masks.reshape(N, g, H // g, g, W // g).any(4).any(2)  # (N, g, g)
    return cells.reshape(N, g * g)  # (N, G)


def vit_attention_maps(maps: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Where a ViT's class token looks: its last layer's attention and the attention rollout.

    Args:
        maps: the per-layer weights ``[(B, h, L, L)]`` of ``ViT(images, return_attention=True)``.

    Returns:
        ``{"class_token": (B, G), "rollout": (B, G), "class_token_self": (B,), "rollout_self": (B,)}``:
        row 0 (the class token) of the last layer's head-mean attention, and of
        :func:`attnlab.models.vision.attention_rollout`, restricted to the patches and renormalised to
        sum to 1 over them; the ``_self`` entries are the share of row 0 that the cut drops, the class
        token's weight on itself (CLS -> CLS).
    """
    last_row = maps[-1].mean(1)[:, 0]  # (B, L) the class token's last-layer attention
    roll_row = attention_rollout(list(maps))[:, 0]  # (B, L)
    last, roll = last_row[:, 1:], roll_row[:, 1:]  # (B, G) the patches only
    tiny = torch.finfo(last.dtype).tiny
    return {
        "class_token": last / last.sum(-1, keepdim=True).clamp_min(tiny),  # (B, G)
        "rollout": roll / roll.sum(-1, keepdim=True).clamp_min(tiny),  # (B, G)
        "class_token_self": last_row[:, 0],  # (B,)
        "rollout_self": roll_row[:, 0],  # (B,)
    }


def classify(model, images: torch.Tensor, *, bs: int = _EVAL_BS, attention: bool = False):
    """Predicted classes (and, for a ViT with ``attention``, its maps of :func:`vit_attention_maps`).

    Args:
        model: a :class:`attnlab.models.vision.ViT` or :class:`~attnlab.models.vision.CNNClassifier`.
        images: float ``(N, C, H, W)``.
        bs: images per batch.
        attention: also return the ViT's attention maps.

    Returns:
        ``(N,)`` int64 predictions, or ``(predictions, {"class_token": (N, G), "rollout": (N, G)})``.
    """
    bs = check_positive_int("bs", bs)
    device = device_of(model)
    preds, parts = [], []
    with eval_mode(model):
        for i in range(0, len(images), bs):
            x = images[i : i + bs].to(device)
            if attention:
                logits, maps = model(x, return_attention=True)
                parts.append({k: v.float().cpu() for k, v in vit_attention_maps(maps).items()})
            else:
                logits = model(x)
            preds.append(logits.argmax(-1).cpu())
    pred = torch.cat(preds)  # (N,)
    if not attention:
        return pred
    return pred, {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def evaluate_classifier(model, data: sc.ClassificationSet, *, bs: int = _EVAL_BS) -> dict:
    """Accuracy overall and by number of objects; for a ViT also where its class token looks.

    Returns:
        ``{"accuracy", "chance", "count", "by_bucket": {"2": {"accuracy", "count"}, ...}}`` and, for a
        ViT, ``"attention_on_object": {"class_token": {...}, "rollout": {...}}`` (:func:`region_scores`
        against the gold object's patches). ``chance`` is the share of the most frequent label.
    """
    if not isinstance(data, sc.ClassificationSet):
        raise TypeError(f"data must be a ClassificationSet, got {type(data).__name__}")
    if len(data.labels) == 0:
        raise ValueError("data must hold at least one image")
    is_vit = isinstance(model, ViT)
    out = classify(model, data.images, bs=bs, attention=is_vit)
    pred, maps = out if is_vit else (out, None)
    right = pred == data.labels  # (N,)
    buckets = np.array([s.bucket for s in data.scenes])
    res = {
        "accuracy": round(float(right.float().mean()), 4),
        "chance": round(float(torch.bincount(data.labels).max()) / len(data.labels), 4),
        "count": len(data.labels),
        "by_bucket": {
            b: {
                "accuracy": round(float(right[torch.from_numpy(buckets == b)].float().mean()), 4),
                "count": int((buckets == b).sum()),
            }
            for b in sorted(set(buckets), key=int)
        },
    }
    if maps is not None:
        gold = region_mask(data.masks, model.patches.grid)  # (N, G)
        res["attention_on_object"] = {k: region_scores(maps[k], gold)["all"] for k in ("class_token", "rollout")}
    return res


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def comparison_rows(res_by_name: Mapping[str, dict]) -> list[dict]:
    """One flat row per model of the lesson's comparison table.

    Args:
        res_by_name: ``{name: results}`` as :func:`run` returns or writes them.

    Returns:
        Rows of ``model``, ``task``, ``params``, ``train_steps``, ``train_seconds`` and the task's
        figures: for captioners ``bleu``, ``exact_match`` and ``em_<k>`` per number of objects,
        ``noun_peak``, ``colour_peak``, ``size_peak``, ``noun_mass``, ``colour_mass``, ``size_mass``, ``chance``
        (the share of the regions a noun's object covers: a random peak's score) and ``coverage_penalty``; for
        classifiers ``accuracy``, ``chance`` (the most frequent label's share) and, for a ViT,
        ``cls_peak``, ``cls_mass``, ``rollout_peak``, ``rollout_mass`` and ``patch_chance`` (the
        share of the patches the object covers).
    """
    rows = []
    for name, r in res_by_name.items():
        row = {"model": name, "task": r.get("task")}
        if r.get("task") == CAPTION_TASK:
            row.update(bleu=r["bleu"], exact_match=r["exact_match"])
            row.update({f"em_{b}": v["exact_match"] for b, v in r["by_bucket"].items()})
            att = r["attention_on_object"]
            row.update({f"{g}_peak": att[g]["peak"] for g in WORD_GROUPS})
            row.update({f"{g}_mass": att[g]["mass"] for g in WORD_GROUPS})
            row.update(chance=att["noun"]["chance"])
            row.update(coverage_penalty=r["coverage_penalty"])
        else:
            row.update(accuracy=r["accuracy"], chance=r["chance"])
            att = r.get("attention_on_object")
            if att:
                row.update(
                    cls_peak=att["class_token"]["peak"],
                    cls_mass=att["class_token"]["mass"],
                    rollout_peak=att["rollout"]["peak"],
                    rollout_mass=att["rollout"]["mass"],
                    patch_chance=att["class_token"]["chance"],
                )
        row.update(params=r["params"], train_steps=r["train_steps"], train_seconds=r["train_seconds"])
        rows.append(row)
    return rows


def format_table(rows: Sequence[Mapping]) -> str:
    """Rows as a plain-text table: the union of their keys as columns, ``-`` where a row has none."""
    rows = list(rows)
    if not rows:
        return ""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    table = [cols] + [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)) for line in table)
