"""Evaluation: translate a test split, score it, and keep the results in ``data/results``.

Metrics
-------
* corpus **BLEU** from ``sacrebleu`` (never hand-written), on our already-tokenised text
  (``tokenize="none"``; for Korean these are the morpheme tokens, particles split off), 0-100;
* corpus **chrF** from ``sacrebleu`` (character n-grams, spaces ignored, so it does not care
  where a Korean particle is split off), 0-100;
* **exact match**: share of sentences translated exactly right;
* all three overall and per source-length bucket (``1-10`` ... ``31-40``);
* **alignment agreement**: with the gold target prefix fed in (teacher forcing), the share of
  target tokens whose highest attention weight falls on one of their gold *sure* source positions,
  for content words (``align_content``), function words (``align_function``) and all tokens
  (``align_all``); tokens without a sure link are skipped;
* **alignment error rate** (``aer``, Och & Ney 2003), from the same forced attention: see
  :func:`alignment_error_rate`. Lower is better; 0 means every argmax link is a possible link
  and every sure link was found.

``python -m attnlab.evaluate CHECKPOINT [--seed S] [--per-bucket N]`` evaluates a checkpoint on
a freshly generated test split of the language pair it was trained on (read from its corpus
version) and prints the metrics as JSON.

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

from .checks import eval_mode
from .corpus.splits import BUCKET_NAMES, CORPUS_VERSIONS, Pair, bucket_name, corpus_version
from .decoding import beam_search
from .loaders import collate, encode_pairs
from .vocab import EOS, PAD, Vocab

__all__ = [
    "corpus_bleu",
    "corpus_chrf",
    "exact_match",
    "translate",
    "forced_attention",
    "alignment_agreement",
    "alignment_error_rate",
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


def forced_attention(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, bs: int = 250):
    """Attention weights with the gold target fed in; ``None`` for a model without attention.

    Runs in eval mode without gradients and restores the model's mode afterwards.

    Returns:
        list of ``(T, S)`` arrays: ``T`` = target tokens (no ``<eos>``), ``S`` = source tokens
        (no ``<eos>``), in the order of ``pairs``.
    """
    device = _device_of(model)
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    out: list[np.ndarray | None] = [None] * len(items)
    with eval_mode(model):
        for idx in _batches(len(items), [len(it[0]) for it in items], bs):
            src, tgt_in, _ = collate([items[i] for i in idx])
            _, attn = model(src.to(device), tgt_in.to(device), return_attention=True)
            if attn is None:
                return None
            for row, i in enumerate(idx):
                out[i] = attn[row, : len(pairs[i].tgt), : len(pairs[i].src)].float().cpu().numpy()
    return out


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


def evaluate_model(
    model,
    pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    bs: int = 250,
    target: str = "fr",
) -> dict:
    """Translate ``pairs`` and compute every course metric.

    Args:
        model: a model implementing the decoding protocol.
        pairs: the test pairs.
        src_vocab, tgt_vocab: vocabularies.
        beam: beam width (1 = greedy).
        bs: sentences per batch.
        target: the language pair's target (``"fr"``, ``"ko"``); names the corpus version.

    Returns:
        dict with ``bleu``, ``chrf``, ``exact_match``, ``by_bucket`` (``{bucket: {"bleu", "chrf",
        "exact_match", "n"}}``), ``align_content``/``align_all``/``align_function`` (models with
        attention, generated pairs), ``aer`` (None without attention or gold alignments),
        ``params``, ``decode_seconds``, ``sentences_per_second``, ``n_test``, ``beam``,
        ``target``, ``corpus_version``.
    """
    version = corpus_version(target)
    hyps, _, seconds = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab, beam=beam, bs=bs)
    refs = [list(p.tgt) for p in pairs]
    res: dict = {
        "bleu": round(corpus_bleu(hyps, refs), 2),
        "chrf": round(corpus_chrf(hyps, refs), 2),
        "exact_match": round(exact_match(hyps, refs), 4),
        "by_bucket": {},
    }
    buckets = [bucket_name(len(p.src)) for p in pairs]
    for name in BUCKET_NAMES:
        sel = [i for i, b in enumerate(buckets) if b == name]
        if sel:
            h, r = [hyps[i] for i in sel], [refs[i] for i in sel]
            res["by_bucket"][name] = {
                "bleu": round(corpus_bleu(h, r), 2),
                "chrf": round(corpus_chrf(h, r), 2),
                "exact_match": round(exact_match(h, r), 4),
                "n": len(sel),
            }
    res["aer"] = None
    if all(p.align is not None for p in pairs):
        attns = forced_attention(model, pairs, src_vocab, tgt_vocab, bs=bs)
        if attns is not None:
            res.update({k: round(v, 4) for k, v in alignment_agreement(attns, pairs).items()})
            res["aer"] = round(alignment_error_rate(attns, pairs), 4)
    res.update(
        params=count_params(model),
        decode_seconds=round(seconds, 3),
        sentences_per_second=round(len(pairs) / max(seconds, 1e-9), 1),
        n_test=len(pairs),
        beam=beam,
        target=target,
        corpus_version=version,
    )
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: evaluate a checkpoint on a freshly generated, seeded test split; print JSON."""
    from .checkpoint import load_checkpoint
    from .corpus.splits import load_splits, make_test_split

    ap = argparse.ArgumentParser(prog="python -m attnlab.evaluate", description=main.__doc__)
    ap.add_argument("checkpoint", help="name under data/checkpoints or a path")
    ap.add_argument("--seed", type=int, default=12345, help="seed of the fresh test split")
    ap.add_argument("--per-bucket", type=int, default=500, help="sentences per length bucket")
    ap.add_argument("--beam", type=int, default=1)
    args = ap.parse_args(argv)
    model, meta = load_checkpoint(args.checkpoint)
    version = meta.get("corpus_version")
    target = {v: k for k, v in CORPUS_VERSIONS.items()}.get(version)
    if target is None:
        target = "fr"
        print(
            f"warning: checkpoint was trained on corpus {version}, none of {sorted(CORPUS_VERSIONS.values())}; "
            f"evaluating on {CORPUS_VERSIONS[target]}",
            file=sys.stderr,
        )
    # A fresh split of sentences the model never trained on (short ones could otherwise repeat).
    seen = {p.src for p in load_splits(target=target).train}
    pairs = make_test_split(seed=args.seed, per_bucket=args.per_bucket, exclude=seen, target=target)
    res = evaluate_model(model, pairs, meta["src_vocab"], meta["tgt_vocab"], beam=args.beam, target=target)
    res["checkpoint"] = str(args.checkpoint)
    res["test_seed"] = args.seed
    print(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
