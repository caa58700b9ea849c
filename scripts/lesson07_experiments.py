"""Train and ship the experiments of lesson 07 (attention variants), seed 0.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson07_experiments.py [NAME[:PAIR] ...] [--table-only]

Each preset of :mod:`attnlab.experiments` named ``bahdanau_<variant>`` is the lesson-1 Bahdanau
model's cpu preset (same sizes, 1,000 steps, seed 0) with one switch of :class:`attnlab.rnn.RNNConfig`
turned on. Without names the default runs below are trained, one after the other, one thread each,
through :func:`attnlab.experiments.run` with ``ship=True`` (checkpoints in ``data/checkpoints``,
results in ``data/results``).

Afterwards (or with ``--table-only``) every shipped lesson-07 run and its baselines are decoded on the
test split once more to count dropped and repeated words per bucket
(:func:`attnlab.variants.coverage_errors`); the counts go to
``data/results/comparisons/lesson07_errors.json`` and the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from attnlab import experiments, results
from attnlab.checkpoint import CheckpointError
from attnlab.corpus import BUCKET_NAMES, load_splits
from attnlab.evaluate import translate
from attnlab.variants import coverage_errors

RUNS = [
    ("bahdanau_supervised", "fr"),
    ("bahdanau_supervised_low", "fr"),
    ("bahdanau_coverage", "fr"),
    ("bahdanau_monotonic", "fr"),
    ("bahdanau_monotonic", "ko"),
]
BASELINES = [("rnn_noattn", "fr"), ("bahdanau", "fr"), ("bahdanau", "ko"), ("rnn_noattn", "ko")]
VARIANTS = [n for n in experiments.EXPERIMENTS if n.startswith("bahdanau_")]


def count_errors() -> dict:
    """Dropped/repeated words per bucket of every shipped lesson-07 run and its baselines (greedy decoding)."""
    out = {}
    splits = {}
    for name, pair in BASELINES + [(n, p) for n in VARIANTS for p in experiments.PAIRS]:
        file = experiments.result_name(name, pair)
        try:
            model, meta, _ = experiments.load_trained(file, prefer_live=False)
        except CheckpointError:  # a variant not shipped for this pair
            continue
        test = splits.setdefault(pair, load_splits(target=pair).test)
        model.eval()
        hyps, _, _ = translate(model, [p.src for p in test], meta["src_vocab"], meta["tgt_vocab"])
        out[file] = coverage_errors(hyps, test)
        print(file, json.dumps(out[file]["31-40"]))
    results.write_comparison("lesson07_errors", out)
    return out


def table(errors: dict) -> None:
    """Print BLEU by bucket, AER and dropped+repeated at 31-40 tokens from the shipped results."""
    print(f"{'model':30s} " + " ".join(f"{b:>7s}" for b in BUCKET_NAMES) + "    all    AER  drop+rep(31-40)  steps")
    for file, err in errors.items():
        res = results.read_result(file)
        row = " ".join(f"{res['by_bucket'][b]['bleu']:7.2f}" for b in BUCKET_NAMES)
        aer = "   -  " if res.get("aer") is None else f"{res['aer']:.3f}"
        e = err["31-40"]
        print(
            f"{file:30s} {row} {res['bleu']:6.2f} {aer:>6s}  {e['dropped']:4d}+{e['repeated']:<4d}"
            f"  {res['train_steps']}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", help="NAME[:PAIR] (default: the lesson's runs)")
    ap.add_argument("--table-only", action="store_true", help="count and print from the shipped files only")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    runs = [tuple(r.split(":")) if ":" in r else (r, "fr") for r in args.runs] or RUNS
    if not args.table_only:
        for name, pair in runs:
            experiments.main([name, "--pair", pair, "--ship", "--profile", "cpu"])
    table(count_errors())
    return 0


if __name__ == "__main__":
    sys.exit(main())
