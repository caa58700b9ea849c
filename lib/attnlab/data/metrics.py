"""Scores of a model's output against the corpus: BLEU and chrF (sacrebleu), exact match, and the
gold-link metrics (alignment agreement, alignment error rate, dropped and repeated source words).

Shape legend
------------
T  target length
S  source length
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import sacrebleu

from attnlab.data.corpus import BUCKET_NAMES, Pair


def _join(tokens) -> str:
    return tokens if isinstance(tokens, str) else " ".join(tokens)


def corpus_bleu(hyps: Sequence, refs: Sequence) -> float:
    """Corpus BLEU (0-100) of tokenised hypotheses against one reference each, via sacrebleu.

    Args:
        hyps: hypotheses, each a token list or an already-joined string.
        refs: references, same length and form.

    Returns:
        BLEU score as a float (sacrebleu's ``.score``).
    """
    if len(hyps) != len(refs):
        raise ValueError(f"hyps and refs must have the same length, got {len(hyps)} and {len(refs)}")
    if not hyps:
        raise ValueError("cannot compute BLEU of an empty corpus")
    bleu = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    return float(bleu.corpus_score([_join(h) for h in hyps], [[_join(r) for r in refs]]).score)


def corpus_chrf(hyps: Sequence, refs: Sequence) -> float:
    """Corpus chrF (0-100) of tokenised hypotheses against one reference each, via sacrebleu.

    Args:
        hyps: hypotheses, each a token list or an already-joined string.
        refs: references, same length and form.

    Returns:
        chrF score as a float (sacrebleu's ``CHRF().corpus_score(...).score``).
    """
    if len(hyps) != len(refs):
        raise ValueError(f"hyps and refs must have the same length, got {len(hyps)} and {len(refs)}")
    if not hyps:
        raise ValueError("cannot compute chrF of an empty corpus")
    chrf = sacrebleu.metrics.CHRF()
    return float(chrf.corpus_score([_join(h) for h in hyps], [[_join(r) for r in refs]]).score)


def exact_match(hyps: Sequence, refs: Sequence) -> float:
    """Share of hypotheses identical to their reference (token for token)."""
    if len(hyps) != len(refs):
        raise ValueError(f"hyps and refs must have the same length, got {len(hyps)} and {len(refs)}")
    if not hyps:
        raise ValueError("cannot compute exact match of an empty corpus")
    return float(np.mean([_join(h) == _join(r) for h, r in zip(hyps, refs, strict=True)]))


def _argmax_links(attns: Sequence[np.ndarray], pairs: Sequence[Pair]):
    """Per pair its ``(T,)`` argmax source positions, after checking the gold and the shapes."""
    if len(attns) != len(pairs):
        raise ValueError(f"attns and pairs must have the same length, got {len(attns)} and {len(pairs)}")
    for k, (a, pair) in enumerate(zip(attns, pairs, strict=True)):
        if pair.align is None or pair.content is None:
            raise ValueError("alignment scores need pairs with gold alignments (generated corpus)")
        want = (len(pair.tgt), len(pair.src))
        if np.shape(a) != want:
            raise ValueError(f"attns[{k}] must have shape (T, S) = {want} for its pair, got {np.shape(a)}")
        yield np.asarray(a).argmax(axis=1), pair


def alignment_agreement(attns: Sequence[np.ndarray], pairs: Sequence[Pair]) -> dict[str, float]:
    """Share of target tokens whose most-attended source position is a gold (sure) aligned position.

    Args:
        attns: per pair a ``(T, S)`` array (e.g. from :func:`forced_attention`).
        pairs: the pairs, with gold ``align`` and ``content`` annotations.

    Returns:
        ``{"align_content": ..., "align_all": ..., "align_function": ...}``; tokens without a sure
        link are skipped (NaN when none is left).
    """
    hits = {"content": [], "function": []}
    for top, pair in _argmax_links(attns, pairs):
        for t, gold in enumerate(pair.align):
            if gold:
                hits["content" if pair.content[t] else "function"].append(int(top[t]) in gold)
    every = hits["content"] + hits["function"]
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")
    return {"align_content": mean(hits["content"]), "align_all": mean(every), "align_function": mean(hits["function"])}


def alignment_error_rate(attns: Sequence[np.ndarray], pairs: Sequence[Pair]) -> float:
    """Corpus alignment error rate of the attention's argmax links (Och & Ney 2003).

    ``AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)``, with the counts summed over the corpus:

    * ``S`` -- the gold sure links ``(t, s)`` (``pair.align``);
    * ``P = S ∪ possible`` -- sure and possible links (``pair.possible``; French has none);
    * ``A`` -- one link per target token, to its most-attended source position, for every target
      token the gold links to something. A token with no gold link at all is left out: attention
      must point somewhere, so its argmax says nothing about the model.

    A target token with several sure links (French "voit" ↔ does, see) can find only one of them,
    so even a perfect argmax has ``AER > 0`` there.

    Args:
        attns: per pair a ``(T, S)`` array (e.g. from :func:`forced_attention`).
        pairs: the pairs, with gold alignments.

    Returns:
        AER in ``[0, 1]``; NaN when there is nothing to score.
    """
    n_a = n_s = a_and_s = a_and_p = 0
    for top, pair in _argmax_links(attns, pairs):
        possible = pair.possible or ((),) * len(pair.align)
        for t, (sure, maybe) in enumerate(zip(pair.align, possible, strict=True)):
            n_s += len(sure)
            if sure or maybe:
                s = int(top[t])
                n_a += 1
                a_and_s += s in sure
                a_and_p += s in sure or s in maybe
    total = n_a + n_s
    return 1.0 - (a_and_s + a_and_p) / total if total else float("nan")


def dropped_repeated(hyp: Sequence[str], pair: Pair) -> tuple[int, int]:
    """Source words the output drops and repeats, judged by the gold links.

    For each source word with a sure link to a *content* target token, take the first such token
    ``w`` of the reference: the word is **dropped** if ``w`` occurs fewer times in the output than
    in the reference, **repeated** if more. Function words (articles, particles) are shared by
    many source words and are not counted.

    Args:
        hyp: the output tokens.
        pair: the pair (reference and gold links).

    Returns:
        ``(dropped, repeated)`` counts for this sentence.
    """
    if pair.align is None or pair.content is None:
        raise ValueError("dropped_repeated needs a pair with gold links and content flags")
    first: dict[int, str] = {}
    for t, links in enumerate(pair.align):
        if pair.content[t]:
            for s in links:
                first.setdefault(s, pair.tgt[t])
    ref, out = Counter(pair.tgt), Counter(hyp)
    dropped = sum(out[w] < ref[w] for w in first.values())
    repeated = sum(out[w] > ref[w] for w in first.values())
    return dropped, repeated


def coverage_errors(hyps: Sequence[Sequence[str]], pairs: Sequence[Pair]) -> dict[str, dict[str, float]]:
    """:func:`dropped_repeated` summed per length bucket.

    Returns:
        ``{bucket: {"dropped": n, "repeated": n, "sentences": n, "per_100_words": x}}`` with
        ``per_100_words`` = (dropped + repeated) per 100 counted source words.
    """
    if len(hyps) != len(pairs):
        raise ValueError(f"hyps and pairs must have the same length, got {len(hyps)} and {len(pairs)}")
    out: dict[str, dict[str, float]] = {}
    words: Counter = Counter()
    for hyp, pair in zip(hyps, pairs, strict=True):
        d, r = dropped_repeated(hyp, pair)
        b = out.setdefault(pair.bucket, {"dropped": 0, "repeated": 0, "sentences": 0})
        b["dropped"] += d
        b["repeated"] += r
        b["sentences"] += 1
        words[pair.bucket] += len({s for t, links in enumerate(pair.align) if pair.content[t] for s in links})
    for name, b in out.items():
        b["per_100_words"] = round(100 * (b["dropped"] + b["repeated"]) / max(words[name], 1), 2)
    return {name: out[name] for name in BUCKET_NAMES if name in out}
