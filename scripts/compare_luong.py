"""Train every Luong variant of lesson 03 with the same budget and ship the results.

Usage::

    python scripts/compare_luong.py [--profile cpu|gpu] [--seconds N] [--only NAME ...] [--table-only]

Each variant (``luong_dot``, ``luong_general``, ... see :data:`VARIANTS`) is trained one after the
other through :func:`attnlab.experiments.run` with its preset, for **twice** the preset's budget
(240 s on the cpu profile: the "longer runs" that lesson 03 shows beside its short live ones;
``--seconds`` sets another budget, for every variant alike), evaluated on the 2000-sentence test
split and written to ``data/checkpoints/<name>.*`` and ``data/results/<name>.json``
(``ship=True``). In the results JSON, ``produced_by`` names this script, and two fields are added:
``load_average`` (the 1-minute load before and after training, because a time budget buys fewer
steps on a busy machine) and ``cpu_count``.

At the end a comparison table is printed, with the Bahdanau and no-attention rows of lessons
01-02 (shipped results when present, else the learner's live runs, labelled as such).
``--table-only`` prints the table from the stored results without training anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from attnlab import experiments
from attnlab.data import build_vocabs, load_splits

VARIANTS = (
    "luong_dot",
    "luong_general",
    "luong_concat",
    "luong_scaled_dot",
    "luong_location",
    "luong_local_m",
    "luong_local_p",
)
BASELINES = ("bahdanau", "rnn_noattn")
LONGER = 2  # the shipped comparison trains each variant for this multiple of the preset's budget


def load_result(name: str) -> tuple[dict | None, str]:
    """The shipped results of ``name``, else its live run; ``(None, "missing")`` when neither exists."""
    for shipped, label in ((True, "shipped"), (False, "live run")):
        _, path = experiments.paths(name, shipped)
        if path.exists():
            return json.loads(path.read_text()), label
    return None, "missing"


def table(names: Sequence[str]) -> str:
    """A plain-text comparison table of the stored results of ``names`` (best BLEU first)."""
    rows = []
    for name in names:
        res, source = load_result(name)
        if res is None:
            rows.append((float("-inf"), f"{name:18s} (no results yet)"))
            continue
        load = res.get("load_average")
        load_txt = f"{load['before']:.1f}/{load['after']:.1f}" if load else "?"
        align = res.get("align_content")
        rows.append(
            (
                res["bleu"],
                f"{name:18s} {res['bleu']:6.2f} {res['by_bucket']['31-40']['bleu']:7.2f} "
                f"{'    -' if align is None else f'{align:5.3f}'} {res['params']:8d} "
                f"{res['tokens_per_second']:7.0f} {res['train_steps']:6d} {res['train_seconds']:6.0f} "
                f"{res['profile']:>4s} {load_txt:>9s}  {source} ({res['produced_by']}, {res['date']})",
            )
        )
    head = (
        f"{'variant':18s} {'BLEU':>6s} {'31-40':>7s} {'align':>5s} {'params':>8s} {'tok/s':>7s} {'steps':>6s} "
        f"{'train':>6s} {'prof':>4s} {'load b/a':>9s}  source"
    )
    return "\n".join([head, "-" * len(head), *[r for _, r in sorted(rows, key=lambda r: -r[0])]])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/compare_luong.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="default: the active profile")
    ap.add_argument("--seconds", type=float, help="training budget for every variant (default: twice the preset's)")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=VARIANTS, help="train only these variants")
    ap.add_argument("--seed", type=int, default=0, help="training seed (the same for every variant)")
    ap.add_argument("--table-only", action="store_true", help="print the table of stored results and exit")
    args = ap.parse_args(argv)

    names = list(args.only or VARIANTS)
    if not args.table_only:
        splits = load_splits()
        data = (splits, *build_vocabs(splits))
        for name in names:
            exp = experiments.preset(name, args.profile)
            seconds = args.seconds if args.seconds is not None else LONGER * exp.seconds
            before = os.getloadavg()[0]
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {seconds:.0f} s, load {before:.2f}", flush=True)
            _, res = experiments.run(
                name, profile=args.profile, seconds=seconds, progress=False, ship=True, seed=args.seed, data=data
            )
            after = os.getloadavg()[0]
            res["produced_by"] = f"python scripts/compare_luong.py --seconds {seconds:g}"
            res["load_average"] = {"before": round(before, 2), "after": round(after, 2)}
            res["cpu_count"] = os.cpu_count()
            ckpt, path = experiments.paths(name, shipped=True)
            path.write_text(json.dumps(res, indent=1) + "\n")
            meta_path = ckpt.with_suffix(".json")  # keep the checkpoint's copy of the metrics in step
            meta = json.loads(meta_path.read_text())
            meta["metrics"] = res
            meta_path.write_text(json.dumps(meta, indent=1) + "\n")
            print(
                f"    BLEU {res['bleu']:.2f}, 31-40 {res['by_bucket']['31-40']['bleu']:.2f}, "
                f"{res['train_steps']} steps, {res['tokens_per_second']:.0f} tok/s, "
                f"threads {res['torch_threads']}, load after {after:.2f}",
                flush=True,
            )
    print(table(list(VARIANTS) + list(BASELINES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
