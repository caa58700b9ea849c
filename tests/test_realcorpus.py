"""Real corpus at scale: SentencePiece tokenizers, held-out splits, memory-mapped ids, bucketed loaders."""

import hashlib
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.data import realcorpus
from attnlab.data.corpus import generate_pairs
from attnlab.data.corpus.tsv import iter_tsv, normalize_text
from attnlab.data.loaders import padding_fraction
from attnlab.data.realcorpus import RealCorpusError, SubwordTokenizer, bucketed_order, load, prepare
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, UNK
from attnlab.training.evaluate import evaluate_real

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = dict(vocab_size=100, valid=40, test=30, character_coverage=1.0, threads=1)
N_GENERATED, N_DUPLICATED = 1200, 60


def _text(tokens) -> str:
    """A generated sentence as text: capitalised, the final punctuation attached."""
    s = " ".join(tokens[:-1]) + tokens[-1]
    return s[:1].upper() + s[1:]


def _write_corpus(path: Path) -> None:
    pairs = generate_pairs(N_GENERATED, seed=11)
    lines = [f"{_text(p.src)}\t{_text(p.tgt)}" for p in pairs]
    # the same English again with another French: a held-out English sentence must not reach training
    lines += [f"{_text(p.src)}\tAutre traduction numéro {i}." for i, p in enumerate(pairs[:N_DUPLICATED])]
    real = [f"{x.en}\t{x.fr}" for name in ("en_fr_sample.tsv", "two_columns_crlf_bom.tsv")
            for x in iter_tsv(FIXTURES / name)]
    path.write_bytes(("\ufeff" + "\r\n".join(lines + real) + "\r\n").encode())


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "corpus.tsv"
    _write_corpus(path)
    return path


@pytest.fixture(scope="module")
def rc(corpus_file, tmp_path_factory):
    return prepare(corpus_file, tmp_path_factory.mktemp("prepared"), **SMALL)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_prepare_writes_the_files_and_counts(rc, corpus_file):
    m = rc.manifest
    assert m["format"] == realcorpus.FORMAT and set(rc.files) >= {
        "realcorpus.json", "tokenizer_src.model", "tokenizer_tgt.model", "train_src.ids", "test_tgt.offsets",
        "valid.tsv", "test.tsv",
    }  # fmt: skip
    assert all(p.is_file() and p.parent == rc.out_dir for p in rc.files.values())
    good = sum(1 for _ in iter_tsv(corpus_file))
    splits = m["splits"]
    assert m["lines"]["good"] == good
    assert (splits["valid"]["pairs"], splits["test"]["pairs"]) == (40, 30)
    assert sum(s["pairs"] for s in splits.values()) + m["lines"]["dropped"]["held_out_duplicate"] == good
    assert len(rc.train) == splits["train"]["pairs"] and len(rc.held_out("test")) == 30
    assert m["vocab_sizes"] == {"src": 100, "tgt": 100} and len(rc.src_vocab) == len(rc.tgt_vocab) == 100
    assert m["source"]["sha256"] == _digest(corpus_file)
    assert rc.corpus_version.startswith(f"tsv:corpus.tsv:{m['source']['sha256'][:12]}:unigram100:seed0")
    assert m["dtype"] == "uint16" and rc.train.paths["src_ids"].stat().st_size == 2 * splits["train"]["tokens"]["src"]


def test_special_ids_are_the_course_ids(rc):
    for tok in (rc.src_tokenizer, rc.tgt_tokenizer):
        assert tuple(tok.vocab.itos[:4]) == SPECIALS
        assert (tok.sp.pad_id(), tok.sp.bos_id(), tok.sp.eos_id(), tok.sp.unk_id()) == (PAD, BOS, EOS, UNK)
        assert [tok.sp.id_to_piece(i) for i in range(len(tok))] == tok.vocab.itos
    src, tgt_in, tgt_out = rc.train[0]
    assert src.dtype == tgt_in.dtype == torch.int64 and src[-1] == EOS and (src[:-1] > UNK).all()
    assert tgt_in[0] == BOS and tgt_out[-1] == EOS and torch.equal(tgt_in[1:], tgt_out[:-1])
    assert len(src) == rc.train.lengths[0] and len(tgt_in) == rc.train.tgt_lengths[0]


@pytest.mark.parametrize(
    "text",
    [
        "The student is at school.",
        "\u201cStop!\u201d he said.",
        "  The  OLD   house,  isn't it?  ",
    ],
)
def test_source_round_trip(rc, text):
    ids = rc.src_tokenizer.encode(text)
    assert rc.detokenize_src(ids) == normalize_text(text)
    assert rc.detokenize_src(rc.src_tokenizer.pieces(text)) == normalize_text(text)


@pytest.mark.parametrize(
    "text",
    ["Cours\u00a0!", "L'e\u0301le\u0300ve est a\u0300 l'e\u0301cole.", "\u00ab\u00a0Arr\u00eate\u00a0!\u00a0\u00bb a-t-il dit."],
)
def test_target_round_trip_normalises(rc, text):
    ids = rc.tgt_tokenizer.encode(text)
    assert rc.detokenize_tgt(ids) == normalize_text(text) != text
    # what a model emits: <bos> ... <eos> <pad>..., as ids, a tensor or pieces
    emitted = [BOS, *ids, EOS, PAD, PAD]
    assert rc.detokenize_tgt(torch.tensor(emitted)) == normalize_text(text)
    assert rc.detokenize_tgt(rc.tgt_vocab.decode(emitted, strip=False)) == normalize_text(text)


def test_arrays_and_text_agree(rc):
    exact = 0
    for split in ("valid", "test"):
        ds = getattr(rc, split)
        for i, line in enumerate(rc.held_out(split)):
            s, t = ds.ids(i)
            assert (s.tolist(), t.tolist()) == (rc.src_tokenizer.encode(line.en), rc.tgt_tokenizer.encode(line.fr))
            if UNK not in s and UNK not in t:  # a character never seen in training is <unk>, the rest comes back
                assert (rc.detokenize_src(s), rc.detokenize_tgt(t)) == (line.en, line.fr)
                exact += 1
    assert exact >= 60
    with pytest.raises(IndexError, match="item 30 of the test split, which has 30 pairs"):
        rc.test.ids(30)


def test_detokenize_bad_ids(rc):
    with pytest.raises(ValueError, match=r"token id 100, outside the vocabulary \[0, 100\)"):
        rc.detokenize_tgt([5, 100])
    with pytest.raises(ValueError, match=r"token id -1, outside"):
        rc.detokenize_tgt([-1])
    with pytest.raises(ValueError, match="must hold ints or strings, found float"):
        rc.detokenize_tgt([5, 2.0])


def test_held_out_is_disjoint_from_training(rc):
    train_sources = {rc.detokenize_src(rc.train.ids(i)[0]) for i in range(len(rc.train))}
    valid = [x.en for x in rc.held_out("valid")]
    test = [x.en for x in rc.held_out("test")]
    assert len(set(valid)) == 40 and len(set(test)) == 30 and not set(valid) & set(test)
    assert not (set(valid) | set(test)) & train_sources
    # some held-out sentences had a second French pair: it was dropped, not trained on
    assert rc.manifest["lines"]["dropped"]["held_out_duplicate"] > 0


def test_held_out_is_deterministic(rc, corpus_file, tmp_path):
    again = prepare(corpus_file, tmp_path / "again", **SMALL)
    for name in ("valid.tsv", "test.tsv", "train_src.ids", "train_tgt.offsets"):
        assert _digest(again.out_dir / name) == _digest(rc.out_dir / name), name
    assert again.src_vocab == rc.src_vocab and again.tgt_vocab == rc.tgt_vocab
    other = prepare(corpus_file, tmp_path / "seed1", **{**SMALL, "seed": 1})
    assert {x.en for x in other.held_out("test")} != {x.en for x in rc.held_out("test")}


def test_prepare_reuses_then_rebuilds(corpus_file, tmp_path):
    out = tmp_path / "p"
    first = prepare(corpus_file, out, **SMALL)
    stamp = (out / "tokenizer_src.model").stat().st_mtime_ns
    assert prepare(corpus_file, out, **SMALL).manifest == first.manifest
    assert (out / "tokenizer_src.model").stat().st_mtime_ns == stamp  # reused, not rewritten
    bigger = prepare(corpus_file, out, **{**SMALL, "vocab_size": 110})
    assert len(bigger.src_vocab) == 110 and load(out).manifest["args"]["vocab_size"] == 110


def test_prepare_rebuilds_a_damaged_directory(corpus_file, tmp_path):
    out = tmp_path / "p"
    good = prepare(corpus_file, out, **SMALL)
    (out / "tokenizer_tgt.model").write_bytes(b"damaged")
    with pytest.warns(UserWarning, match=r"rebuilding .*: .*tokenizer_tgt\.model does not match the size and sha256"):
        again = prepare(corpus_file, out, **SMALL)
    assert again.manifest["files"] == good.manifest["files"] and load(out).tgt_vocab == good.tgt_vocab


def test_max_len_drops_long_pairs_in_every_split(corpus_file, tmp_path):
    short = prepare(corpus_file, tmp_path / "short", **{**SMALL, "max_len": 40})
    dropped = short.manifest["lines"]["dropped"]["long"]
    assert dropped["train"] > 0 and dropped["valid"] + dropped["test"] > 0
    for ds in (short.train, short.valid, short.test):
        assert ds.lengths.max() <= 41 and ds.tgt_lengths.max() <= 41  # + <eos> / <bos>
    assert len(short.held_out("test")) == len(short.test)


def test_bpe(corpus_file, tmp_path):
    bpe = prepare(corpus_file, tmp_path / "bpe", **{**SMALL, "model_type": "bpe"})
    assert bpe.manifest["args"]["model_type"] == "bpe" and ":bpe100:" in bpe.corpus_version
    text = "The student is at school."
    assert bpe.detokenize_src(bpe.src_tokenizer.encode(text)) == text


def test_bad_lines_are_skipped_and_listed(tmp_path):
    path = tmp_path / "with_bad.tsv"
    _write_corpus(path)
    with open(path, "ab") as f:
        f.write(b"no tab on this line\r\n\tLe chat.\r\nThe caf\xe9.\tLe caf\xe9.\r\n")
    with pytest.warns(UserWarning, match=r"skipped 3 bad line\(s\): .*with_bad\.tsv:\d+ \(expected"):
        skipped = prepare(path, tmp_path / "out", **SMALL)
    assert skipped.manifest["lines"]["bad"] == 3
    with pytest.raises(ValueError, match=r"with_bad\.tsv:\d+: expected 'English<TAB>French', found no tab"):
        prepare(path, tmp_path / "out2", **SMALL, on_bad_line="raise")


def test_vocab_size_too_large_is_explained(corpus_file, tmp_path):
    with pytest.raises(ValueError, match=r"vocab_size=5000 is too large for the English side of .*corpus\.tsv: "
                                         r"SentencePiece can build at most \d+ pieces"):
        prepare(corpus_file, tmp_path / "big", **{**SMALL, "vocab_size": 5000})


def test_too_few_sentences_for_the_held_out_splits(tmp_path):
    path = tmp_path / "tiny.tsv"
    path.write_text("Hi.\tSalut.\nGo.\tVa !\nHi.\tBonjour.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tiny\.tsv has 2 distinct English sentences; valid \+ test = 2 must leave"):
        prepare(path, tmp_path / "out", vocab_size=20, valid=1, test=1)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(vocab_size=4), ValueError, "vocab_size must be >= 5"),
        (dict(vocab_size=80.0), TypeError, "vocab_size must be an int"),
        (dict(valid=0), ValueError, "valid must be >= 1"),
        (dict(test=-2), ValueError, "test must be >= 1"),
        (dict(seed="0"), TypeError, "seed must be an int"),
        (dict(max_len=0), ValueError, "max_len must be >= 1"),
        (dict(model_type="word"), ValueError, "model_type must be one of 'unigram', 'bpe', got 'word'"),
        (dict(character_coverage=1.5), ValueError, r"character_coverage must be in \(0, 1\], got 1.5"),
        (dict(character_coverage=0), ValueError, "character_coverage must be > 0"),
        (dict(sample=0), ValueError, "sample must be >= 1"),
        (dict(columns=(1, 1)), ValueError, "columns must name two different columns"),
        (dict(on_bad_line="warn"), ValueError, "on_bad_line must be 'raise' or 'skip', got 'warn'"),
        (dict(threads=0), ValueError, "threads must be >= 1"),
    ],
)
def test_prepare_bad_arguments(corpus_file, tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        prepare(corpus_file, tmp_path / "out", **{**SMALL, **kwargs})
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_prepare_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"path: no such corpus file .*missing\.tsv"):
        prepare(tmp_path / "missing.tsv", tmp_path / "out")
    with pytest.raises(TypeError, match="out_dir must be a str or Path, got NoneType"):
        prepare(FIXTURES / "en_fr_sample.tsv", None)


# --- damaged files ------------------------------------------------------------------------------


@pytest.fixture()
def copy_of(rc, tmp_path):
    out = tmp_path / "copy"
    out.mkdir()
    for name, p in rc.files.items():
        (out / name).write_bytes(p.read_bytes())
    return out


def test_load_a_copy(copy_of, rc):
    assert load(copy_of).manifest == rc.manifest


@pytest.mark.parametrize("name", ["tokenizer_tgt.model", "train_src.ids", "valid_tgt.offsets", "test.tsv"])
def test_damaged_file_is_named(copy_of, name):
    path = copy_of / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(RealCorpusError, match=rf"{name} does not match the size and sha256 recorded in "
                                              r"realcorpus\.json: it is damaged or was replaced"):
        load(copy_of)


def test_truncated_or_missing_file(copy_of):
    ids = copy_of / "train_tgt.ids"
    ids.write_bytes(ids.read_bytes()[:-2])
    with pytest.raises(RealCorpusError, match=r"train_tgt\.ids does not match the size"):
        load(copy_of)
    ids.unlink()
    with pytest.raises(RealCorpusError, match=r"train_tgt\.ids is missing \(listed in realcorpus\.json\)"):
        load(copy_of)


def test_damaged_or_missing_manifest(copy_of):
    manifest = copy_of / "realcorpus.json"
    manifest.write_text(manifest.read_text()[:-20])
    with pytest.raises(RealCorpusError, match=r"realcorpus\.json is not valid JSON"):
        load(copy_of)
    manifest.write_text(json.dumps({"format": realcorpus.FORMAT}))
    with pytest.raises(RealCorpusError, match=r"'args' must be a dict"):
        load(copy_of)
    manifest.unlink()
    with pytest.raises(RealCorpusError, match=r"is not a prepared corpus: no realcorpus\.json"):
        load(copy_of)


def test_manifest_that_lies_about_counts(copy_of):
    manifest = copy_of / "realcorpus.json"
    m = json.loads(manifest.read_text())
    m["splits"]["train"]["tokens"]["src"] -= 1
    manifest.write_text(json.dumps(m))
    with pytest.raises(RealCorpusError, match=r"train_src\.offsets: offsets run from 0 to \d+, expected 0 to \d+"):
        load(copy_of)


def test_tokenizer_file_checks(copy_of, tmp_path):
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"\x00not a model\xff" * 10)
    with pytest.raises(RealCorpusError, match=r"junk\.model is not a SentencePiece model"):
        SubwordTokenizer(junk)
    with pytest.raises(RealCorpusError, match=r"nothing\.model: no such tokenizer file"):
        SubwordTokenizer(tmp_path / "nothing.model")
    import sentencepiece as spm

    with open(os.devnull, "w") as quiet:  # SentencePiece's own ids: <unk>=0, <s>=1, </s>=2, no <pad>
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c d e f g h"] * 20), model_prefix=str(tmp_path / "theirs"), vocab_size=12,
            logstream=quiet,
        )  # fmt: skip
    with pytest.raises(RealCorpusError, match=r"theirs\.model: ids 0-3 must be \('<pad>', '<bos>', '<eos>', '<unk>'\)"):
        SubwordTokenizer(tmp_path / "theirs.model")


# --- batches --------------------------------------------------------------------------------------


def test_dataloaders_give_the_course_batches(rc):
    dls = rc.dataloaders(bs=16, device="cpu", seed=3)
    src, tgt_in, tgt_out = dls.train.one_batch()
    assert src.shape[0] == tgt_in.shape[0] == 16 and tgt_in.shape == tgt_out.shape
    assert (src[:, 0] != PAD).all() and (tgt_in[:, 0] == BOS).all()
    assert ((src == EOS).sum(1) == 1).all() and ((tgt_out == EOS).sum(1) == 1).all()
    first = [b[0].clone() for b in dls.train]
    assert dls.train.epoch == 1 and sum(len(b) for b in first) == len(rc.train)
    again = rc.dataloaders(bs=16, device="cpu", seed=3)
    assert all(torch.equal(a, b[0]) for a, b in zip(first, again.train, strict=True))  # seed fixes the order
    second = [b[0] for b in dls.train]
    assert any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(first, second, strict=True))
    valid_lengths = [int((b[0] != PAD).sum(1).max()) for b in dls.valid]
    assert valid_lengths == sorted(valid_lengths, reverse=True)  # longest first
    assert padding_fraction(dls.train) < padding_fraction(rc.dataloaders(bs=16, device="cpu", bucketed=False).train)


def test_dataloaders_bad_arguments(rc):
    with pytest.raises(ValueError, match="bs must be >= 1"):
        rc.dataloaders(bs=0)
    with pytest.raises(ValueError, match="num_workers must be >= 0"):
        rc.dataloaders(bs=4, num_workers=-1)


@pytest.mark.parametrize("n, bs", [(1, 4), (5, 4), (9, 4), (1000, 7), (3000, 16)])
def test_bucketed_order_is_sorted_dl_order(n, bs):
    from fastai.text.data import SortedDL

    lengths = np.random.RandomState(n).randint(1, 40, size=n)

    class Stub:  # just what SortedDL.shuffle_fn reads
        dataset, res, idx_max = range(n), list(lengths), int(np.argmax(lengths))

    Stub.bs = bs
    np.random.seed(123)
    expected = [int(i) for i in SortedDL.shuffle_fn(Stub(), None)]
    got = bucketed_order(lengths, bs, np.random.RandomState(123))
    assert got.tolist() == expected and sorted(expected) == list(range(n))


def test_dataset_pickles_without_its_arrays(rc):
    blob = pickle.dumps(rc.train)
    assert len(blob) < 64 + rc.train.lengths.nbytes * 3  # lengths travel, the token ids do not
    clone = pickle.loads(blob)
    assert all(torch.equal(a, b) for a, b in zip(clone[5], rc.train[5], strict=True))


# --- with a course model -------------------------------------------------------------------------


def test_checkpoint_and_standard_bleu(rc, tmp_path):
    from attnlab.training import checkpoint, experiments

    torch.manual_seed(0)
    model = experiments.build_model(experiments.preset("transformer", "cpu"), rc.src_vocab, rc.tgt_vocab).eval()
    path = checkpoint.save_checkpoint(model, tmp_path / "m", src_vocab=rc.src_vocab, tgt_vocab=rc.tgt_vocab,
                                      corpus_version=rc.corpus_version)
    loaded, meta = checkpoint.load_checkpoint(path)
    assert meta["src_vocab"] == rc.src_vocab and meta["tgt_vocab"] == rc.tgt_vocab
    assert meta["corpus_version"] == rc.corpus_version
    res = evaluate_real(rc, loaded, limit=4, bs=4)
    assert res["n_test"] == 4 and "tok:13a" in res["bleu_signature"] and res["split"] == "test"
    ex = res["examples"][0]
    assert ex["reference"] == rc.held_out("test")[0].fr and isinstance(ex["hypothesis"], str)
    # an untrained model does not reproduce the references
    assert res["exact_match"] < 1.0


def _restamp(directory: Path, name: str) -> None:
    """Record a changed file's size and digest in the manifest, as a consistent forgery would."""
    manifest = directory / "realcorpus.json"
    m = json.loads(manifest.read_text())
    m["files"][name] = {"bytes": (directory / name).stat().st_size, "sha256": _digest(directory / name)}
    manifest.write_text(json.dumps(m))


def _poke(path: Path, index: int, value: int, dtype) -> None:
    arr = np.fromfile(path, dtype=dtype)
    arr[index] = value
    arr.tofile(path)


@pytest.mark.parametrize(
    "name, index, value, dtype, match",
    [
        ("train_src.ids", 3, 65535, np.uint16, r"train_src\.ids: token id 65535 is outside the vocabulary of 100"),
        ("valid_tgt.offsets", 2, 0, np.int64, r"valid_tgt\.offsets: offsets decrease near item 1"),
        ("test_src.offsets", 0, 1, np.int64, r"test_src\.offsets: the offsets must start at 0, found \[1\]"),
    ],
)
def test_consistent_forgeries_are_caught(copy_of, name, index, value, dtype, match):
    _poke(copy_of / name, index, value, dtype)
    _restamp(copy_of, name)
    with pytest.raises(RealCorpusError, match=match):
        load(copy_of)


def test_manifest_that_drops_a_file_or_a_dtype(copy_of):
    manifest = copy_of / "realcorpus.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "dtype": "no-such-type"}))
    with pytest.raises(RealCorpusError, match=r"'dtype' 'no-such-type' is not a numpy dtype"):
        load(copy_of)
    del m["files"]["train_tgt.ids"]
    manifest.write_text(json.dumps(m))
    with pytest.raises(RealCorpusError, match=r"does not list \['train_tgt\.ids'\]"):
        load(copy_of)


def test_manifest_with_another_vocabulary_size(copy_of):
    manifest = copy_of / "realcorpus.json"
    m = json.loads(manifest.read_text())
    m["vocab_sizes"]["tgt"] = 99
    manifest.write_text(json.dumps(m))
    with pytest.raises(RealCorpusError, match=r"tokenizer_tgt\.model: 100 pieces, realcorpus\.json says"):
        load(copy_of)
