"""Lesson 10's measures of copying, scored against the gold copies of :class:`~attnlab.data.corpus.copying.CopyPair`.

* :func:`copy_accuracy` -- share of the copied words (names, numbers) the output reproduces verbatim;
* :func:`unknown_fate` -- per sentence, what a model without copying made of an unknown name or number;
* :func:`pointer_accuracy` -- share of copied words whose copy distribution peaks on the gold source word
  (all of them, or only the names right after a title);
* :func:`p_gen_means` -- mean generation probability at copied and at other target positions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from attnlab.data.corpus.copying import TITLES, CopyPair
from attnlab.data.vocab import SPECIALS, UNK

__all__ = ["copy_accuracy", "unknown_fate", "FATES", "pointer_accuracy", "p_gen_means", "after_title"]

FATES = ("<unk>", "known word", "dropped", "copied")


def _check(seq_a, pairs, name: str) -> None:
    if len(seq_a) != len(pairs):
        raise ValueError(f"{name} and pairs must have the same length, got {len(seq_a)} and {len(pairs)}")
    for p in pairs:
        if not isinstance(p, CopyPair):
            raise TypeError(f"pairs must be CopyPair (attnlab.data.corpus.copying), got {type(p).__name__}")


def copy_accuracy(hyps: Sequence[Sequence[str]], pairs: Sequence[CopyPair]) -> dict[str, float]:
    """Share of copied reference words that the hypothesis holds verbatim (clipped counts, as BLEU's unigrams).

    Returns:
        ``{"all", "name", "number"}`` shares (NaN where the pairs have none) and ``"sentences"``: the share
        of sentences whose every copied word is there.
    """
    _check(hyps, pairs, "hyps")
    hit: dict[str, list[int]] = {"name": [0, 0], "number": [0, 0]}
    whole = []
    for hyp, p in zip(hyps, pairs, strict=True):
        have = Counter(hyp)
        ok = True
        for t, _, kind in p.copies:
            word = p.tgt[t]
            got = have[word] > 0
            have[word] -= got
            hit[kind][0] += got
            hit[kind][1] += 1
            ok &= got
        whole.append(ok)
    share = lambda h, n: h / n if n else float("nan")
    out = {k: share(*v) for k, v in hit.items()}
    out["all"] = share(hit["name"][0] + hit["number"][0], hit["name"][1] + hit["number"][1])
    out["sentences"] = float(np.mean(whole)) if whole else float("nan")
    return out


def unknown_fate(
    hyps: Sequence[Sequence[str]], attns: Sequence[np.ndarray], pairs: Sequence[CopyPair]
) -> dict[str, int]:
    """What each sentence's first copied word became in an output, judged by the attention that produced it.

    The output tokens whose attention peak is on the copied word's source position are what the model
    wrote for it: the word itself (``"copied"``), ``<unk>``, another (known) word, or nothing
    (``"dropped"``). One verdict per sentence, in the order of :data:`FATES`: ``copied`` if the word is
    in the output at all, else ``<unk>`` if a token pointing at it is ``<unk>``, else ``known word`` if
    any token points at it, else ``dropped``.

    Args:
        hyps: the outputs (token lists).
        attns: per output its ``(T', S)`` attention (``S`` may count ``<eos>``).
        pairs: the copy pairs (each with at least one copy).

    Returns:
        ``{fate: number of sentences}`` for every fate of :data:`FATES`.
    """
    _check(hyps, pairs, "hyps")
    _check(attns, pairs, "attns")
    counts = dict.fromkeys(FATES, 0)
    for hyp, attn, p in zip(hyps, attns, pairs, strict=True):
        if not p.copies:
            raise ValueError("unknown_fate needs pairs with at least one copied word")
        t, j, _ = p.copies[0]
        if p.tgt[t] in hyp:
            counts["copied"] += 1
            continue
        attn = np.asarray(attn)
        peaks = attn[: len(hyp)].argmax(axis=1) if len(hyp) else np.zeros(0, dtype=int)
        there = [w for w, k in zip(hyp, peaks, strict=True) if int(k) == j]
        if SPECIALS[UNK] in there:
            counts["<unk>"] += 1
        elif there:
            counts["known word"] += 1
        else:
            counts["dropped"] += 1
    return counts


def after_title(p: CopyPair, j: int) -> bool:
    """True when source word ``j`` follows a title (Mr./Mrs./Dr.)."""
    return j > 0 and p.src[j - 1] in TITLES


def pointer_accuracy(
    copy_attns: Sequence[np.ndarray], pairs: Sequence[CopyPair], *, kind: str | None = None, titled: bool | None = None
) -> float:
    """Share of copied target words whose copy distribution (teacher-forced) peaks on their gold source word.

    Args:
        copy_attns: per pair a ``(T, S')`` array, ``S' >= len(src)`` (``<eos>`` may be counted), rows in
            target order (the gold target fed in).
        pairs: the copy pairs.
        kind: only ``"name"`` or ``"number"`` copies (None: both).
        titled: only names right after a title (True), only words not after one (False), or all (None).

    Returns:
        The share (NaN when nothing is left to score).
    """
    _check(copy_attns, pairs, "copy_attns")
    if kind not in (None, "name", "number"):
        raise ValueError(f"kind must be None, 'name' or 'number', got {kind!r}")
    hits = []
    for a, p in zip(copy_attns, pairs, strict=True):
        a = np.asarray(a)
        if a.ndim != 2 or a.shape[0] < len(p.tgt) or a.shape[1] < len(p.src):
            raise ValueError(f"copy_attns must be (T, S) with T >= {len(p.tgt)}, S >= {len(p.src)}, got {a.shape}")
        for t, j, k in p.copies:
            if kind is not None and k != kind:
                continue
            if titled is not None and after_title(p, j) != titled:
                continue
            hits.append(int(a[t].argmax()) == j)
    return float(np.mean(hits)) if hits else float("nan")


def p_gen_means(p_gens: Sequence[np.ndarray], pairs: Sequence[CopyPair]) -> dict[str, float]:
    """Mean ``p_gen`` (teacher-forced) at the copied target words and at the other target words.

    Args:
        p_gens: per pair a ``(T',)`` array, ``T' >= len(tgt)`` (rows in target order).
        pairs: the copy pairs.

    Returns:
        ``{"copied": mean, "other": mean}``.
    """
    _check(p_gens, pairs, "p_gens")
    copied, other = [], []
    for g, p in zip(p_gens, pairs, strict=True):
        g = np.asarray(g)
        if g.ndim != 1 or g.shape[0] < len(p.tgt):
            raise ValueError(f"p_gens must be (T,) with T >= {len(p.tgt)}, got {g.shape}")
        at = {t for t, _, _ in p.copies}
        for t in range(len(p.tgt)):
            (copied if t in at else other).append(float(g[t]))
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")
    return {"copied": mean(copied), "other": mean(other)}
