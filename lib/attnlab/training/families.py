"""The model families of the library, each named once.

A *family* is a model class with its frozen config dataclass: ``"rnn"`` (:class:`attnlab.models.rnn.Seq2SeqRNN`
with :class:`attnlab.models.rnn.RNNConfig`), ``"transformer"`` (:class:`attnlab.models.transformer.Transformer` with
:class:`attnlab.models.transformer.TransformerConfig`), and the image models of :mod:`attnlab.models.vision`:
``"captioner"`` (:class:`~attnlab.models.vision.Captioner`), ``"vit"`` (:class:`~attnlab.models.vision.ViT`) and
``"cnn"`` (:class:`~attnlab.models.vision.CNNClassifier`); ``"agreement"``
(:class:`attnlab.models.agreement.AgreementPair`, two RNNs trained in both directions) and ``"multisource"``
(:class:`attnlab.models.multisource.MultiSourceRNN`); lesson 13's ``"transcriber"``
(:class:`attnlab.models.speech.Transcriber`) and ``"han"`` (:class:`attnlab.models.hierarchical.HAN`); lesson 5's
one-head-per-task toy ``"head_tasks"`` (:class:`attnlab.models.toys.HeadPerTask`); lesson 11's ``"decoder_only"``
(:class:`attnlab.models.decoder_only.DecoderOnly`); lesson 10's ``"copy"``
(:class:`attnlab.models.copying.CopyModel`) and ``"pointer_net"`` (:class:`attnlab.models.pointer_net.PointerNet`).
Checkpoints store the family name and the config
(:mod:`attnlab.training.checkpoint`); named experiments build their models by family
(:mod:`attnlab.training.experiments`).
Adding a family means adding one line to :data:`FAMILIES` and nothing anywhere else.

The model modules know nothing about this registry or about checkpoints: the registry sits in the
training layer and imports them (``tests/test_layers.py`` keeps it that way).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import nn

from attnlab.models.agreement import AgreementConfig, AgreementPair
from attnlab.models.copying import CopyConfig, CopyModel
from attnlab.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from attnlab.models.hierarchical import HAN, HANConfig
from attnlab.models.multisource import MultiSourceConfig, MultiSourceRNN
from attnlab.models.pointer_net import PointerNet, PointerNetConfig
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.models.speech import Transcriber, TranscriberConfig
from attnlab.models.toys import HeadPerTask, HeadTasksConfig
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.models.vision import Captioner, CaptionerConfig, CNNClassifier, CNNConfig, ViT, ViTConfig

__all__ = ["Family", "FAMILIES", "get_family", "family_of", "build_model"]


@dataclass(frozen=True)
class Family:
    """One model family: its name and its two classes.

    Attributes:
        name: the name stored in checkpoints and experiment presets.
        model_cls: the ``nn.Module`` class; its constructor takes one config object.
        config_cls: the frozen config dataclass; its ``src_vocab_size`` / ``tgt_vocab_size`` fields, where
            it has them and they are not ``None``, name the vocabularies its checkpoints store
            (:func:`attnlab.training.checkpoint.vocab_sides`).
    """

    name: str
    model_cls: type
    config_cls: type

    @property
    def model(self) -> str:
        """The model class's name."""
        return self.model_cls.__name__

    @property
    def config(self) -> str:
        """The config class's name."""
        return self.config_cls.__name__


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("rnn", Seq2SeqRNN, RNNConfig),
        Family("transformer", Transformer, TransformerConfig),
        Family("captioner", Captioner, CaptionerConfig),
        Family("vit", ViT, ViTConfig),
        Family("cnn", CNNClassifier, CNNConfig),
        Family("agreement", AgreementPair, AgreementConfig),
        Family("multisource", MultiSourceRNN, MultiSourceConfig),
        Family("transcriber", Transcriber, TranscriberConfig),
        Family("han", HAN, HANConfig),
        Family("head_tasks", HeadPerTask, HeadTasksConfig),
        Family("decoder_only", DecoderOnly, DecoderOnlyConfig),
        Family("copy", CopyModel, CopyConfig),
        # lesson 10, sections 5-6 (pointer networks)
        Family("pointer_net", PointerNet, PointerNetConfig),
    )
}


def get_family(name: str) -> Family:
    """The :class:`Family` called ``name``.

    Raises:
        ValueError: ``name`` is not a family; the message lists the known ones.
    """
    if not isinstance(name, str) or name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[name]


def family_of(model: nn.Module) -> Family:
    """The family whose model class is exactly ``type(model)`` (a subclass is not its parent's family).

    Raises:
        TypeError: the model belongs to no family.
    """
    for fam in FAMILIES.values():
        if type(model) is fam.model_cls:
            return fam
    raise TypeError(
        f"{type(model).__name__} belongs to no model family; known: "
        + ", ".join(f"{f.name} ({f.model})" for f in FAMILIES.values())
    )


def build_model(family: str, config) -> nn.Module:
    """A freshly initialised model of ``family``.

    Args:
        family: a name in :data:`FAMILIES`.
        config: the family's config object, or a dict of its fields.

    Returns:
        The model (train mode, on the CPU).

    Raises:
        ValueError: unknown family.
        TypeError: ``config`` is another family's config object, or neither a config nor a dict.
    """
    fam = get_family(family)
    config_cls = fam.config_cls
    if isinstance(config, dict):
        config = config_cls(**config)
    elif not (dataclasses.is_dataclass(config) and type(config) is config_cls):
        raise TypeError(
            f"config of family {family!r} must be a {config_cls.__name__} or a dict, got {type(config).__name__}"
        )
    return fam.model_cls(config)
