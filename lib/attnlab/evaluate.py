"""Evaluation: translate a test split, score it, and keep the results in ``data/results``.

Metrics
-------
* corpus **BLEU** from ``sacrebleu`` (never hand-written), on our already-tokenised text
  (``tokenize="none"``), 0-100;
* **exact match**: share of sentences translated exactly right;
* both overall and per source-length bucket (``1-10`` ... ``31-40``);
* **alignment agreement**: with the gold target prefix fed in (teacher forcing), the share of
  target tokens whose highest attention weight falls on one of their gold source positions, for
  content words (``align_content``) and all tokens (``align_all``).

``python -m attnlab.evaluate CHECKPOINT [--seed S] [--per-bucket N]`` evaluates a checkpoint on
a freshly generated test split and prints the metrics as JSON.

Shape legend
------------
B  batch size
S  source length
T  target length
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import numpy as np
import sacrebleu
import torch

from .data import BUCKET_NAMES, CORPUS_VERSION, EOS, PAD, Pair, Vocab, bucket_name, collate, encode_pairs
from .decoding import beam_search

__all__ = [
    "corpus_bleu",
    "exact_match",
    "translate",
    "alignment_agreement",
    "evaluate_model",
    "count_params",
]


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


def exact_match(hyps: Sequence, refs: Sequence) -> float:
    """Share of hypotheses identical to their reference (token for token)."""
    if len(hyps) != len(refs):
        raise ValueError(f"hyps and refs must have the same length, got {len(hyps)} and {len(refs)}")
    if not hyps:
        raise ValueError("cannot compute exact match of an empty corpus")
    return float(np.mean([_join(h) == _join(r) for h, r in zip(hyps, refs)]))


def count_params(model: torch.nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _batches(n: int, lengths: Sequence[int], bs: int):
    order = sorted(range(n), key=lambda i: lengths[i])  # similar lengths together: less padding
    for i in range(0, n, bs):
        yield order[i : i + bs]


def _device_of(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def translate(
    model,
    sources: Sequence[Sequence[str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    bs: int = 250,
    max_len: int | None = None,
) -> tuple[list[list[str]], list[np.ndarray | None], float]:
    """Translate tokenised sentences (batched, length-sorted).

    Args:
        model: a model implementing the decoding protocol (:mod:`attnlab.decoding`).
        sources: source token lists (without ``<eos>``; it is added).
        src_vocab, tgt_vocab: vocabularies.
        beam: beam width (1 = greedy).
        bs: sentences per batch.
        max_len: most target tokens; default ``2 * S + 10`` per batch.

    Returns:
        ``(hypotheses, attentions, seconds)``: token lists, per sentence a ``(T', S)`` array of
        attention weights (``None`` without attention; ``S`` counts the ``<eos>``), wall time.
    """
    device = _device_of(model)
    ids = [torch.tensor(src_vocab.encode(s, eos=True), dtype=torch.long) for s in sources]
    hyps: list[list[str] | None] = [None] * len(ids)
    attns: list[np.ndarray | None] = [None] * len(ids)
    start = time.perf_counter()
    for idx in _batches(len(ids), [len(x) for x in ids], bs):
        batch = [ids[i] for i in idx]
        src = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=PAD).to(device)  # (B, S)
        limit = max_len or 2 * src.size(1) + 10
        out = beam_search(model, src, beam=beam, max_len=limit)
        for row, i in enumerate(idx):
            n = int(out.lengths[row])
            toks = out.tokens[row, :n].tolist()
            if toks and toks[-1] == EOS:
                toks = toks[:-1]
            hyps[i] = tgt_vocab.decode(toks, strip=True)
            if out.attn is not None:
                attns[i] = out.attn[row, :n, : len(batch[row])].float().cpu().numpy()
    return hyps, attns, time.perf_counter() - start


@torch.no_grad()
def forced_attention(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, bs: int = 250):
    """Attention weights with the gold target fed in; ``None`` for a model without attention.

    Returns:
        list of ``(T, S)`` arrays: ``T`` = target tokens (no ``<eos>``), ``S`` = source tokens
        (no ``<eos>``), in the order of ``pairs``.
    """
    device = _device_of(model)
    was_training = model.training
    model.eval()
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    out: list[np.ndarray | None] = [None] * len(items)
    try:
        for idx in _batches(len(items), [len(it[0]) for it in items], bs):
            src, tgt_in, _ = collate([items[i] for i in idx])
            _, attn = model(src.to(device), tgt_in.to(device), return_attention=True)
            if attn is None:
                return None
            for row, i in enumerate(idx):
                out[i] = attn[row, : len(pairs[i].tgt), : len(pairs[i].src)].float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


def alignment_agreement(attns: Sequence[np.ndarray], pairs: Sequence[Pair]) -> dict[str, float]:
    """Share of target tokens whose most-attended source position is a gold aligned position.

    Args:
        attns: per pair a ``(T, S)`` array (e.g. from :func:`forced_attention`).
        pairs: the pairs, with gold ``align`` and ``content`` annotations.

    Returns:
        ``{"align_content": ..., "align_all": ..., "align_function": ...}``; tokens without a gold
        alignment are skipped.
    """
    hits = {"content": [], "function": []}
    for a, pair in zip(attns, pairs):
        if pair.align is None or pair.content is None:
            raise ValueError("alignment agreement needs pairs with gold alignments (generated corpus)")
        top = a.argmax(axis=1)
        for t, gold in enumerate(pair.align):
            if gold:
                hits["content" if pair.content[t] else "function"].append(int(top[t]) in gold)
    every = hits["content"] + hits["function"]
    mean = lambda xs: float(np.mean(xs)) if xs else float("nan")
    return {"align_content": mean(hits["content"]), "align_all": mean(every), "align_function": mean(hits["function"])}


def evaluate_model(
    model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, *, beam: int = 1, bs: int = 250
) -> dict:
    """Translate ``pairs`` and compute every course metric.

    Returns:
        dict with ``bleu``, ``exact_match``, ``by_bucket`` (``{bucket: {"bleu", "exact_match", "n"}}``),
        ``align_content``/``align_all``/``align_function`` (models with attention), ``params``,
        ``decode_seconds``, ``sentences_per_second``, ``n_test``, ``beam``, ``corpus_version``.
    """
    hyps, _, seconds = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab, beam=beam, bs=bs)
    refs = [list(p.tgt) for p in pairs]
    res: dict = {
        "bleu": round(corpus_bleu(hyps, refs), 2),
        "exact_match": round(exact_match(hyps, refs), 4),
        "by_bucket": {},
    }
    buckets = [bucket_name(len(p.src)) for p in pairs]
    for name in BUCKET_NAMES:
        sel = [i for i, b in enumerate(buckets) if b == name]
        if sel:
            res["by_bucket"][name] = {
                "bleu": round(corpus_bleu([hyps[i] for i in sel], [refs[i] for i in sel]), 2),
                "exact_match": round(exact_match([hyps[i] for i in sel], [refs[i] for i in sel]), 4),
                "n": len(sel),
            }
    if all(p.align is not None for p in pairs):
        attns = forced_attention(model, pairs, src_vocab, tgt_vocab, bs=bs)
        if attns is not None:
            res.update({k: round(v, 4) for k, v in alignment_agreement(attns, pairs).items()})
    res.update(
        params=count_params(model),
        decode_seconds=round(seconds, 3),
        sentences_per_second=round(len(pairs) / max(seconds, 1e-9), 1),
        n_test=len(pairs),
        beam=beam,
        corpus_version=CORPUS_VERSION,
    )
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: evaluate a checkpoint on a freshly generated, seeded test split; print JSON."""
    from .checkpoint import load_checkpoint
    from .data import make_test_split

    ap = argparse.ArgumentParser(prog="python -m attnlab.evaluate", description=main.__doc__)
    ap.add_argument("checkpoint", help="name under data/checkpoints or a path")
    ap.add_argument("--seed", type=int, default=12345, help="seed of the fresh test split")
    ap.add_argument("--per-bucket", type=int, default=500, help="sentences per length bucket")
    ap.add_argument("--beam", type=int, default=1)
    args = ap.parse_args(argv)
    model, meta = load_checkpoint(args.checkpoint)
    if meta.get("corpus_version") != CORPUS_VERSION:
        print(
            f"warning: checkpoint was trained on corpus {meta.get('corpus_version')}, now {CORPUS_VERSION}",
            file=sys.stderr,
        )
    # A fresh split of sentences the model never trained on (short ones could otherwise repeat).
    from .data import load_splits

    seen = {p.src for p in load_splits().train}
    pairs = make_test_split(seed=args.seed, per_bucket=args.per_bucket, exclude=seen)
    res = evaluate_model(model, pairs, meta["src_vocab"], meta["tgt_vocab"], beam=args.beam)
    res["checkpoint"] = str(args.checkpoint)
    res["test_seed"] = args.seed
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
