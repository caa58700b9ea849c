"""Train and ship the experiments of lesson 12 (attention at scale), English->French, seed 0.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson12_experiments.py [--only extrapolation|gqa] [--table-only]

Two groups of presets of :mod:`attnlab.training.experiments`, each the lesson-6 Transformer's cpu preset
(same sizes, 1,500 steps, seed 0) with one change:

* ``extrapolation``: ``transformer_short_<positions>`` for sinusoidal, learned, RoPE and ALiBi
  positions, trained on sources of at most 20 tokens only and tested on every bucket up to 40;
* ``gqa``: ``transformer_kv4``, ``transformer_kv2``, ``transformer_kv1`` (4, 2 and 1 key/value heads
  for the 4 query heads; ``kv4`` is the lesson-6 model again).

Each run goes through :func:`attnlab.training.experiments.run` with ``ship=True``: the checkpoint lands in
``data/checkpoints/<name>.*`` and the results in ``data/results/<name>.json``. The runs go one after
the other, one thread each. At the end (or with ``--table-only``, from the shipped files) the BLEU
by bucket of each group is printed, and the key/value cache bytes of the GQA models per sentence.
"""

from __future__ import annotations

import argparse
import sys

import torch

from attnlab.core.scale import kv_cache_bytes
from attnlab.data.corpus import BUCKET_NAMES
from attnlab.training import experiments, results

GROUPS = {
    "extrapolation": [f"transformer_short_{p}" for p in ("sinusoidal", "learned", "rope", "alibi")],
    "gqa": [f"transformer_kv{k}" for k in (4, 2, 1)],
}


def table(names: list[str]) -> None:
    """Print BLEU by bucket (and, for the GQA models, cache bytes) from the shipped results."""
    print(f"{'model':28s} " + " ".join(f"{b:>7s}" for b in BUCKET_NAMES) + "     all  cache B/sentence(T=40)")
    for name in names:
        res = results.read_result(name)
        m = experiments.preset(name, "cpu").model
        h_kv = m.get("num_kv_heads") or m["num_heads"]
        cache = kv_cache_bytes(
            layers=m["num_decoder_layers"], kv_heads=h_kv, head_dim=m["d_model"] // m["num_heads"], tokens=40
        )
        row = " ".join(f"{res['by_bucket'][b]['bleu']:7.2f}" for b in BUCKET_NAMES)
        print(f"{name:28s} {row} {res['bleu']:7.2f}  {cache:,}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(GROUPS), help="one group only")
    ap.add_argument("--table-only", action="store_true", help="print the tables from the shipped results")
    args = ap.parse_args(argv)
    groups = [args.only] if args.only else list(GROUPS)
    torch.set_num_threads(1)
    if not args.table_only:
        for g in groups:
            experiments.main([*GROUPS[g], "--pair", "fr", "--ship", "--profile", "cpu"])
    for g in groups:
        print(f"\n{g}:")
        table(GROUPS[g])
    return 0


if __name__ == "__main__":
    sys.exit(main())
