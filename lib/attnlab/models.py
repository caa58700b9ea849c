"""The model families of the library, each named once.

A *family* is a model class with its frozen config dataclass: ``"rnn"`` (:class:`attnlab.rnn.Seq2SeqRNN`
with :class:`attnlab.rnn.RNNConfig`), ``"transformer"`` (:class:`attnlab.transformer.Transformer` with
:class:`attnlab.transformer.TransformerConfig`), and the image models of :mod:`attnlab.vision`:
``"captioner"`` (:class:`~attnlab.vision.Captioner`), ``"vit"`` (:class:`~attnlab.vision.ViT`) and
``"cnn"`` (:class:`~attnlab.vision.CNNClassifier`); ``"agreement"``
(:class:`attnlab.agreement.AgreementPair`, two RNNs trained in both directions) and ``"multisource"``
(:class:`attnlab.multisource.MultiSourceRNN`). Checkpoints store the family name and the config
(:mod:`attnlab.checkpoint`); named experiments build their models by family (:mod:`attnlab.experiments`).
Adding a family means adding one line to :data:`FAMILIES` and nothing anywhere else.

The model modules know nothing about this registry or about checkpoints, so there is no import
cycle. A family's module is imported the first time the family is used (importing the checkpoint
loader does not load every model); an error while importing it propagates unchanged.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

from torch import nn

__all__ = ["Family", "FAMILIES", "get_family", "family_of", "build_model"]


@dataclass(frozen=True)
class Family:
    """One model family: where its classes live.

    Attributes:
        name: the name stored in checkpoints and experiment presets.
        module: the module defining both classes (relative to the ``attnlab`` package).
        model: name of the ``nn.Module`` class; its constructor takes one config object.
        config: name of the frozen config dataclass; its ``src_vocab_size`` / ``tgt_vocab_size`` fields, where
            it has them and they are not ``None``, name the vocabularies its checkpoints store
            (:func:`attnlab.checkpoint.vocab_sides`).
    """

    name: str
    module: str
    model: str
    config: str

    def _classes(self) -> tuple[type, type]:
        mod = importlib.import_module(self.module, __package__)
        return getattr(mod, self.model), getattr(mod, self.config)

    @property
    def model_cls(self) -> type:
        """The model class."""
        return self._classes()[0]

    @property
    def config_cls(self) -> type:
        """The config dataclass."""
        return self._classes()[1]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("rnn", ".rnn", "Seq2SeqRNN", "RNNConfig"),
        Family("transformer", ".transformer", "Transformer", "TransformerConfig"),
        Family("captioner", ".vision", "Captioner", "CaptionerConfig"),
        Family("vit", ".vision", "ViT", "ViTConfig"),
        Family("cnn", ".vision", "CNNClassifier", "CNNConfig"),
        Family("agreement", ".agreement", "AgreementPair", "AgreementConfig"),
        Family("multisource", ".multisource", "MultiSourceRNN", "MultiSourceConfig"),
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
