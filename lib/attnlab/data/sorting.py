"""Lesson 10's small classic for pointer networks: sort a list of numbers.

An input is ``n`` distinct integers drawn from ``0 .. n_values - 1``; the answer is either the
*positions* of the input in increasing order of value (what a pointer network emits, Vinyals,
Fortunato & Jaitly 2015) or the sorted *values* (what a sequence-to-sequence model with an output
vocabulary must emit). Everything is drawn from ``random.Random(seed)``: same seed, same lists.

* :func:`sorting_examples` -- ``(values, order)`` tuples of lengths in a range;
* :func:`sorting_batches` -- an endless stream of training batches, one length per batch;
* :func:`pointer_batch` -- one batch as tensors for :class:`attnlab.models.pointer_net.PointerNet`
  (inputs scaled to ``[0, 1]``, one feature per element, as the paper feeds its coordinates);
* :func:`sorting_pairs` -- the same lists as :class:`attnlab.data.corpus.Pair` of tokens (``"42"``) for
  the course's seq2seq models and vocabularies;
* :func:`exact_order` -- the share of outputs that are exactly the sorted input.

Shape legend: B batch size, N elements per list, D features per element (1).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.data.corpus import Pair

__all__ = ["N_VALUES", "sorting_examples", "sorting_batches", "pointer_batch", "sorting_pairs", "exact_order"]

N_VALUES = 100  # the values are 0 .. 99: the seq2seq model's output vocabulary


def _check_lengths(lengths, n_values: int) -> tuple[int, int]:
    if not (isinstance(lengths, tuple | list) and len(lengths) == 2):
        raise ValueError(f"lengths must be a pair (shortest, longest), got {lengths!r}")
    lo, hi = (check_positive_int("lengths", v) for v in lengths)
    if lo > hi:
        raise ValueError(f"lengths must be (shortest, longest) with shortest <= longest, got {lengths!r}")
    if hi > n_values:
        raise ValueError(f"lengths: a list of {hi} distinct values needs n_values >= {hi}, got n_values={n_values}")
    return lo, hi


def sorting_examples(
    n: int, *, lengths: tuple[int, int] = (5, 10), n_values: int = N_VALUES, seed: int = 0
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``n`` lists of distinct values with their sorting order.

    Args:
        n: number of lists.
        lengths: ``(shortest, longest)`` list length, both inclusive (drawn uniformly per list).
        n_values: values are drawn from ``0 .. n_values - 1``.
        seed: random seed.

    Returns:
        ``[(values, order)]``: ``order[i]`` is the position of the ``i``-th smallest value.

    Raises:
        ValueError: a negative ``n``, reversed lengths, or lists longer than ``n_values``.
    """
    check_int("n", n, minimum=0)
    check_positive_int("n_values", n_values)
    lo, hi = _check_lengths(lengths, n_values)
    rng = random.Random(f"attnlab.data.sorting/{seed}")
    out = []
    for _ in range(n):
        values = tuple(rng.sample(range(n_values), rng.randint(lo, hi)))
        out.append((values, tuple(sorted(range(len(values)), key=values.__getitem__))))
    return out


def sorting_batches(bs: int, *, lengths: tuple[int, int] = (5, 10), n_values: int = N_VALUES, seed: int = 0):
    """An endless stream of training batches, each of ``bs`` lists of one length (drawn per batch).

    Yields:
        ``(x (B, N, 1), order (B, N))`` as :func:`pointer_batch`; a fresh draw every time (no epochs).
    """
    check_positive_int("bs", bs)
    check_positive_int("n_values", n_values)
    lo, hi = _check_lengths(lengths, n_values)
    rng = random.Random(f"attnlab.data.sorting/train/{seed}")
    while True:
        n = rng.randint(lo, hi)
        examples = []
        for _ in range(bs):
            values = tuple(rng.sample(range(n_values), n))
            examples.append((values, tuple(sorted(range(n), key=values.__getitem__))))
        yield pointer_batch(examples, n_values)


def pointer_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], n_values: int = N_VALUES):
    """Tensors of examples that all have one length: ``x (B, N, 1)`` in ``[0, 1]`` and ``order (B, N)``.

    Raises:
        ValueError: no examples, or examples of different lengths.
    """
    if not examples:
        raise ValueError("examples must not be empty")
    lengths = {len(v) for v, _ in examples}
    if len(lengths) != 1:
        raise ValueError(f"examples of one batch must have one length, got lengths {sorted(lengths)}")
    x = torch.tensor([v for v, _ in examples], dtype=torch.float32) / (n_values - 1)  # (B, N)
    order = torch.tensor([o for _, o in examples], dtype=torch.long)  # (B, N)
    return x.unsqueeze(-1), order  # (B, N, 1), (B, N)


def sorting_pairs(examples: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[Pair]:
    """The examples as token pairs: source = the values (``"42"``), target = the sorted values."""
    return [Pair(tuple(map(str, v)), tuple(str(v[i]) for i in o)) for v, o in examples]


def exact_order(outputs: Sequence[Sequence], answers: Sequence[Sequence]) -> float:
    """The share of ``outputs`` equal to their answer (whole list, every element in place)."""
    if len(outputs) != len(answers):
        raise ValueError(f"outputs and answers must be as many, got {len(outputs)} and {len(answers)}")
    if not answers:
        raise ValueError("answers must not be empty")
    return sum(tuple(o) == tuple(a) for o, a in zip(outputs, answers, strict=True)) / len(answers)
