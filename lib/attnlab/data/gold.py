"""Gold word alignments as tensors and counts: the supervision target of supervised attention and
the gold fertility of each source word (from :class:`attnlab.data.corpus.Pair`'s sure links).
"""

from __future__ import annotations

import torch

from attnlab.data.corpus import Pair


def gold_attention(pair: Pair) -> torch.Tensor:
    """The gold attention of one pair: row ``t`` uniform over the sure links of target token ``t``.

    Returns:
        ``(T + 1, S + 1)`` float tensor (the extra row and column are ``<eos>``, left at zero;
        so is the row of a target token without a sure link).

    Raises:
        ValueError: the pair has no gold links.
    """
    if pair.align is None:
        raise ValueError("gold_attention needs a pair with gold links (pair.align is None)")
    gold = torch.zeros(len(pair.tgt) + 1, len(pair.src) + 1)  # (T+1, S+1)
    for t, links in enumerate(pair.align):
        if links:
            gold[t, list(links)] = 1.0 / len(links)
    return gold


def gold_fertility(pair: Pair, *, possible: bool = False) -> list[int]:
    """Per source word, the number of target tokens that have a sure link to it (its gold fertility).

    What a ``fertility=N`` model's :meth:`attnlab.models.rnn.Seq2SeqRNN.predicted_fertility` estimates.

    Args:
        pair: a pair with gold links.
        possible: also count the possible links (a Korean particle's link to its noun): the
            tokens an attention that follows every link spends on the word.

    Returns:
        ``len(pair.src)`` counts (``<eos>`` not included).
    """
    if pair.align is None:
        raise ValueError("gold_fertility needs a pair with gold links (pair.align is None)")
    fert = [0] * len(pair.src)
    rows = [set(a) | set(p) for a, p in zip(pair.align, pair.possible or [()] * len(pair.align), strict=True)]
    for t, links in enumerate(pair.align):
        for s in rows[t] if possible else links:
            fert[s] += 1
    return fert
