"""A generated 1-D "speech" signal: short words spelled as tone bursts, with gold frame spans.

The toy behind lesson 13's Listen-Attend-Spell-style section (Chan et al. 2016, "Listen, Attend and
Spell"). Each letter of a small alphabet (:data:`ALPHABET`) has its own frequency
(:data:`FREQUENCIES`); a word is rendered as one sinusoidal burst per letter -- random amplitude,
phase and a small frequency jitter, a duration of a few frames -- with short silences between
letters (so "aa" is two bursts, not one long one) and Gaussian noise everywhere. Durations are
whole frames, so the frames each letter occupies (its **gold span**) are known exactly.

The features are what a speech front end would compute, in miniature: the signal is cut into
frames of :data:`FRAME_LEN` samples, each frame is windowed (Hann) and turned into its log power
spectrum (:data:`N_BINS` bins), and one last channel is 1.0 on every real frame. Padding frames
are all zeros, so a batch carries its own mask (:func:`frame_mask`): a transcriber called with
``encode(frames)`` alone (the decoding protocol) knows where each signal ends.

Everything is driven by one seed: same seed, same words, same samples, on any machine.

Shape legend
------------
B  batch size
N  number of samples of a signal
S  number of frames (``N / FRAME_LEN``)
F  features per frame (:data:`N_FEATURES` = ``N_BINS`` spectrum bins + the frame flag)
T  target length (letters + 1: ``<bos>`` in front for the decoder input, ``<eos>`` at the end
   for the decoder output)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from attnlab.core.checks import check_float_tensor, check_int, check_positive_int, check_right_padded
from attnlab.core.profiles import get_device
from attnlab.data import loaders
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, Vocab

__all__ = [
    "SIGNAL_VERSION",
    "ALPHABET",
    "FRAME_LEN",
    "FREQUENCIES",
    "N_BINS",
    "N_FEATURES",
    "WORD_BUCKETS",
    "WORD_BUCKET_NAMES",
    "MIN_WORD_LEN",
    "MAX_WORD_LEN",
    "Utterance",
    "SignalSplits",
    "word_bucket",
    "render",
    "frame_features",
    "generate_utterances",
    "make_signal_splits",
    "char_vocab",
    "encode_utterances",
    "collate_signals",
    "frame_mask",
    "make_signal_dataloaders",
]

SIGNAL_VERSION = "signal-words-1"  # bump when a change alters the generated signals
ALPHABET = "abcdefgh"
FRAME_LEN = 32  # samples per frame
N_BINS = FRAME_LEN // 2 + 1  # rfft bins of one frame
N_FEATURES = N_BINS + 1  # + the "real frame" flag
#: Cycles per sample of each letter: 1.8 bins apart, clear of DC and of the Nyquist bin.
FREQUENCIES: dict[str, float] = {c: (1.5 + 1.8 * i) / FRAME_LEN for i, c in enumerate(ALPHABET)}
MIN_WORD_LEN, MAX_WORD_LEN = 2, 6
WORD_BUCKETS: tuple[tuple[int, int], ...] = ((2, 3), (4, 4), (5, 6))
WORD_BUCKET_NAMES = tuple(f"{lo}-{hi}" for lo, hi in WORD_BUCKETS)

_LETTER_FRAMES = (2, 5)  # inclusive range of a burst's duration, in frames
_GAP_FRAMES = (1, 2)  # silence between two letters
_EDGE_FRAMES = (0, 2)  # silence before the first and after the last letter
_AMPLITUDE = (0.5, 1.0)
_NOISE = (0.05, 0.25)  # standard deviation of the background noise, drawn per word
_JITTER = 0.25 / FRAME_LEN  # largest frequency deviation of a burst (a quarter of a bin)
_RAMP = 4  # samples of raised-cosine fade in and out (no click at a burst's edges)
# Log-power normalisation: centres the features near 0 with a spread near 1 (fixed constants, so
# a frame's features never depend on the rest of its batch).
_LOG_FLOOR, _LOG_SHIFT, _LOG_SCALE = 1e-4, 2.0, 1.5
_WINDOW = np.hanning(FRAME_LEN + 2)[1:-1]  # Hann without its zero end points


def word_bucket(n_letters: int) -> str:
    """Name of the word-length bucket (:data:`WORD_BUCKET_NAMES`) of a word of ``n_letters``.

    Raises:
        ValueError: a length outside every bucket.
    """
    n = check_int("n_letters", n_letters)
    for lo, hi in WORD_BUCKETS:
        if lo <= n <= hi:
            return f"{lo}-{hi}"
    raise ValueError(f"a word of {n} letters falls outside all buckets {WORD_BUCKETS}")


@dataclass(frozen=True, eq=False)
class Utterance:
    """One rendered word.

    Attributes:
        word: the letters, from :data:`ALPHABET`.
        samples: ``(N,)`` float32 signal, ``N = n_frames * FRAME_LEN``.
        spans: per letter ``(start, end)``: the frames ``start <= s < end`` its burst fills.
    """

    word: str
    samples: np.ndarray = field(repr=False)
    spans: tuple[tuple[int, int], ...]

    @property
    def n_frames(self) -> int:
        """``S``, the number of frames."""
        return len(self.samples) // FRAME_LEN

    @property
    def bucket(self) -> str:
        """Word-length bucket name."""
        return word_bucket(len(self.word))


@dataclass(frozen=True)
class SignalSplits:
    """Train / valid / test utterances; no word is in two of them."""

    train: list[Utterance]
    valid: list[Utterance]
    test: list[Utterance]


def _check_word(word) -> str:
    if not isinstance(word, str):
        raise TypeError(f"word must be a str, got {type(word).__name__}")
    if not MIN_WORD_LEN <= len(word) <= MAX_WORD_LEN:
        raise ValueError(f"word must have {MIN_WORD_LEN}-{MAX_WORD_LEN} letters, got {len(word)} ({word!r})")
    bad = sorted(set(word) - set(ALPHABET))
    if bad:
        raise ValueError(f"word {word!r} has letters {bad} outside the alphabet {ALPHABET!r}")
    return word


def render(word: str, rng: random.Random) -> Utterance:
    """Render ``word`` as tone bursts in noise, drawing every random choice from ``rng``.

    Args:
        word: 2-6 letters of :data:`ALPHABET`.
        rng: the random stream (the durations, amplitudes, phases, jitter and noise come from it).

    Returns:
        An :class:`Utterance` whose ``spans`` are the burst frames of each letter.

    Raises:
        TypeError, ValueError: ``word`` is not a str of 2-6 letters of the alphabet, or ``rng``
            is not a ``random.Random``.
    """
    _check_word(word)
    if not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random, got {type(rng).__name__}")
    frame = rng.randint(*_EDGE_FRAMES)
    spans = []
    for i in range(len(word)):
        if i:
            frame += rng.randint(*_GAP_FRAMES)
        n = rng.randint(*_LETTER_FRAMES)
        spans.append((frame, frame + n))
        frame += n
    n_frames = frame + rng.randint(*_EDGE_FRAMES)
    # numpy's generator is seeded from the Python stream, so one seed fixes the whole utterance.
    np_rng = np.random.default_rng(rng.getrandbits(64))
    samples = np_rng.normal(0.0, rng.uniform(*_NOISE), n_frames * FRAME_LEN)  # (N,)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(_RAMP) / _RAMP)  # (_RAMP,)
    for letter, (start, end) in zip(word, spans, strict=True):
        n = (end - start) * FRAME_LEN
        f = FREQUENCIES[letter] + rng.uniform(-_JITTER, _JITTER)
        t = np.arange(n)  # (n,)
        burst = rng.uniform(*_AMPLITUDE) * np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi))  # (n,)
        burst[:_RAMP] *= ramp
        burst[-_RAMP:] *= ramp[::-1]
        samples[start * FRAME_LEN : end * FRAME_LEN] += burst
    return Utterance(word, samples.astype(np.float32), tuple(spans))


def frame_features(samples: np.ndarray) -> np.ndarray:
    """Log power spectrum of each frame, plus the frame flag.

    Args:
        samples: ``(N,)`` signal, ``N`` a positive multiple of :data:`FRAME_LEN`.

    Returns:
        ``(S, F)`` float32: ``F - 1`` normalised log-power bins (Hann window), then 1.0.

    Raises:
        TypeError, ValueError: not a 1-D float array of whole frames.
    """
    if not isinstance(samples, np.ndarray) or samples.ndim != 1 or not np.issubdtype(samples.dtype, np.floating):
        got = f"{samples.dtype} {samples.shape}" if isinstance(samples, np.ndarray) else type(samples).__name__
        raise TypeError(f"samples must be a 1-D float numpy array (N,), got {got}")
    if len(samples) == 0 or len(samples) % FRAME_LEN:
        raise ValueError(f"samples must be a positive whole number of {FRAME_LEN}-sample frames, got N={len(samples)}")
    frames = samples.reshape(-1, FRAME_LEN) * _WINDOW  # (S, FRAME_LEN)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2 / FRAME_LEN  # (S, N_BINS)
    logp = (np.log10(power + _LOG_FLOOR) + _LOG_SHIFT) / _LOG_SCALE  # (S, N_BINS)
    flag = np.ones((len(frames), 1))  # (S, 1)
    return np.concatenate([logp, flag], axis=1).astype(np.float32)  # (S, F)


def _draw_word(rng: random.Random, buckets: Sequence[tuple[int, int]]) -> str:
    lo, hi = buckets[rng.randrange(len(buckets))]
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))


def _check_buckets(buckets) -> tuple[tuple[int, int], ...]:
    out = tuple(tuple(b) for b in buckets)
    for b in out:
        if len(b) != 2 or not (MIN_WORD_LEN <= b[0] <= b[1] <= MAX_WORD_LEN):
            raise ValueError(f"each bucket must be (lo, hi) with {MIN_WORD_LEN} <= lo <= hi <= {MAX_WORD_LEN}, got {b}")
    if not out:
        raise ValueError("buckets must not be empty")
    return out


def generate_utterances(
    n: int, seed: int = 0, *, buckets: Sequence[tuple[int, int]] = WORD_BUCKETS, exclude: frozenset[str] = frozenset()
) -> list[Utterance]:
    """``n`` rendered words: a bucket drawn uniformly, then a length inside it, then the letters.

    Args:
        n: number of utterances (>= 0).
        seed: the seed of the whole list.
        buckets: ``(lo, hi)`` word-length ranges (inclusive).
        exclude: words never drawn (those of another split).

    Returns:
        The utterances; a word may repeat (each time rendered differently).
    """
    n = check_int("n", n, minimum=0)
    seed = check_int("seed", seed)
    buckets = _check_buckets(buckets)
    rng = random.Random(f"attnlab.signals/{seed}")
    out = []
    while len(out) < n:
        word = _draw_word(rng, buckets)
        if word not in exclude:
            out.append(render(word, rng))
    return out


def make_signal_splits(n_train: int = 3000, n_valid: int = 300, n_test: int = 300, seed: int = 0) -> SignalSplits:
    """Train / valid / test utterances with disjoint words; the test split stratified by word bucket.

    The test words are drawn first, an equal share from each bucket of :data:`WORD_BUCKETS`
    (``n_test`` a multiple of their number), all different; the valid words then avoid them, and
    the training words avoid both. Train and valid follow the uniform bucket draw of
    :func:`generate_utterances`.

    Args:
        n_train, n_valid: sizes (>= 1).
        n_test: size, a positive multiple of ``len(WORD_BUCKETS)``.
        seed: seed of all three splits.

    Raises:
        ValueError: a size below 1, or ``n_test`` not a multiple of the number of buckets.
    """
    n_train = check_positive_int("n_train", n_train)
    n_valid = check_positive_int("n_valid", n_valid)
    n_test = check_positive_int("n_test", n_test)
    seed = check_int("seed", seed)
    k = len(WORD_BUCKETS)
    if n_test % k:
        raise ValueError(f"n_test must be a multiple of the {k} word buckets (a stratified test split), got {n_test}")
    rng = random.Random(f"attnlab.signals/test/{seed}")
    test, words = [], set()
    for bucket in WORD_BUCKETS:
        drawn = 0
        while drawn < n_test // k:
            word = _draw_word(rng, (bucket,))
            if word not in words:
                words.add(word)
                test.append(render(word, rng))
                drawn += 1
    valid = generate_utterances(n_valid, seed * 2 + 1, exclude=frozenset(words))
    held = frozenset(words | {u.word for u in valid})
    train = generate_utterances(n_train, seed * 2 + 2, exclude=held)
    return SignalSplits(train, valid, test)


def char_vocab() -> Vocab:
    """The target vocabulary: the four specials, then the letters of :data:`ALPHABET` in order."""
    return Vocab(list(SPECIALS) + list(ALPHABET))


def encode_utterances(
    utterances: Sequence[Utterance], vocab: Vocab | None = None
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per utterance ``(frames (S, F) float32, tgt_in (T,), tgt_out (T,))``.

    ``tgt_in`` is ``<bos>`` + letters, ``tgt_out`` letters + ``<eos>`` (as :func:`attnlab.data.loaders.encode_pairs`).

    Args:
        utterances: the utterances.
        vocab: the letter vocabulary (default :func:`char_vocab`).
    """
    vocab = char_vocab() if vocab is None else vocab
    items = []
    for u in utterances:
        ids = vocab.encode(list(u.word), eos=False)
        frames = torch.from_numpy(frame_features(u.samples))  # (S, F)
        items.append((frames, torch.tensor([BOS, *ids]), torch.tensor([*ids, EOS])))  # (S, F), (T,), (T,)
    return items


def collate_signals(items: Sequence[tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
    """Pad ``(frames, tgt_in, tgt_out)`` items into a batch.

    Returns:
        ``frames (B, S, F)`` zero-padded after each signal (the frame flag is 0 there, see
        :func:`frame_mask`), ``tgt_in (B, T)`` and ``tgt_out (B, T)`` padded with ``PAD``.
    """
    pad_seq = torch.nn.utils.rnn.pad_sequence
    frames = pad_seq([it[0] for it in items], batch_first=True, padding_value=0.0)  # (B, S, F)
    tgt_in = pad_seq([it[1] for it in items], batch_first=True, padding_value=PAD)  # (B, T)
    tgt_out = pad_seq([it[2] for it in items], batch_first=True, padding_value=PAD)  # (B, T)
    return frames, tgt_in, tgt_out


def frame_mask(frames: torch.Tensor) -> torch.Tensor:
    """The ``(B, S)`` bool mask of real frames (True = takes part), read from the frame flag.

    Args:
        frames: ``(B, S, F)`` float features from :func:`collate_signals` (flag last: 1.0 on real
            frames, 0.0 on padding).

    Raises:
        TypeError: not a float tensor.
        ValueError: not 3-D with ``F = N_FEATURES``, a flag other than 0/1, padding before a real
            frame, or a row without any real frame.
    """
    check_float_tensor("frames", frames, dims=3, shape_text=f"(B, S, F={N_FEATURES})")
    if frames.size(2) != N_FEATURES:
        raise ValueError(f"frames must be (B, S, F={N_FEATURES}), got shape {tuple(frames.shape)}")
    flag = frames[..., -1]  # (B, S)
    if not bool(((flag == 0) | (flag == 1)).all()):
        raise ValueError("frames' last feature is the frame flag and must be 1.0 (real frame) or 0.0 (padding)")
    check_right_padded("frames (frame flag)", flag, 0.0)
    return flag == 1  # (B, S)


def make_signal_dataloaders(
    splits: SignalSplits,
    vocab: Vocab | None = None,
    *,
    bs: int = 64,
    device: str | torch.device | None = None,
    seed: int = 0,
):
    """fastai ``DataLoaders`` of ``(frames (B, S, F), tgt_in (B, T), tgt_out (B, T))`` batches.

    The same loaders as :func:`attnlab.data.loaders.make_dataloaders` with float sources: train batches
    of similar length in an order fixed by ``seed`` (``attnlab.data.loaders.SeededSortedDL``), valid
    longest first; ``n_inp == 2``, so a ``Learner`` calls ``model(frames, tgt_in)``.

    Args:
        splits: the utterances (``test`` is not used).
        vocab: letter vocabulary (default :func:`char_vocab`).
        bs: batch size.
        device: where batches go (None: :func:`attnlab.core.profiles.get_device`).
        seed: seed of the training order.
    """
    from fastai.data.core import DataLoaders
    from fastai.text.data import SortedDL

    if device is None:

        device = get_device()
    bs = check_positive_int("bs", bs)
    train = encode_utterances(splits.train, vocab)
    valid = encode_utterances(splits.valid, vocab)
    common = dict(bs=bs, create_batch=collate_signals, num_workers=0, device=device)
    train_dl = loaders.SeededSortedDL(
        train, res=[len(t[0]) for t in train], shuffle=True, drop_last=False, seed=check_int("seed", seed), **common
    )
    valid_dl = SortedDL(valid, res=[len(t[0]) for t in valid], shuffle=False, **common)
    return DataLoaders(train_dl, valid_dl, device=device)
