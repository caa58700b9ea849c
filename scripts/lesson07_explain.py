"""Lesson 07, "attention is not explanation?": Shift-Att and adversarial attention on the shipped models.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson07_explain.py

Two measurements, both against the corpus's gold links (:mod:`attnlab.training.explain`):

* **Shift-Att** (Chen et al. 2020, "Accurate Word Alignment Induction from Neural Machine
  Translation"): for every shipped Transformer of :data:`SHIFT_MODELS`, the AER and alignment
  agreement of each decoder layer's cross-attention (heads averaged, and each head), read at the
  step that predicts a token (naive) and at the step that reads it (shifted), on the whole test split.
* **Adversarial attention** (Jain & Wallace 2019, "Attention is not Explanation"): for
  :data:`ADVERSARIAL_MODELS`, on :data:`SENTENCES` test sentences of 11-20 tokens, attention
  weights as far as the search gets from the model's own (Jensen-Shannon divergence) or from the
  gold links, while every decoding step's output distribution stays within total-variation
  distance epsilon of the original, for each epsilon of :data:`EPSILONS`.

Everything runs on one thread in about a minute or two on a laptop core; the figures go to
``data/results/comparisons/lesson07_explain.json`` (read it with
``attnlab.training.results.read_comparison("lesson07_explain")``) and a table is printed.
"""

from __future__ import annotations

import sys
import time

import torch

from attnlab.data.corpus import load_splits
from attnlab.training import experiments, results
from attnlab.training.explain import adversarial_attention, adversarial_summary, shift_att_report

SHIFT_MODELS = [
    ("transformer", "fr"),
    ("transformer_kv1", "fr"),
    ("transformer_kv2", "fr"),
    ("transformer_ko", "ko"),
    ("transformer_dec4", "fr"),  # four decoder layers (scripts/lesson07_experiments.py --deep-decoder)
]
ADVERSARIAL_MODELS = ["bahdanau", "luong_concat", "luong_location"]
SENTENCES = 30
BUCKET = "11-20"
EPSILONS = (0.01, 0.1)
SEARCH = dict(steps=150, lr=0.3, penalty=30.0, noise=0.1, seed=0)


def shift_att_part() -> dict:
    """Naive vs shifted AER per layer and head of every model in :data:`SHIFT_MODELS`."""
    out: dict = {"models": {}}
    splits: dict = {}
    for file, pair in SHIFT_MODELS:
        test = splits.setdefault(pair, load_splits(target=pair).test)
        model, meta, _ = experiments.load_trained(file, prefer_live=False)
        rows = shift_att_report(model, test, meta["src_vocab"], meta["tgt_vocab"])
        c = model.config
        out["models"][file] = {
            "pair": pair,
            "test_sentences": len(test),
            "decoder_layers": c.num_decoder_layers,
            "heads": c.num_heads,
            "rows": rows,
        }
        for r in rows:
            n, s = r["naive"], r["shift"]
            print(
                f"shift-att {file:16s} layer {r['layer']} head {r['head']!s:4s}  AER {n['aer']:.3f} -> {s['aer']:.3f}"
                f"   content agreement {n['align_content']:.3f} -> {s['align_content']:.3f}"
            )
    return out


def adversarial_part() -> dict:
    """The adversarial search's summary for every model, target and epsilon."""
    test = load_splits(target="fr").test
    sample = [p for p in test if p.bucket == BUCKET][:SENTENCES]
    out: dict = {"pair": "fr", "bucket": BUCKET, "sentences": len(sample), "search": SEARCH, "runs": {}}
    for file in ADVERSARIAL_MODELS:
        model, meta, _ = experiments.load_trained(file, prefer_live=False)
        runs = out["runs"][file] = {}
        for away_from in ("model", "gold"):
            for eps in EPSILONS:
                start = time.perf_counter()
                found = adversarial_attention(
                    model, sample, meta["src_vocab"], meta["tgt_vocab"], epsilon=eps, away_from=away_from, **SEARCH
                )
                s = adversarial_summary(found, sample)
                s["seconds"] = round(time.perf_counter() - start, 1)
                runs.setdefault(away_from, {})[f"{eps:g}"] = s
                print(
                    f"adversarial {file:15s} away from {away_from:5s} eps {eps:<5g} JSD {s['mean_jsd']:.4f}"
                    f" (content {s['mean_jsd_content']:.4f})  max TVD {s['max_tvd']:.4f}"
                    f"  off gold {s['off_gold_original']:.3f} -> {s['off_gold_adversarial']:.3f}"
                    f"  left gold {s['left_gold']:.3f}  gold mass {s['gold_mass_original']:.3f}"
                    f" -> {s['gold_mass_adversarial']:.3f}  AER {s['aer_original']:.3f} -> {s['aer_adversarial']:.3f}"
                    f"  ({s['seconds']} s)"
                )
    return out


def main() -> int:
    torch.set_num_threads(1)
    load_before = results.load_average()
    start = time.perf_counter()
    summary = {"shift_att": shift_att_part(), "adversarial": adversarial_part()}
    summary["seconds"] = round(time.perf_counter() - start, 1)
    summary["provenance"] = results.provenance(
        produced_by="scripts/lesson07_explain.py", profile="cpu", threads=1, load_before=load_before
    )
    path = results.write_comparison("lesson07_explain", summary)
    print(f"wrote {path} ({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
