"""A real English→French corpus at scale: SentencePiece subwords, token ids on disk, bucketed batches.

The course's lessons train on a small synthetic corpus held in memory as word tokens. This module
takes a user's tab-separated file of any size (a Tatoeba/Anki export, or WMT'14's 36M pairs, whose
line-aligned ``.en`` / ``.fr`` files ``paste`` joins into ``English<TAB>French`` lines) to the same
batches, without ever holding the file in memory.

Entry point
-----------
``prepare(path, out_dir, *, vocab_size=8000, valid=1000, test=1000, seed=0, max_len=None,
model_type="unigram", character_coverage=0.9995, sample=500_000, columns=None, on_bad_line="skip",
rebuild=False, threads=None) -> RealCorpus``

1. **Scan** (one streamed pass of :func:`attnlab.data.corpus.tsv.iter_tsv`: Unicode NFC, odd spaces made
   plain, bad lines skipped and listed with ``file:line`` in one warning). Each pair gets a key, a
   64-bit BLAKE2b hash of its normalised English side salted with ``seed``. The ``valid + test``
   distinct English sentences with the smallest keys are held out, the smallest ``valid`` of them
   for validation and the next ``test`` for test: a deterministic choice that needs only a heap of
   ``valid + test`` keys, whatever the file's size, and that keeps every copy of a held-out English
   sentence out of training (only its first pair is kept in the held-out split; later pairs with
   the same English are dropped). The same pass draws a uniform reservoir sample of at most
   ``sample`` training pairs (``random.Random(seed)``) for the tokenizers.
2. **Tokenizers**: one SentencePiece model per side (``tokenizer_src.model``,
   ``tokenizer_tgt.model``, with their ``.vocab`` listings), each with ``vocab_size`` pieces,
   trained on the sample. Their ids *are* the course's ids: ``<pad>`` = 0, ``<bos>`` = 1,
   ``<eos>`` = 2, ``<unk>`` = 3 (:mod:`attnlab.data.vocab`), so ``src_vocab`` / ``tgt_vocab`` are plain
   :class:`attnlab.data.vocab.Vocab` objects (the specials, then the pieces in SentencePiece's order)
   that every course model, :func:`attnlab.models.decoding.translate` and
   :func:`attnlab.training.checkpoint.save_checkpoint` take unchanged. SentencePiece's own normalisation is
   switched off (``identity``): the text is already normalised by :func:`normalize_text`, so
   :meth:`SubwordTokenizer.detokenize` of an encoding gives back exactly the normalised text.
3. **Encode** (a second streamed pass, a few thousand lines at a time): per split and side, the
   piece ids of all sentences end to end in ``<split>_<side>.ids`` (``uint16``, or ``uint32`` past
   65,536 pieces) and the ``int64`` start of each sentence in ``<split>_<side>.offsets`` (one more
   entry than sentences). ``max_len`` drops every pair with more than ``max_len`` pieces on either
   side, in all three splits (a model with a positional table of ``P`` positions cannot read longer
   ones; the manifest counts the dropped pairs per split, so a test BLEU on the shorter pairs is
   known to be one). ``valid.tsv`` / ``test.tsv`` keep the held-out pairs' normalised text (third
   column: where each came from): the references BLEU is scored against.
4. ``realcorpus.json`` (written last, atomically) records the arguments, the source file's size,
   modification time and sha256, counts, timings, and the size and sha256 of every file above.

Calling :func:`prepare` again with the same arguments on an unchanged file (same size and
modification time) reuses ``out_dir``; anything else rebuilds it. :func:`load` opens a prepared
directory and checks every file against the manifest first: a damaged, truncated or swapped
tokenizer or array raises :class:`RealCorpusError` naming the file.

Why one tokenizer per side rather than one joint model: the course models have separate source and
target embedding tables (the Transformer may tie its target table to its output layer, never to the
source table), so a joint vocabulary would spend rows of each table on the other language's pieces;
separate models give each language the whole ``vocab_size``. (A joint vocabulary pays off when the
source and target embeddings are one matrix -- Press and Wolf, 2017, "Using the Output Embedding to
Improve Language Models" -- which no course model does.) Unigram is the default
model (Kudo, 2018, "Subword Regularization: Improving Neural Network Translation Models with
Multiple Subword Candidates"); ``model_type="bpe"`` gives byte-pair encoding (Sennrich, Haddow and
Birch, 2016, "Neural Machine Translation of Rare Words with Subword Units").

Batches: :meth:`RealCorpus.dataloaders` returns fastai ``DataLoaders`` like
:func:`attnlab.data.loaders.make_dataloaders`: ``(src (B, S), tgt_in (B, T), tgt_out (B, T))`` with
``src`` = pieces + ``<eos>``, ``tgt_in`` = ``<bos>`` + pieces, ``tgt_out`` = pieces + ``<eos>``,
padded with ``<pad>`` by :func:`attnlab.data.loaders.collate`. Items are read from the memory-mapped
files on demand; the loader keeps only the sentence lengths and one shuffled index per pair
(int32 arrays, about 20 bytes a pair while an epoch's order is drawn). Training batches follow
fastai ``SortedDL``'s bucketing (shuffle, sort pools of ``50 * bs`` by length, shuffle the
batches, longest batch first) with numpy doing the work and the order fixed by ``(seed, epoch)``.

Scoring: :func:`attnlab.training.evaluate.evaluate_real` translates the held-out English, detokenizes with
SentencePiece and scores against the normalised French with sacrebleu's default ``13a``
tokenization: standard, comparable BLEU (and chrF), unlike the course's BLEU on its own tokens.

Memory: the scan keeps the heap of held-out keys and the tokenizer sample (at most ``sample`` pairs
of text); training SentencePiece holds that sample once more; encoding holds one chunk. None of it
grows with the file past ``sample`` pairs, except the loaders' per-pair lengths and index.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import itertools
import json
import math
import os
import random
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from attnlab.core.checks import check_float, check_int, check_positive_int
from attnlab.core.profiles import get_device, train_threads
from attnlab.data.corpus.tsv import TsvLine, iter_tsv, normalize_text
from attnlab.data.loaders import collate
from attnlab.data.paths import read_json_object
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab

if TYPE_CHECKING:
    from fastai.data.core import DataLoaders

__all__ = [
    "FORMAT",
    "MANIFEST",
    "RealCorpusError",
    "SubwordTokenizer",
    "PairMemmap",
    "RealCorpus",
    "prepare",
    "load",
    "bucketed_order",
]

FORMAT = "attnlab-realcorpus/1"
MANIFEST = "realcorpus.json"
SPLITS = ("train", "valid", "test")
SIDES = ("src", "tgt")
MODEL_TYPES = ("unigram", "bpe")
_CHUNK = 4096  # lines encoded at a time
_SPECIAL_ARGS = dict(
    pad_id=PAD, bos_id=BOS, eos_id=EOS, unk_id=UNK,
    pad_piece=SPECIALS[PAD], bos_piece=SPECIALS[BOS], eos_piece=SPECIALS[EOS], unk_piece=SPECIALS[UNK],
)  # fmt: skip


class RealCorpusError(RuntimeError):
    """A prepared corpus directory is missing a file, or a file is damaged or does not match the manifest."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _threads(threads: int | None = None) -> int:
    """``threads``, or the course's CPU thread policy (:func:`attnlab.core.profiles.train_threads`: 1 on the
    ``cpu`` profile, where extra threads spin-wait on a busy core; all of them on ``gpu``)."""
    if threads is not None:
        return check_positive_int("threads", threads)

    return train_threads()


# ---------------------------------------------------------------------------------------------
# Tokenizers


class SubwordTokenizer:
    """One side's SentencePiece model, with the course's special ids and a :class:`Vocab` of its pieces.

    Attributes:
        path: the ``.model`` file.
        sp: the ``sentencepiece.SentencePieceProcessor``.
        vocab: :class:`attnlab.data.vocab.Vocab` whose ``itos[i]`` is piece ``i`` (the specials first).
    """

    def __init__(self, path: str | Path):
        """Load and check a model file.

        Raises:
            RealCorpusError: the file is missing or not a SentencePiece model, or its first four ids are
                not ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``.
        """
        import sentencepiece as spm

        self.path = Path(path)
        if not self.path.is_file():
            raise RealCorpusError(f"{self.path}: no such tokenizer file")
        sp = spm.SentencePieceProcessor()
        try:
            sp.Load(str(self.path))
        except (OSError, RuntimeError) as exc:
            raise RealCorpusError(f"{self.path} is not a SentencePiece model (damaged?): {exc}") from exc
        n = sp.get_piece_size()
        got = tuple(sp.id_to_piece(i) for i in range(min(n, len(SPECIALS))))
        if got != SPECIALS or not (sp.pad_id(), sp.bos_id(), sp.eos_id(), sp.unk_id()) == (PAD, BOS, EOS, UNK):
            raise RealCorpusError(f"{self.path}: ids 0-3 must be {SPECIALS} (the course's specials), found {got}")
        self.sp = sp
        self.vocab = Vocab([sp.id_to_piece(i) for i in range(n)])

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"SubwordTokenizer({self.path.name}, {len(self)} pieces)"

    def encode(self, texts: str | Sequence[str]) -> list[int] | list[list[int]]:
        """Piece ids (no ``<bos>``/``<eos>``) of a text or a list of texts, after :func:`normalize_text`.

        Args:
            texts: one string, or a sequence of strings (encoded in one call, on the course's threads).

        Returns:
            A list of ids, or one list per text.
        """
        if isinstance(texts, str):
            return self.sp.encode(normalize_text(texts))
        return self.sp.encode([normalize_text(t) for t in texts], num_threads=_threads())

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``text`` as :attr:`vocab` tokens (an unknown character is ``<unk>``).

        These go to :func:`attnlab.models.decoding.translate` and ``vocab.encode``, which gives back the ids of
        :meth:`encode` exactly.
        """
        itos = self.vocab.itos
        return [itos[i] for i in self.encode(text)]

    def detokenize(self, ids_or_pieces) -> str:
        """Text of ids or pieces: ``<bos>``/``<pad>`` dropped, cut at the first ``<eos>``, pieces joined.

        ``detokenize(encode(s)) == normalize_text(s)`` for every text whose characters the model covers.

        Args:
            ids_or_pieces: ids (a list, a 1-D tensor or array) or piece strings (e.g. from
                ``vocab.decode`` or :func:`attnlab.models.decoding.translate`).

        Returns:
            The text.

        Raises:
            ValueError: an id outside ``[0, len(self))``.
        """
        if isinstance(ids_or_pieces, torch.Tensor | np.ndarray):
            ids_or_pieces = ids_or_pieces.tolist()
        items = list(ids_or_pieces)
        if items and isinstance(items[0], str):
            stoi = self.vocab.stoi
            items = [stoi.get(p, UNK) for p in items]
        n = len(self.vocab)
        out = []
        for i in items:
            if isinstance(i, bool) or not isinstance(i, int | np.integer):
                raise ValueError(f"ids_or_pieces must hold ints or strings, found {type(i).__name__} {i!r}")
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"ids_or_pieces holds token id {i}, outside the vocabulary [0, {n})")
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(i)
        return self.sp.decode(out)


def _train_tokenizer(sentences: list[str], prefix: Path, *, side: str, source: str, args: dict, threads: int) -> None:
    import sentencepiece as spm

    spm.set_random_generator_seed(args["seed"])
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_prefix=str(prefix),
            vocab_size=args["vocab_size"],
            model_type=args["model_type"],
            character_coverage=args["character_coverage"],
            normalization_rule_name="identity",  # the text is normalised already (normalize_text)
            input_sentence_size=0,  # the sample is drawn already
            num_threads=threads,
            minloglevel=2,  # quiet; an error still comes back as the exception's message
            **_SPECIAL_ARGS,
        )
    except RuntimeError as exc:
        msg = str(exc)
        what = "English" if side == "src" else "French"
        if "Vocabulary size too high" in msg and "<=" in msg:
            most = msg.rsplit("<=", 1)[1].strip(" .")
            raise ValueError(
                f"vocab_size={args['vocab_size']} is too large for the {what} side of {source}: SentencePiece can "
                f"build at most {most} pieces from its {len(sentences)} training sentences; use vocab_size <= {most}"
            ) from exc
        raise ValueError(f"training the {what} tokenizer of {source} (vocab_size={args['vocab_size']}) failed: "
                         f"{msg}") from exc


# ---------------------------------------------------------------------------------------------
# On-disk splits


def _array_names(split: str) -> dict[str, str]:
    return {f"{side}_{kind}": f"{split}_{side}.{kind}" for side in SIDES for kind in ("ids", "offsets")}


class PairMemmap(torch.utils.data.Dataset):
    """One split on disk: item ``i`` is ``(src (S,), tgt_in (T,), tgt_out (T,))`` int64 tensors.

    ``S`` = pieces + 1 (``<eos>``); ``T`` = pieces + 1 (``<bos>`` in front of ``tgt_in``, ``<eos>``
    after ``tgt_out``): the items of :func:`attnlab.data.loaders.encode_pairs`. The memory maps are opened on
    first use in each process (a worker process opens its own; pickling carries only the paths).

    Attributes:
        lengths: ``(N,)`` int32 numpy array, ``S`` of each item (the loaders bucket by it).
        tgt_lengths: ``(N,)`` int32 numpy array, ``T`` of each item.
    """

    def __init__(self, directory: Path, split: str, *, pairs: int, tokens: dict[str, int], dtype: str):
        self.directory, self.split, self.n, self.dtype = Path(directory), split, pairs, np.dtype(dtype)
        self.tokens = dict(tokens)
        self.paths = {k: self.directory / v for k, v in _array_names(split).items()}
        self._maps: dict[str, np.ndarray] | None = None
        self.lengths = self._lengths("src")
        self.tgt_lengths = self._lengths("tgt")

    def _open(self) -> dict[str, np.ndarray]:
        if self._maps is None:
            maps = {}
            for key, path in self.paths.items():
                side, kind = key.split("_")
                dtype, count = (np.int64, self.n + 1) if kind == "offsets" else (self.dtype, self.tokens[side])
                # an empty file cannot be mapped; an empty array reads the same
                # a plain ndarray view: slicing a np.memmap object costs several times more
                maps[key] = np.memmap(path, dtype=dtype, mode="r", shape=(count,)).view(np.ndarray) if count else (
                    np.zeros(0, dtype))
            self._maps = maps
        return self._maps

    def _lengths(self, side: str) -> np.ndarray:
        """Per-item length (pieces + 1), read from the offsets file in chunks (not mapped: reading it whole
        through the map would leave all of it resident); checks the offsets on the way."""
        where = self.paths[f"{side}_offsets"]
        out = np.empty(self.n, dtype=np.int32)
        step, done, prev = 1 << 20, 0, 0
        with open(where, "rb") as f:
            first = np.fromfile(f, dtype=np.int64, count=1)
            if first.size != 1 or first[0] != 0:
                raise RealCorpusError(f"{where}: the offsets must start at 0, found {first.tolist()}")
            while done < self.n:
                block = np.fromfile(f, dtype=np.int64, count=min(step, self.n - done))
                if block.size == 0:
                    raise RealCorpusError(f"{where}: {done + 1} offsets, expected {self.n + 1}")
                d = np.diff(block, prepend=prev)
                if d.min() < 0:
                    raise RealCorpusError(f"{where}: offsets decrease near item {done + int(np.argmin(d))}")
                out[done : done + block.size] = d + 1
                done, prev = done + block.size, int(block[-1])
        if prev != self.tokens[side]:
            raise RealCorpusError(f"{where}: offsets run from 0 to {prev}, expected 0 to {self.tokens[side]}")
        return out

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_maps"] = None
        return state

    def __len__(self) -> int:
        return self.n

    def ids(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The raw piece ids ``(src, tgt)`` of item ``i`` (no specials)."""
        i = int(i)
        if not 0 <= i < self.n:
            raise IndexError(f"item {i} of the {self.split} split, which has {self.n} pairs")
        m = self._open()
        so, to = m["src_offsets"], m["tgt_offsets"]
        return m["src_ids"][so[i] : so[i + 1]], m["tgt_ids"][to[i] : to[i + 1]]

    def __getitem__(self, i) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s, t = self.ids(i)
        src = np.empty(len(s) + 1, dtype=np.int64)  # (S,): pieces <eos>
        src[:-1], src[-1] = s, EOS
        tgt = np.empty(len(t) + 2, dtype=np.int64)  # (T + 1,): <bos> pieces <eos>
        tgt[0], tgt[1:-1], tgt[-1] = BOS, t, EOS
        tgt = torch.from_numpy(tgt)
        return torch.from_numpy(src), tgt[:-1], tgt[1:]  # (S,), (T,), (T,)


class _SplitWriter:
    """Appends encoded pairs of one split to its four files, hashing them on the way."""

    def __init__(self, directory: Path, split: str, dtype: np.dtype):
        self.dtype, self.pairs = dtype, 0
        self.names = _array_names(split)
        self.files = {k: open(directory / v, "wb") for k, v in self.names.items()}
        self.digests = {k: hashlib.sha256() for k in self.names}
        self.tokens = {side: 0 for side in SIDES}
        for side in SIDES:
            self._write(f"{side}_offsets", np.zeros(1, dtype=np.int64))

    def _write(self, key: str, arr: np.ndarray) -> None:
        self.files[key].write(memoryview(arr))
        self.digests[key].update(memoryview(arr))

    def add(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> None:
        for side, seqs in (("src", src), ("tgt", tgt)):
            lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            total = int(lens.sum())
            flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=self.dtype, count=total)
            self._write(f"{side}_ids", flat)
            self._write(f"{side}_offsets", self.tokens[side] + np.cumsum(lens))
            self.tokens[side] += total
        self.pairs += len(src)

    def close(self) -> dict:
        for f in self.files.values():
            f.close()
        return {
            "pairs": self.pairs,
            "tokens": dict(self.tokens),
            "files": {self.names[k]: self.digests[k].hexdigest() for k in self.names},
        }


# ---------------------------------------------------------------------------------------------
# The corpus


@dataclasses.dataclass
class RealCorpus:
    """A prepared corpus: its two tokenizers, three on-disk splits and the manifest (see the module docstring).

    Attributes:
        out_dir: the directory holding every file.
        manifest: the parsed ``realcorpus.json``.
        src_tokenizer, tgt_tokenizer: :class:`SubwordTokenizer` of each side.
        train, valid, test: :class:`PairMemmap` datasets.
    """

    out_dir: Path
    manifest: dict
    src_tokenizer: SubwordTokenizer
    tgt_tokenizer: SubwordTokenizer
    train: PairMemmap
    valid: PairMemmap
    test: PairMemmap

    @property
    def src_vocab(self) -> Vocab:
        """Source :class:`attnlab.data.vocab.Vocab` (its tokens are the English pieces)."""
        return self.src_tokenizer.vocab

    @property
    def tgt_vocab(self) -> Vocab:
        """Target :class:`attnlab.data.vocab.Vocab` (its tokens are the French pieces)."""
        return self.tgt_tokenizer.vocab

    @property
    def files(self) -> dict[str, Path]:
        """Every file this corpus consists of, the manifest included, by name."""
        names = [MANIFEST, *self.manifest["files"]]
        return {n: self.out_dir / n for n in names}

    @property
    def corpus_version(self) -> str:
        """A name for :func:`attnlab.training.checkpoint.save_checkpoint`'s ``corpus_version``: source file, its
        digest, the tokenizers' kind and size, the split seed."""
        src, a = self.manifest["source"], self.manifest["args"]
        return f"tsv:{Path(src['path']).name}:{src['sha256'][:12]}:{a['model_type']}{a['vocab_size']}:seed{a['seed']}"

    def detokenize_src(self, ids_or_pieces) -> str:
        """English text of ids or pieces (see :meth:`SubwordTokenizer.detokenize`)."""
        return self.src_tokenizer.detokenize(ids_or_pieces)

    def detokenize_tgt(self, ids_or_pieces) -> str:
        """French text of ids or pieces (see :meth:`SubwordTokenizer.detokenize`)."""
        return self.tgt_tokenizer.detokenize(ids_or_pieces)

    def held_out(self, split: str = "test") -> list[TsvLine]:
        """The normalised text of the ``valid`` or ``test`` pairs, in the order of the split's items.

        ``lineno`` is the line in ``valid.tsv`` / ``test.tsv``; their third column names the line of the
        source file each pair came from.
        """
        if split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {split!r}")
        return list(iter_tsv(self.out_dir / f"{split}.tsv", columns=(0, 1)))

    def dataloaders(
        self,
        bs: int = 64,
        device: str | torch.device | None = None,
        seed: int = 0,
        *,
        num_workers: int = 0,
        bucketed: bool = True,
    ) -> DataLoaders:
        """fastai ``DataLoaders`` (train, valid) over the memory-mapped splits, as
        :func:`attnlab.data.loaders.make_dataloaders` gives for the synthetic corpus.

        Args:
            bs: batch size (pairs).
            device: where batches go; None picks :func:`attnlab.core.profiles.get_device`.
            seed: seed of the training order (with the epoch: see :func:`bucketed_order`).
            num_workers: worker processes for loading.
            bucketed: False gives plain random training batches (a baseline for
                :func:`attnlab.data.loaders.padding_fraction`).

        Returns:
            ``DataLoaders`` whose batches are ``(src (B, S), tgt_in (B, T), tgt_out (B, T))`` with
            ``n_inp == 2``; valid is longest first, not shuffled; ``dls.train.epoch`` counts complete passes.
        """
        from fastai.data.core import DataLoaders

        check_positive_int("bs", bs)
        check_int("seed", seed)
        check_int("num_workers", num_workers, minimum=0)
        if device is None:

            device = get_device()
        cls = _bucketed_dl()
        common = dict(bs=bs, create_batch=collate, num_workers=num_workers, device=device, seed=seed)
        train = cls(self.train, shuffle=True, bucketed=bucketed, drop_last=False, **common)
        valid = cls(self.valid, shuffle=False, **common)
        return DataLoaders(train, valid, device=device)


def bucketed_order(lengths: np.ndarray, bs: int, rng: np.random.RandomState) -> np.ndarray:
    """fastai ``SortedDL``'s shuffled order, computed with numpy: the same order for the same draws.

    Shuffle every index; put the (first) longest item first; sort pools of ``50 * bs`` consecutive
    indices by falling length (stable); cut into batches of ``bs``; shuffle all batches but the first
    (the longest, so a batch that does not fit in memory shows at once) and the last (the short one).
    ``SortedDL.shuffle_fn`` does the same with Python lists, which is too slow and too big for
    millions of pairs; a test checks that both give the same order.

    Args:
        lengths: ``(N,)`` item lengths.
        bs: batch size.
        rng: the generator (``RandomState``, the draws ``SortedDL`` makes from numpy's global one).

    Returns:
        ``(N,)`` index array (int32 when it fits): consecutive runs of ``bs`` are the batches.
    """
    lengths = np.asarray(lengths)
    n = len(lengths)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    itype = np.int32 if n < 2**31 else np.int64
    idxs = rng.permutation(n).astype(itype)
    j = int(np.flatnonzero(idxs == np.argmax(lengths))[0])
    idxs[0], idxs[j] = idxs[j], idxs[0]
    pool = 50 * bs
    for a in range(0, n, pool):  # a loop over pools keeps the memory at two index arrays
        p = idxs[a : a + pool]
        idxs[a : a + pool] = p[np.argsort(-lengths[p].astype(np.int64), kind="stable")]
    n_batches = math.ceil(n / bs)
    if n_batches > 2:
        middle = idxs[bs : bs * (n_batches - 1)].reshape(n_batches - 2, bs)  # (batches, bs)
        idxs[bs : bs * (n_batches - 1)] = middle[rng.permutation(n_batches - 2)].reshape(-1)
    return idxs


@functools.cache
def _bucketed_dl():
    """The fastai loader class; built on first use (fastai is heavy to import)."""
    from fastai.data.core import TfmdDL

    class BucketedDL(TfmdDL):
        """A fastai ``TfmdDL`` over a :class:`PairMemmap` in :func:`bucketed_order` (shuffled) or longest first.

        The shuffled order depends only on ``(seed, epoch)``; ``epoch`` advances after a complete pass.
        """

        def __init__(self, dataset=None, *, seed: int = 0, bucketed: bool = True, lengths=None, **kwargs):
            self.seed, self.bucketed, self.epoch = seed, bucketed, 0
            self.lengths = np.asarray(dataset.lengths if lengths is None else lengths)
            super().__init__(dataset, **kwargs)

        def new(self, dataset=None, **kwargs):
            lengths = self.lengths if dataset is None else None
            kwargs = {"seed": self.seed, "bucketed": self.bucketed, "lengths": lengths, **kwargs}
            return super().new(dataset=dataset, **kwargs)

        def get_idxs(self):
            if not self.shuffle:
                return np.argsort(-self.lengths.astype(np.int64), kind="stable")
            # the flat layout's module name, kept: it seeds the order of every prepared corpus
            name = f"attnlab.realcorpus/shuffle/{self.seed}/{self.epoch}"
            rng = np.random.RandomState(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))
            if not self.bucketed:
                return rng.permutation(len(self.lengths))
            return bucketed_order(self.lengths, self.bs, rng)

        def after_iter(self):
            super().after_iter()
            self.epoch += 1

    BucketedDL.__qualname__ = "BucketedDL"  # pickled by name: see the module __getattr__
    BucketedDL.__module__ = __name__
    return BucketedDL


def __getattr__(name: str):
    # ``attnlab.data.realcorpus.BucketedDL`` exists, but fastai is only imported when it is first asked for.
    if name == "BucketedDL":
        return _bucketed_dl()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------
# prepare / load


def _key(text: str, salt: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8, key=salt).digest(), "little")


def _source_info(path: Path) -> dict:
    st = path.stat()
    return {"path": str(path.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def _check_args(path, out_dir, vocab_size, valid, test, seed, max_len, model_type, character_coverage, sample) -> dict:
    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    if not isinstance(out_dir, str | Path):
        raise TypeError(f"out_dir must be a str or Path, got {type(out_dir).__name__}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"path: no such corpus file {path}")
    check_int("vocab_size", vocab_size, minimum=len(SPECIALS) + 1)
    if vocab_size > 2**32:
        raise ValueError(f"vocab_size must be <= 2**32, got {vocab_size}")
    check_positive_int("valid", valid)
    check_positive_int("test", test)
    check_int("seed", seed)
    if max_len is not None:
        check_positive_int("max_len", max_len)
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {', '.join(map(repr, MODEL_TYPES))}, got {model_type!r}")
    check_float("character_coverage", character_coverage, strict=True)
    if character_coverage > 1:
        raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage}")
    check_positive_int("sample", sample)
    return dict(vocab_size=vocab_size, valid=valid, test=test, seed=seed, max_len=max_len, model_type=model_type,
                character_coverage=float(character_coverage), sample=sample)


def prepare(
    path: str | Path,
    out_dir: str | Path,
    *,
    vocab_size: int = 8000,
    valid: int = 1000,
    test: int = 1000,
    seed: int = 0,
    max_len: int | None = None,
    model_type: str = "unigram",
    character_coverage: float = 0.9995,
    sample: int = 500_000,
    columns: tuple[int, int] | None = None,
    on_bad_line: str = "skip",
    rebuild: bool = False,
    threads: int | None = None,
) -> RealCorpus:
    """Tokenizers, held-out splits and on-disk token ids for a tab-separated corpus (see the module docstring).

    Args:
        path: the corpus (``English<TAB>French[<TAB>…]`` lines, UTF-8, ``.gz`` allowed; any format
            :func:`attnlab.data.corpus.tsv.iter_tsv` reads).
        out_dir: directory for the tokenizers, arrays and manifest (created; put it beside the checkpoint).
        vocab_size: pieces per side, the four specials included.
        valid: distinct English sentences held out for validation.
        test: distinct English sentences held out for test.
        seed: salts the held-out choice, the tokenizer sample and SentencePiece's sampling.
        max_len: drop pairs with more pieces than this on either side, in every split (None: keep all).
        model_type: ``"unigram"`` or ``"bpe"``.
        character_coverage: share of the sample's characters the tokenizers must cover (SentencePiece's
            option; the rest become ``<unk>``). 1.0 suits a clean English/French corpus.
        sample: most training pairs drawn (uniformly, streamed) to train the tokenizers.
        columns: the English and French columns, as in :func:`~attnlab.data.corpus.tsv.iter_tsv`.
        on_bad_line: ``"skip"`` (default: skipped lines are counted, and listed in one warning) or ``"raise"``.
        rebuild: rebuild even if ``out_dir`` holds this corpus prepared with these arguments (a damaged
            one is rebuilt anyway, with a warning naming the damage).
        threads: CPU threads for SentencePiece (None: :func:`attnlab.core.profiles.train_threads`); the
            pieces do not depend on it.

    Returns:
        The :class:`RealCorpus`, opened with :func:`load`.

    Raises:
        FileNotFoundError: ``path`` is not a file.
        TypeError, ValueError: a bad argument (naming it); a corpus with too few distinct English
            sentences for the held-out splits; a ``vocab_size`` the sample cannot fill.
        ValueError: a bad line with ``on_bad_line="raise"`` (naming ``file:line``).
    """
    args = _check_args(path, out_dir, vocab_size, valid, test, seed, max_len, model_type, character_coverage, sample)
    threads = _threads(threads)
    if on_bad_line not in ("raise", "skip"):
        raise ValueError(f"on_bad_line must be 'raise' or 'skip', got {on_bad_line!r}")
    path, out = Path(path), Path(out_dir)
    args["columns"] = None if columns is None else list(columns)
    iter_tsv(path, columns=columns)  # checks columns now, before any work
    source = _source_info(path)
    manifest_path = out / MANIFEST
    if not rebuild and manifest_path.is_file():
        try:
            old = read_json_object(manifest_path, RealCorpusError)
        except RealCorpusError:
            old = {}
        if old.get("args") == args and {k: old.get("source", {}).get(k) for k in source} == source:
            try:
                return load(out)
            except RealCorpusError as exc:  # the source is at hand: make the directory again
                warnings.warn(f"rebuilding {out}: {exc}", stacklevel=2)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.unlink(missing_ok=True)  # a half-rebuilt directory has no manifest: load refuses it
    salt = f"attnlab.realcorpus/{seed}".encode()  # the flat layout's name, kept: it decides the held-out split
    seconds, cpu_seconds = {}, {}

    # 1. scan: held-out keys (a max-heap of the smallest, negated) and the tokenizer sample
    start, cpu = time.perf_counter(), time.process_time()
    k = valid + test
    heap: list[int] = []
    in_heap: set[int] = set()
    rng = random.Random(seed)
    reservoir: list[tuple[int, str, str]] = []
    skipped: list[str] = []
    seen, more = 0, False
    for line in iter_tsv(path, on_bad_line=on_bad_line, columns=columns, skipped=skipped):
        key = _key(line.en, salt)
        if key not in in_heap:
            if len(heap) < k:
                heapq.heappush(heap, -key)
                in_heap.add(key)
            else:
                more = True  # a (k+1)-th distinct sentence: training will not be empty
                if key < -heap[0]:
                    in_heap.discard(-heapq.heapreplace(heap, -key))
                    in_heap.add(key)
        seen += 1  # reservoir sampling (Vitter's algorithm R) over all good lines
        if len(reservoir) < sample:
            reservoir.append((key, line.en, line.fr))
        else:
            r = rng.randrange(seen)
            if r < sample:
                reservoir[r] = (key, line.en, line.fr)
    if skipped:
        listed = "; ".join(skipped[:10]) + (f"; and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        warnings.warn(f"skipped {len(skipped)} bad line(s): {listed}", stacklevel=2)
    held = sorted(-h for h in heap)
    if not more:
        raise ValueError(f"{path} has {len(held)} distinct English sentences; valid + test = {k} must leave some "
                         "for training")
    split_of = {h: ("valid" if i < valid else "test") for i, h in enumerate(held)}
    sample_pairs = [(en, fr) for key, en, fr in reservoir if key not in split_of]
    del reservoir, heap, in_heap
    seconds["scan"], cpu_seconds["scan"] = time.perf_counter() - start, time.process_time() - cpu

    # 2. tokenizers
    start, cpu = time.perf_counter(), time.process_time()
    for side, col in (("src", 0), ("tgt", 1)):
        _train_tokenizer([p[col] for p in sample_pairs], out / f"tokenizer_{side}", side=side, source=str(path),
                         args=args, threads=threads)
    n_sample = len(sample_pairs)
    del sample_pairs
    toks = {side: SubwordTokenizer(out / f"tokenizer_{side}.model") for side in SIDES}
    seconds["tokenizers"], cpu_seconds["tokenizers"] = time.perf_counter() - start, time.process_time() - cpu

    # 3. encode
    start, cpu = time.perf_counter(), time.process_time()
    dtype = np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
    writers = {split: _SplitWriter(out, split, dtype) for split in SPLITS}
    texts = {split: open(out / f"{split}.tsv", "w", encoding="utf-8") for split in ("valid", "test")}
    emitted: set[int] = set()
    dropped = {"held_out_duplicate": 0, "long": {split: 0 for split in SPLITS}}
    lines = iter_tsv(path, on_bad_line="skip", columns=columns, skipped=[])
    while chunk := list(itertools.islice(lines, _CHUNK)):
        kept, where = [], []
        for line in chunk:
            split = split_of.get(_key(line.en, salt), "train")
            if split != "train":
                if line.en in emitted:  # the held-out split keeps the first pair of each English sentence
                    dropped["held_out_duplicate"] += 1
                    continue
                emitted.add(line.en)
            kept.append(line)
            where.append(split)
        src = toks["src"].sp.encode([p.en for p in kept], num_threads=threads)
        tgt = toks["tgt"].sp.encode([p.fr for p in kept], num_threads=threads)
        by_split = {s: ([], []) for s in SPLITS}
        for line, split, s, t in zip(kept, where, src, tgt, strict=True):
            if max_len is not None and (len(s) > max_len or len(t) > max_len):
                dropped["long"][split] += 1
                continue
            if split != "train":
                texts[split].write(f"{line.en}\t{line.fr}\t{path.name}:{line.lineno}\n")
            by_split[split][0].append(s)
            by_split[split][1].append(t)
        for split, (s, t) in by_split.items():
            if s:
                writers[split].add(s, t)
    for f in texts.values():
        f.close()
    splits = {split: w.close() for split, w in writers.items()}
    seconds["encode"], cpu_seconds["encode"] = time.perf_counter() - start, time.process_time() - cpu
    for split in SPLITS:
        if splits[split]["pairs"] == 0:
            raise ValueError(f"{path}: no {split} pair is left (max_len={max_len} drops them all?)")

    files = {}
    for split in SPLITS:
        for name, digest in splits[split].pop("files").items():
            files[name] = {"bytes": (out / name).stat().st_size, "sha256": digest}
    for name in [f"tokenizer_{s}.{ext}" for s in SIDES for ext in ("model", "vocab")] + ["valid.tsv", "test.tsv"]:
        files[name] = {"bytes": (out / name).stat().st_size, "sha256": _sha256(out / name)}
    manifest = {
        "format": FORMAT,
        "args": args,
        "source": {**source, "sha256": _sha256(path)},
        "dtype": dtype.name,
        "vocab_sizes": {side: len(t) for side, t in toks.items()},
        "lines": {"good": seen, "bad": len(skipped), "dropped": dropped, "tokenizer_sample": n_sample},
        "splits": splits,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},  # wall clock
        "cpu_seconds": {k: round(v, 3) for k, v in cpu_seconds.items()},  # this process (SentencePiece's threads too)
        "files": files,
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, manifest_path)
    return load(out)


_REQUIRED = {"format": str, "args": dict, "source": dict, "dtype": str, "vocab_sizes": dict, "splits": dict,
             "files": dict}


def load(out_dir: str | Path) -> RealCorpus:
    """Open a directory written by :func:`prepare`, checking every file against the manifest.

    Args:
        out_dir: the directory.

    Returns:
        The :class:`RealCorpus`.

    Raises:
        RealCorpusError: no manifest, or a damaged one; a file missing, of the wrong size or with another
            sha256 than recorded (a damaged, truncated or swapped tokenizer or array); a tokenizer without
            the course's special ids; offsets that do not fit their ids; ids outside the vocabulary.
    """
    out = Path(out_dir)
    manifest_path = out / MANIFEST
    if not manifest_path.is_file():
        raise RealCorpusError(f"{out} is not a prepared corpus: no {MANIFEST} (run attnlab.data.realcorpus.prepare)")
    m = read_json_object(manifest_path, RealCorpusError)
    for key, typ in _REQUIRED.items():
        if not isinstance(m.get(key), typ):
            raise RealCorpusError(f"{manifest_path}: {key!r} must be a {typ.__name__}, found {m.get(key)!r:.60}")
    if m["format"] != FORMAT:
        raise RealCorpusError(f"{manifest_path}: format {m['format']!r}, this version reads {FORMAT!r}")
    try:
        dtype = np.dtype(m["dtype"])
    except TypeError as exc:
        raise RealCorpusError(f"{manifest_path}: 'dtype' {m['dtype']!r} is not a numpy dtype") from exc
    expected = {name for split in SPLITS for name in _array_names(split).values()}
    expected |= {f"tokenizer_{side}.model" for side in SIDES} | {"valid.tsv", "test.tsv"}
    unlisted = sorted(expected - m["files"].keys())
    if unlisted:
        hint = "it is damaged; run prepare(..., rebuild=True)"
        raise RealCorpusError(f"{manifest_path} does not list {unlisted}: {hint}")
    top_id = {}  # largest token id in each .ids file, found while hashing it
    for name, rec in m["files"].items():
        f = out / name
        if not f.is_file():
            raise RealCorpusError(f"{f} is missing (listed in {MANIFEST})")
        ok = isinstance(rec, dict) and f.stat().st_size == rec.get("bytes")
        if ok:
            h, top = hashlib.sha256(), 0
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):  # 1 MiB: a whole number of ids
                    h.update(block)
                    if name.endswith(".ids") and len(block) >= dtype.itemsize:
                        top = max(top, int(np.frombuffer(block, dtype=dtype, count=len(block) // dtype.itemsize).max()))
            ok = h.hexdigest() == rec.get("sha256")
            top_id[name] = top
        if not ok:
            raise RealCorpusError(f"{f} does not match the size and sha256 recorded in {MANIFEST}: it is damaged or "
                                  "was replaced; run prepare(..., rebuild=True)")
    toks = {}
    for side in SIDES:
        toks[side] = SubwordTokenizer(out / f"tokenizer_{side}.model")
        if len(toks[side]) != m["vocab_sizes"].get(side):
            raise RealCorpusError(f"{toks[side].path}: {len(toks[side])} pieces, {MANIFEST} says {m['vocab_sizes']}")
    sets = {}
    for split in SPLITS:
        rec = m["splits"].get(split) or {}
        try:
            ds = PairMemmap(out, split, pairs=rec["pairs"], tokens=rec["tokens"], dtype=m["dtype"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RealCorpusError(f"{manifest_path}: split {split!r} cannot be read: {exc}") from exc
        for side in SIDES:
            top = top_id.get(ds.paths[f"{side}_ids"].name, 0)
            if top >= len(toks[side]):
                raise RealCorpusError(f"{ds.paths[f'{side}_ids']}: token id {top} is outside the vocabulary of "
                                      f"{len(toks[side])}")
        sets[split] = ds
    return RealCorpus(out, m, toks["src"], toks["tgt"], sets["train"], sets["valid"], sets["test"])
