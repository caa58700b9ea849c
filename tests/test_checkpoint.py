"""Checkpoint round trip, and clear errors for corrupt or mismatched files."""

import json

import pytest
import torch

from attnlab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from attnlab.data import Vocab
from attnlab.rnn import RNNConfig, Seq2SeqRNN


@pytest.fixture
def saved(tmp_path):
    src_vocab = Vocab.build([["the", "cat", "."]])
    tgt_vocab = Vocab.build([["le", "chat", "."]])
    torch.manual_seed(0)
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=4, hid_dim=6, attention="bahdanau"))
    path = save_checkpoint(model, tmp_path / "toy", src_vocab=src_vocab, tgt_vocab=tgt_vocab, metrics={"bleu": 1.0})
    return model, path, src_vocab


def test_round_trip(saved):
    model, path, src_vocab = saved
    loaded, meta = load_checkpoint(path)
    assert meta["metrics"] == {"bleu": 1.0} and meta["kind"] == "rnn"
    assert meta["src_vocab"].itos == src_vocab.itos
    for (k, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), k
    assert loaded.config == model.config
    # the weights file is safetensors: readable without pickle
    assert path.read_bytes()[8:9] == b"{"


def test_corrupt_bytes(saved):
    _, path, _ = saved
    path.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt or not a safetensors"):
        load_checkpoint(path)


def test_config_that_does_not_match_the_weights(saved):
    _, path, _ = saved
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["config"]["hid_dim"] = 8
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"does not match its config .*expected \("):
        load_checkpoint(path)


def test_missing_and_unknown(saved, tmp_path):
    _, path, _ = saved
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nope")
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["kind"] = "lstm"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="unknown model kind 'lstm'"):
        load_checkpoint(path)
    meta_path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
