"""Evaluation of whole models: translate a test split and score it with every course metric
(:func:`evaluate_model`), the extra metrics of a family (:func:`extra_metrics`), and a prepared real
corpus's standard BLEU (:func:`evaluate_real`). The metrics themselves live in
:mod:`attnlab.data.metrics`, batched translation and forced attention in :mod:`attnlab.models.decoding`.

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
  :func:`attnlab.data.metrics.alignment_error_rate`. Lower is better; 0 means every argmax link is a possible link
  and every sure link was found.

``python -m attnlab.training.evaluate CHECKPOINT [--seed S] [--per-bucket N]`` evaluates a checkpoint on
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

import sacrebleu
import torch

from attnlab.core.checks import check_int
from attnlab.data.corpus.splits import (
    BUCKET_NAMES,
    CORPUS_VERSIONS,
    Pair,
    bucket_name,
    corpus_version,
    load_splits,
    make_test_split,
)
from attnlab.data.metrics import alignment_agreement, alignment_error_rate, corpus_bleu, corpus_chrf, exact_match
from attnlab.data.realcorpus import RealCorpus
from attnlab.data.vocab import Vocab
from attnlab.models.agreement import AgreementPair, evaluate_backward
from attnlab.models.decoding import forced_attention, translate
from attnlab.training.checkpoint import load_checkpoint

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


def count_params(model: torch.nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


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


def extra_metrics(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, **kwargs) -> dict:
    """Metrics a model family adds to :func:`evaluate_model`'s: ``{"backward": ...}`` for an
    :class:`~attnlab.models.agreement.AgreementPair` (its X->English direction, scored by
    :func:`attnlab.models.agreement.evaluate_backward`), nothing for the other families.

    Args:
        model, pairs, src_vocab, tgt_vocab: as :func:`evaluate_model` (the forward direction's).
        kwargs: ``beam``, ``bs``.
    """
    if isinstance(model, AgreementPair):
        return {"backward": evaluate_backward(model, pairs, src_vocab, tgt_vocab, **kwargs)}
    return {}


def translate_real(corpus: RealCorpus, model, texts: Sequence[str], *, beam: int = 1, bs: int = 250) -> list[str]:
    """Translate English texts with a model trained on a prepared real ``corpus`` to French texts (normalise,
    encode, decode, detokenize).

    Args:
        model: a course model trained on this corpus (the decoding protocol of :mod:`attnlab.models.decoding`).
        texts: English sentences.
        beam: beam width (1 = greedy).
        bs: sentences per batch.

    Returns:
        One French string per text.
    """

    sources = [corpus.src_tokenizer.pieces(t) for t in texts]
    # translate's default bound, 2 * S + 10 steps, can pass a Transformer's positional table on long
    # real sentences; stop at the table's end instead of failing
    positions = getattr(getattr(model, "config", None), "max_len", None)
    limit = None
    if positions is not None and sources:
        limit = min(positions, 2 * (max(map(len, sources)) + 1) + 10)
    hyps, _, _ = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam=beam, bs=bs, max_len=limit)
    return [corpus.detokenize_tgt(h) for h in hyps]


def evaluate_real(
    corpus: RealCorpus, model, split: str = "test", *, beam: int = 1, bs: int = 250, limit: int | None = None
) -> dict:
    """Standard BLEU and chrF of ``model`` on a held-out split of a prepared real ``corpus``: detokenized
    output against the
    normalised references, sacrebleu's default ``13a`` tokenization.

    Args:
        model: a course model trained on this corpus.
        split: ``"test"`` or ``"valid"``.
        beam: beam width (1 = greedy).
        bs: sentences per batch.
        limit: score only the first ``limit`` pairs.

    Returns:
        dict with ``bleu``, ``chrf``, ``exact_match`` (share of hypotheses equal to their reference),
        ``bleu_signature`` (sacrebleu's), ``n_test``, ``decode_seconds``, ``sentences_per_second``,
        ``split``, ``corpus_version``, and ``examples`` (the first three source/reference/hypothesis).
    """

    if limit is not None:
        check_int("limit", limit, minimum=1)
    pairs = corpus.held_out(split)[:limit]
    start = time.perf_counter()
    hyps = translate_real(corpus, model, [p.en for p in pairs], beam=beam, bs=bs)
    seconds = time.perf_counter() - start
    refs = [p.fr for p in pairs]
    bleu = sacrebleu.metrics.BLEU()
    return {
        "bleu": round(float(bleu.corpus_score(hyps, [refs]).score), 2),
        "chrf": round(float(sacrebleu.metrics.CHRF().corpus_score(hyps, [refs]).score), 2),
        "exact_match": round(sum(h == r for h, r in zip(hyps, refs, strict=True)) / max(len(refs), 1), 4),
        "bleu_signature": str(bleu.get_signature()),
        "n_test": len(refs),
        "decode_seconds": round(seconds, 3),
        "sentences_per_second": round(len(refs) / max(seconds, 1e-9), 1),
        "split": split,
        "corpus_version": corpus.corpus_version,
        "examples": [
            {"source": p.en, "reference": p.fr, "hypothesis": h} for p, h in zip(pairs[:3], hyps[:3], strict=True)
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: evaluate a checkpoint on a freshly generated, seeded test split; print JSON."""

    ap = argparse.ArgumentParser(prog="python -m attnlab.training.evaluate", description=main.__doc__)
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
