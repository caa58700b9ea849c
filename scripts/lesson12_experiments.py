"""Train and ship the experiments of lesson 12 (attention at scale), three seeds each.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson12_experiments.py [--only extrapolation|gqa] [--table-only]

Two groups of presets of :mod:`attnlab.training.experiments`, each the lesson-6 Transformer's cpu preset
(same sizes, 1,500 steps) with one change, each trained with seeds 0, 1 and 2:

* ``extrapolation`` (English->French): ``transformer_short_<positions>`` for sinusoidal, learned, RoPE
  and ALiBi positions, trained on sources of at most 20 tokens only and tested on every bucket up to 40;
* ``gqa`` (English->Korean, the pair where the Transformer is not at its ceiling: on French every
  variant scored 99.3 BLEU): ``transformer_kv4``, ``transformer_kv2``, ``transformer_kv1`` (4, 2 and 1
  key/value heads for the 4 query heads). ``kv4`` is the lesson-6 model itself (on French its seed-0
  run repeats ``transformer``'s to the last digit), so its seed-0 run is the shipped ``transformer_ko``.

Seed 0 is shipped as ``<name>`` (``<name>_ko``), seeds 1 and 2 as ``<name>_seed<k>`` (``_ko``), the
pattern of ``scripts/train_seeds.py``. Each run goes through :func:`attnlab.training.experiments.run`
with ``ship=True``; a run whose results file already exists is skipped, so the script resumes. The runs
go one after the other, one thread each, interleaved over the variants (every variant gets its second
seed before any gets its third). At the end (or with ``--table-only``) the mean and spread over the
seeds of each group is printed, and for GQA the key/value cache bytes per sentence.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

import torch

from attnlab.training import experiments, results

GROUPS = {
    "extrapolation": ("fr", [f"transformer_short_{p}" for p in ("sinusoidal", "learned", "rope", "alibi")]),
    "gqa": ("ko", [f"transformer_kv{k}" for k in (4, 2, 1)]),
}
SEEDS = (0, 1, 2)
# kv4 with 4 query heads is the lesson-6 model: its seed-0 run is the shipped ``transformer`` run.
SAME_RUN = {"transformer_kv4": "transformer"}


def out_name(name: str, seed: int, pair: str) -> str:
    """The shipped file name of ``name`` trained with ``seed`` on ``pair``."""
    if seed == 0 and name in SAME_RUN:
        name = SAME_RUN[name]
    return experiments.seed_result_name(name, pair, seed)


def seed_results(group: str) -> dict[str, list[dict]]:
    """``{preset: [results of each shipped seed]}`` of one group (seeds not trained yet are left out)."""
    pair, names = GROUPS[group]
    out = {}
    for name in names:
        shipped = [out_name(name, s, pair) for s in SEEDS]
        out[name] = [results.read_result(n) for n in shipped if results.results_path(n, shipped=True).exists()]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(GROUPS), help="one group only")
    ap.add_argument("--table-only", action="store_true", help="print the tables from the shipped results")
    args = ap.parse_args(argv)
    groups = [args.only] if args.only else list(GROUPS)
    torch.set_num_threads(1)
    produced_by = "python scripts/lesson12_experiments.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    if not args.table_only:
        for g in groups:
            pair, names = GROUPS[g]
            data = None
            for seed in SEEDS:
                for name in names:
                    out = out_name(name, seed, pair)
                    if results.results_path(out, shipped=True).exists():
                        continue
                    data = data or experiments.synthetic_data(pair)
                    _, res = experiments.run(
                        name, pair=pair, profile="cpu", progress=False, ship=True, seed=seed, data=data,
                        out=out, produced_by=produced_by,
                    )
                    print(json.dumps({"out": out, **{k: res.get(k) for k in ("seed", "bleu", "train_seconds")}}))
                    sys.stdout.flush()
    for g in groups:
        print(f"\n{g}:")
        for name, runs in seed_results(g).items():
            print(f"{name:28s} seeds={len(runs)} BLEU " + " ".join(f"{r['bleu']:.2f}" for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
