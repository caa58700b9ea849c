"""Lesson 11's shipped runs and measurements: the decoder-only model against lesson 06's encoder-decoder.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson11_experiments.py train [--name decoder_only] [--pair fr|ko] [--seeds 0 1 2]
    OMP_NUM_THREADS=1 python scripts/lesson11_experiments.py analyse

``train`` ships ``NAME`` (seed 0), ``NAME_seed1``, ``NAME_seed2`` (``..._ko`` for Korean), each through
:func:`attnlab.training.experiments.run` with the preset's cpu profile and step budget, the names that
``scripts/train_seeds.py`` gives the encoder-decoder's seeds. ``analyse`` loads every shipped run of both
models and writes ``data/results/comparisons/lesson11.json`` (:func:`attnlab.training.decoder_only_report.analyse`):
per-head AER grids, attention mass on the first token, decoding speed with and without the cache,
sliding windows with and without a sink, and the seeds' scores side by side.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

import torch

from attnlab.training import experiments
from attnlab.training.decoder_only_report import analyse


def seed_name(name: str, seed: int, pair: str) -> str:
    """Seed 0 keeps the preset's name; seed ``k`` is ``NAME_seedk`` (``_ko`` added for Korean)."""
    return experiments.result_name(name if seed == 0 else f"{name}_seed{seed}", pair)


def train(args) -> None:
    data = experiments.synthetic_data(args.pair)
    produced_by = "python scripts/lesson11_experiments.py " + shlex.join(sys.argv[1:])
    for seed in args.seeds:
        _, res = experiments.run(
            args.name, pair=args.pair, profile="cpu", progress=False, ship=True, seed=seed, data=data,
            out=seed_name(args.name, seed, args.pair), produced_by=produced_by,
        )
        keys = ("model", "seed", "bleu", "exact_match", "aer", "params", "train_seconds")
        print(json.dumps({k: res.get(k) for k in keys}), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train and ship seeds of a lesson-11 preset")
    t.add_argument("--name", default="decoder_only")
    t.add_argument("--pair", choices=("fr", "ko"), default="fr")
    t.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    sub.add_parser("analyse", help="write data/results/comparisons/lesson11.json from the shipped runs")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.command == "train":
        train(args)
    else:
        analyse()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
