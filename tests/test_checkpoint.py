"""Checkpoints: exact round trip for every family, and a clear CheckpointError for each way a file can be damaged."""

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from attnlab.data.vocab import Vocab
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.training.checkpoint import CheckpointError, file_sha256, load_checkpoint, save_checkpoint, stamp_digest

SRC = Vocab.build([["the", "cat", "."]])
TGT = Vocab.build([["le", "chat", "."]])


def _rnn():
    torch.manual_seed(0)
    return Seq2SeqRNN(RNNConfig(len(SRC), len(TGT), emb_dim=4, hid_dim=6, attention="bahdanau"))


@pytest.fixture
def saved(tmp_path):
    model = _rnn()
    path = save_checkpoint(model, tmp_path / "toy", src_vocab=SRC, tgt_vocab=TGT, metrics={"bleu": 1.0})
    return model, path


def _edit_json(path, fn):
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    fn(meta)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")


def _restamp(path):
    """Record the current file's digest, as a saver that never checked anything would."""
    _edit_json(path, lambda m: m.update(weights_sha256=file_sha256(path)))


def _data_offset(path) -> int:
    (header_len,) = struct.unpack("<Q", path.read_bytes()[:8])
    return 8 + header_len


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_round_trip_is_exact(tmp_path, family):
    torch.manual_seed(0)
    if family == "rnn":
        model = _rnn()
    else:
        model = Transformer(TransformerConfig(len(SRC), len(TGT), d_model=8, num_heads=2, dim_feedforward=16))
    path = save_checkpoint(model, tmp_path / family, src_vocab=SRC, tgt_vocab=TGT, metrics={"bleu": 1.0})
    loaded, meta = load_checkpoint(path)
    assert type(loaded) is type(model) and loaded.config == model.config and not loaded.training
    assert meta["kind"] == family and meta["metrics"] == {"bleu": 1.0}
    assert meta["src_vocab"] == SRC and meta["tgt_vocab"] == TGT
    assert meta["weights_sha256"] == file_sha256(path)
    assert model.state_dict().keys() == loaded.state_dict().keys()
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    src, tgt_in = torch.tensor([[4, 5, 2]]), torch.tensor([[1, 4, 5]])
    model.eval()
    assert torch.equal(model(src, tgt_in), loaded(src, tgt_in))
    assert path.read_bytes()[8:9] == b"{"  # safetensors: a JSON header, no pickle


def test_flipped_byte_in_the_data_section_is_caught(saved):
    model, path = saved
    blob = bytearray(path.read_bytes())
    blob[_data_offset(path) + 5] ^= 0x40  # inside the first tensor's bytes: the header stays valid
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match=r"damaged or was replaced: its sha256 is [0-9a-f]{64}, but toy.json records"):
        load_checkpoint(path)
    # Without the digest the same file loads, with a silently different weight: what the digest is for.
    _restamp(path)
    loaded, _ = load_checkpoint(path)
    assert any(not torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())


def test_truncated_file_is_caught(saved):
    _, path = saved
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(CheckpointError, match="damaged or was replaced"):
        load_checkpoint(path)
    _restamp(path)  # even with a matching digest the file does not parse
    with pytest.raises(CheckpointError, match="corrupt or not a safetensors"):
        load_checkpoint(path)


def test_garbage_file_is_caught(saved):
    _, path = saved
    path.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="damaged or was replaced"):
        load_checkpoint(path)
    _restamp(path)
    with pytest.raises(CheckpointError, match="corrupt or not a safetensors"):
        load_checkpoint(path)


def test_config_that_does_not_match_the_weights(saved):
    _, path = saved
    _edit_json(path, lambda m: m["config"].update(hid_dim=8))
    with pytest.raises(CheckpointError, match=r"does not match its config \(rnn\): .*expected \("):
        load_checkpoint(path)


def test_extra_and_retyped_tensors_are_refused(saved):
    model, path = saved
    state = {k: v.clone() for k, v in model.state_dict().items()}
    save_file({**state, "stray.weight": torch.zeros(2)}, str(path))
    _restamp(path)
    with pytest.raises(CheckpointError, match=r"unexpected \['stray.weight'\]"):
        load_checkpoint(path)
    state["bridge.bias"] = state["bridge.bias"].double()  # same shape, another dtype: would be cast silently
    save_file(state, str(path))
    _restamp(path)
    with pytest.raises(CheckpointError, match=r"bridge.bias: expected \(\(6,\), torch.float32\), found \(\(6,\), torch.float64\)"):
        load_checkpoint(path)


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_vocabulary_size_must_match_the_config(saved, side):
    _, path = saved
    vocab = SRC if side == "src" else TGT
    _edit_json(path, lambda m: m[f"{side}_vocab"]["itos"].append("extra"))
    with pytest.raises(
        CheckpointError, match=rf"{side}_vocab has {len(vocab) + 1} tokens but the config's {side}_vocab_size is {len(vocab)}"
    ):
        load_checkpoint(path)


def test_saving_with_vocabularies_of_the_wrong_size_is_refused(tmp_path):
    bigger = Vocab.build([["le", "chat", "noir", "."]])
    with pytest.raises(CheckpointError, match=rf"tgt_vocab has 8 tokens but the config's tgt_vocab_size is {len(TGT)}"):
        save_checkpoint(_rnn(), tmp_path / "x", src_vocab=SRC, tgt_vocab=bigger)
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize("key", ["kind", "config", "corpus_version", "weights_sha256", "src_vocab", "tgt_vocab", "metrics"])
def test_missing_field(saved, key):
    _, path = saved
    _edit_json(path, lambda m: m.pop(key))
    with pytest.raises(CheckpointError, match=rf"toy.json lacks the field '{key}'"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "key, value, what",
    [("kind", 3, "a string"), ("config", [], "an object"), ("src_vocab", "the cat", "an object"), ("metrics", 1.0, "an object")],
)
def test_field_of_the_wrong_type(saved, key, value, what):
    _, path = saved
    _edit_json(path, lambda m: m.update({key: value}))
    with pytest.raises(CheckpointError, match=rf"'{key}' must be {what}, found"):
        load_checkpoint(path)


def test_malformed_vocabularies_and_digest(saved):
    _, path = saved
    _edit_json(path, lambda m: m["src_vocab"].update(itos=["<pad>", 1]))
    with pytest.raises(CheckpointError, match=r"src_vocab\['itos'\] must be a list of strings"):
        load_checkpoint(path)
    _edit_json(path, lambda m: m["src_vocab"].pop("itos"))
    with pytest.raises(CheckpointError, match=r"src_vocab\['itos'\] must be a list of strings"):
        load_checkpoint(path)
    _edit_json(path, lambda m: m["src_vocab"].update(itos=["the", "cat"]))
    with pytest.raises(CheckpointError, match="src_vocab is not a vocabulary: a vocabulary must start with"):
        load_checkpoint(path)
    _edit_json(path, lambda m: m.update(src_vocab=SRC.to_dict(), weights_sha256="abc"))
    with pytest.raises(CheckpointError, match="'weights_sha256' must be 64 lowercase hex digits, found 'abc'"):
        load_checkpoint(path)


def test_config_that_does_not_build(saved):
    _, path = saved
    _edit_json(path, lambda m: m["config"].update(heads=2))
    with pytest.raises(CheckpointError, match="config does not build a RNNConfig: .*heads"):
        load_checkpoint(path)
    _edit_json(path, lambda m: (m["config"].pop("heads"), m["config"].update(hid_dim="96")))
    with pytest.raises(CheckpointError, match="config does not build a "):
        load_checkpoint(path)


def test_missing_unknown_and_unparsable(saved, tmp_path):
    _, path = saved
    with pytest.raises(CheckpointError, match="checkpoint file not found: .*nope.safetensors"):
        load_checkpoint(tmp_path / "nope")
    _edit_json(path, lambda m: m.update(kind="lstm"))
    with pytest.raises(CheckpointError, match=r"unknown model family 'lstm'; known: \['agreement', 'captioner', 'cnn', 'copy', 'decoder_only', 'han', 'head_tasks', 'multisource', 'pointer_net', 'rnn', 'transcriber', 'transformer', 'vit'\]"):
        load_checkpoint(path)
    path.with_suffix(".json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="must hold a JSON object, found list"):
        load_checkpoint(path)
    path.with_suffix(".json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)


def test_save_refuses_unknown_models_and_clashing_extras(tmp_path):
    class Custom(Seq2SeqRNN):
        pass

    custom = Custom(RNNConfig(len(SRC), len(TGT), emb_dim=4, hid_dim=6))
    with pytest.raises(CheckpointError, match="Custom belongs to no model family"):
        save_checkpoint(custom, tmp_path / "c", src_vocab=SRC, tgt_vocab=TGT)
    with pytest.raises(ValueError, match=r"must not replace the checkpoint's own fields \['kind'\]"):
        save_checkpoint(_rnn(), tmp_path / "c", src_vocab=SRC, tgt_vocab=TGT, extra={"kind": "x"})


def test_stamp_digest_upgrades_an_old_checkpoint_and_nothing_else(saved):
    model, path = saved
    _edit_json(path, lambda m: m.pop("weights_sha256"))
    old = path.with_suffix(".json").read_text()
    with pytest.raises(CheckpointError, match="lacks the field 'weights_sha256' .*stamp_digest"):
        load_checkpoint(path)
    digest = stamp_digest(path)
    assert digest == file_sha256(path)
    new = path.with_suffix(".json").read_text()
    # one added line, after corpus_version; every other line unchanged
    added = [line for line in new.splitlines() if line not in old.splitlines()]
    assert added == [f' "weights_sha256": "{digest}",']
    assert new.replace(added[0] + "\n", "") == old
    loaded, _ = load_checkpoint(path)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    assert stamp_digest(path) == digest  # idempotent
    blob = bytearray(path.read_bytes())
    blob[_data_offset(path)] ^= 1
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="records weights_sha256 .* but the file's is"):
        stamp_digest(path)


def test_every_shipped_checkpoint_records_its_digest():
    from attnlab.training.results import checkpoint_path

    folder = checkpoint_path("x", shipped=True).parent
    weights = sorted(folder.glob("*.safetensors"))
    assert weights, f"no shipped checkpoints in {folder}"
    for w in weights:
        meta = json.loads(w.with_suffix(".json").read_text())
        assert meta["weights_sha256"] == file_sha256(w), w.name


def test_model_modules_do_not_import_the_checkpoint_module():
    import subprocess
    import sys

    code = "import sys, attnlab.models.rnn, attnlab.models.transformer; print('attnlab.training.checkpoint' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", "a model module imports attnlab.training.checkpoint (the registry is attnlab.training.families)"

