"""Train every Luong variant of lesson 03 on both language pairs, with several seeds, and ship the results.

Usage::

    python scripts/compare_luong.py [--pair fr ko] [--seeds 0 1 2] [--steps N] [--jobs 2]
                                    [--curve-every 100] [--only NAME ...] [--table-only]

Each variant (``luong_dot``, ``luong_general``, ... see :data:`VARIANTS`) is trained through
:func:`attnlab.training.experiments.run` with its preset and the **lesson's budget** (the preset's steps,
the same for every variant; ``--steps`` sets another), once per seed and pair. A step budget makes
the runs independent of the machine's load, so ``--jobs`` runs several at once (one thread each).

* Seed 0 of each variant is **shipped**: ``data/checkpoints/<name>.*`` and ``data/results/<name>.json``
  (``<name>`` gets the suffix ``_ko`` for English->Korean), which lesson 03 and the README read.
* Every seed, seed 0 included, goes into one summary per pair,
  ``data/results/comparisons/luong_<pair>.json``: per variant the figures of each seed, their mean
  and standard deviation, and a **learning curve** (BLEU and exact match on 31-40 tokens every
  ``--curve-every`` steps, from weight snapshots of the same run). A difference between two
  variants is a difference only when it exceeds their spread.

At the end a table is printed per pair (mean +- sd over the seeds). ``--table-only`` prints it
from the stored summaries without training anything. On the 2-core course machine the default
(7 variants x 3 seeds x 2 pairs at 1,000 steps, 2 jobs) takes about 50 minutes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from attnlab.training import experiments, results

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
# The figures summarised over seeds: name in the summary -> how to read it from a results dict.
FIGURES = {
    "bleu": lambda r: r["bleu"],
    "chrf": lambda r: r.get("chrf"),
    "exact_match": lambda r: r["exact_match"],
    "bleu_31_40": lambda r: r["by_bucket"]["31-40"]["bleu"],
    "em_31_40": lambda r: r["by_bucket"]["31-40"]["exact_match"],
    "aer": lambda r: r.get("aer"),
    "align_content": lambda r: r.get("align_content"),
    "train_seconds": lambda r: r["train_seconds"],
}

_DATA: dict[str, tuple] = {}  # pair -> (splits, src_vocab, tgt_vocab), per worker process


def _data(pair: str):
    if pair not in _DATA:
        from attnlab.data.corpus import load_splits
        from attnlab.data.vocab import build_vocabs

        splits = load_splits(target=pair)
        _DATA[pair] = (splits, *build_vocabs(splits))
    return _DATA[pair]


def train_one(name: str, pair: str, seed: int, steps: int | None, curve_every: int, profile: str | None) -> dict:
    """Train one variant on one pair with one seed; ship it when ``seed == 0``; return its results."""
    budget = f" --steps {steps}" if steps is not None else ""
    _, res = experiments.run(
        name,
        pair=pair,
        profile=profile,
        steps=steps,
        curve_every=curve_every,
        progress=False,
        ship=True,
        save=seed == 0,
        seed=seed,
        data=_data(pair),
        produced_by=f"python scripts/compare_luong.py --pair {pair} --seeds {seed}{budget}",
    )
    return res


def summarise(runs: Sequence[dict]) -> dict:
    """Per-seed figures, their mean and sample standard deviation, and the mean learning curve."""
    out = {"seeds": [r["seed"] for r in runs], "runs": {}, "mean": {}, "sd": {}}
    for key, get in FIGURES.items():
        values = [get(r) for r in runs]
        out["runs"][key] = values
        if all(v is not None for v in values):
            out["mean"][key] = statistics.fmean(values)
            out["sd"][key] = statistics.stdev(values) if len(values) > 1 else 0.0
    curves = [r["learning_curve"] for r in runs if r.get("learning_curve")]
    if curves:
        steps = [c["step"] for c in curves[0]]
        if all([c["step"] for c in curve] == steps for curve in curves):
            out["curve"] = {
                "step": steps,
                **{
                    k: [statistics.fmean(c[i][k] for c in curves) for i in range(len(steps))]
                    for k in ("bleu", "exact_match")
                },
                **{
                    f"{k}_sd": [
                        statistics.stdev(c[i][k] for c in curves) if len(curves) > 1 else 0.0 for i in range(len(steps))
                    ]
                    for k in ("bleu", "exact_match")
                },
            }
    first = runs[0]
    out.update(
        params=first["params"], train_steps=first["train_steps"], budget=first.get("budget"), profile=first["profile"]
    )
    return out


def table(pair: str) -> str:
    """A plain-text table of the summary of ``pair`` (mean +- sd over seeds, best BLEU first)."""
    try:
        summary = results.read_comparison(f"luong_{pair}")
    except FileNotFoundError as exc:
        return str(exc)
    cols = ("bleu", "chrf", "em_31_40", "bleu_31_40", "aer")
    head = f"{'variant':18s} " + " ".join(f"{c:>15s}" for c in cols) + f" {'params':>8s} {'steps':>6s}"
    rows = []
    for name, s in sorted(summary["variants"].items(), key=lambda kv: -kv[1]["mean"]["bleu"]):
        cells = [f"{s['mean'][c]:8.3f} ±{s['sd'][c]:6.3f}" if c in s["mean"] else f"{'-':>15s}" for c in cols]
        rows.append(f"{name:18s} " + " ".join(cells) + f" {s['params']:8d} {s['train_steps']:6d}")
    title = f"English->{'French' if pair == 'fr' else 'Korean'}: {len(summary['seeds'])} seeds {summary['seeds']}"
    return "\n".join([title, head, "-" * len(head), *rows])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/compare_luong.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", nargs="+", choices=experiments.PAIRS, default=list(experiments.PAIRS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, help="training budget in steps for every variant (default: the preset's)")
    ap.add_argument("--curve-every", type=int, default=100, help="steps between learning-curve points")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (one thread each)")
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="default: the active profile")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=VARIANTS, help="train only these variants")
    ap.add_argument("--table-only", action="store_true", help="print the tables of stored summaries and exit")
    args = ap.parse_args(argv)

    if not args.table_only:
        names = list(args.only or VARIANTS)
        for pair in args.pair:
            _data(pair)  # generate each corpus cache once, before the workers read it
        jobs = [(name, pair, seed) for pair in args.pair for seed in args.seeds for name in names]
        start = time.time()
        runs: dict[tuple[str, str], list[dict]] = {}
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
            futures = {
                pool.submit(train_one, name, pair, seed, args.steps, args.curve_every, args.profile): (name, pair, seed)
                for name, pair, seed in jobs
            }
            for i, fut in enumerate(futures, 1):
                name, pair, seed = futures[fut]
                res = fut.result()
                runs.setdefault((name, pair), []).append(res)
                print(
                    f"[{time.strftime('%H:%M:%S')}] {i}/{len(jobs)} {name} {pair} seed {seed}: BLEU {res['bleu']:.2f}, "
                    f"EM 31-40 {res['by_bucket']['31-40']['exact_match']:.3f}, {res['train_steps']} steps in "
                    f"{res['train_seconds']:.0f} s",
                    flush=True,
                )
        for pair in args.pair:
            previous = {}
            try:
                previous = results.read_comparison(f"luong_{pair}")["variants"]
            except FileNotFoundError:
                pass
            variants = {**previous, **{n: summarise(runs[(n, pair)]) for n in names}}
            results.write_comparison(
                f"luong_{pair}",
                {
                    "pair": pair,
                    "seeds": args.seeds,
                    "produced_by": "python scripts/compare_luong.py " + " ".join(argv or sys.argv[1:]),
                    "wall_seconds": round(time.time() - start, 1),
                    "jobs": args.jobs,
                    "variants": {n: variants[n] for n in VARIANTS if n in variants},
                },
            )
    for pair in args.pair:
        print(table(pair), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
