"""The model-family registry: every family is named once and builds, saves and loads through it."""

import dataclasses

import pytest

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
from attnlab.training import families as models


def test_families_and_their_classes():
    assert {n: (f.model_cls, f.config_cls) for n, f in models.FAMILIES.items()} == {
        "rnn": (Seq2SeqRNN, RNNConfig),
        "transformer": (Transformer, TransformerConfig),
        "captioner": (Captioner, CaptionerConfig),
        "vit": (ViT, ViTConfig),
        "cnn": (CNNClassifier, CNNConfig),
        "agreement": (AgreementPair, AgreementConfig),
        "multisource": (MultiSourceRNN, MultiSourceConfig),
        "transcriber": (Transcriber, TranscriberConfig),
        "han": (HAN, HANConfig),
        "head_tasks": (HeadPerTask, HeadTasksConfig),
        "decoder_only": (DecoderOnly, DecoderOnlyConfig),
        "pointer_net": (PointerNet, PointerNetConfig),
        "copy": (CopyModel, CopyConfig),
    }
    # checkpoints store and check the vocabularies named by these fields (attnlab.training.checkpoint.vocab_sides)
    sides = {"rnn": {"src", "tgt"}, "transformer": {"src", "tgt"}, "captioner": {"tgt"}, "vit": set(), "cnn": set()}
    sides |= {"agreement": {"src", "tgt"}, "multisource": {"src", "tgt"}, "transcriber": {"tgt"}, "han": set()}
    sides |= {"head_tasks": set(), "decoder_only": {"src", "tgt"}, "copy": {"src", "tgt"}}
    sides |= {"pointer_net": set()}
    for fam in models.FAMILIES.values():
        fields = {f.name for f in dataclasses.fields(fam.config_cls)}
        assert {f"{side}_vocab_size" for side in sides[fam.name]} <= fields, fam.name


def test_build_model_from_a_dict_or_a_config():
    model = models.build_model("rnn", {"src_vocab_size": 9, "tgt_vocab_size": 11, "emb_dim": 4, "hid_dim": 6})
    assert type(model) is Seq2SeqRNN and model.config == RNNConfig(9, 11, emb_dim=4, hid_dim=6)
    assert models.family_of(model).name == "rnn"
    cfg = TransformerConfig(9, 11, d_model=8, num_heads=2, dim_feedforward=16)
    assert models.family_of(models.build_model("transformer", cfg)).name == "transformer"


def test_bad_names_and_configs():
    with pytest.raises(ValueError, match=r"unknown model family 'lstm'; known: \['agreement', 'captioner', 'cnn', 'copy', 'decoder_only', 'han', 'head_tasks', 'multisource', 'pointer_net', 'rnn', 'transcriber', 'transformer', 'vit'\]"):
        models.get_family("lstm")
    with pytest.raises(TypeError, match="config of family 'transformer' must be a TransformerConfig or a dict, got RNNConfig"):
        models.build_model("transformer", RNNConfig(9, 11))
    with pytest.raises(TypeError, match="Linear belongs to no model family; known: rnn \\(Seq2SeqRNN\\)"):
        import torch

        models.family_of(torch.nn.Linear(2, 2))


def test_no_module_swallows_an_import_error():
    import ast
    from pathlib import Path

    lib = Path(models.__file__).parents[1]
    offenders = []
    for path in sorted(lib.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if names & {"ImportError", "ModuleNotFoundError"}:
                    offenders.append(f"{path.relative_to(lib)}:{node.lineno}")
    assert not offenders, f"an ImportError is caught (an optional dependency needs a clear message instead): {offenders}"
