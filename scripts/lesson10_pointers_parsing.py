"""Train and ship lesson 10's pointer networks and parsers (sections 5 and 6).

    python scripts/lesson10_pointers_parsing.py [pointer|parse ...] [--seeds 0 1 2] [--steps N] [--no-ship] [--force]
    python scripts/lesson10_pointers_parsing.py ceiling [--n-model N]

* ``pointer``: the runs of :data:`attnlab.training.pointer_experiments.POINTER_RUNS` (the pointer network
  and the seq2seq baseline that emits values, on sorting);
* ``parse``: the runs of :data:`attnlab.training.parsing_experiments.PARSE_RUNS` (English -> linearised
  tree, with and without attention).
* ``ceiling`` (never by default): the best F1 a parser can reach on the test split, the grammar being
  ambiguous, and the shipped ``parse_bahdanau`` seeds rescored attachment-blind
  (:func:`attnlab.training.parsing_experiments.ceiling_summary`), written to
  ``data/results/comparisons/lesson10_parse_ceiling.json``. Trains nothing.

Each run with each seed writes ``data/checkpoints/<name>.safetensors|.json`` and ``data/results/<name>.json``
(``--no-ship``: the learner's folder ``data/runs``). Resumable: a run whose shipped results file exists is
skipped (``--force`` retrains it). One CPU thread, as the lessons train.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one thread, as the lessons train

from attnlab.training import parsing_experiments as px  # noqa: E402
from attnlab.training import pointer_experiments as ptx  # noqa: E402
from attnlab.training import results  # noqa: E402

GROUPS = {"pointer": ptx, "parse": px}


def ceiling(argv: list[str], produced_by: str) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/lesson10_pointers_parsing.py ceiling")
    ap.add_argument("--n-model", type=int, default=20_000, help="generated sentences per bucket for P(host)")
    args = ap.parse_args(argv)
    summary = px.ceiling_summary(n_model=args.n_model, log=lambda m: print(m, flush=True))
    summary["produced_by"] = produced_by
    print(results.write_comparison(px.CEILING_COMPARISON, summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    produced_by = "python " + " ".join(shlex.quote(a) for a in ["scripts/lesson10_pointers_parsing.py", *argv])
    if argv[:1] == ["ceiling"]:
        return ceiling(argv[1:], produced_by)
    ap = argparse.ArgumentParser(prog="python scripts/lesson10_pointers_parsing.py")
    ap.add_argument("groups", nargs="*", default=list(GROUPS), choices=list(GROUPS))
    ap.add_argument("--runs", nargs="*", default=None, help="only these runs of the groups")
    ap.add_argument("--seeds", nargs="*", type=int, default=None, help="default: each group's shipped seeds")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--no-ship", action="store_true")
    ap.add_argument("--force", action="store_true", help="retrain runs whose results already exist")
    args = ap.parse_args(argv)
    ship = not args.no_ship
    for group in args.groups:
        mod = GROUPS[group]
        runs = mod.PARSE_RUNS if group == "parse" else mod.POINTER_RUNS
        seeds = mod.PARSE_SEEDS if group == "parse" else mod.POINTER_SEEDS
        data = None
        for seed in seeds if args.seeds is None else args.seeds:
            for name in runs if args.runs is None else [r for r in runs if r in args.runs]:
                out = mod.run_name(name, seed)
                if not args.force and results.results_path(out, shipped=ship).exists():
                    print(f"  {out}: shipped results exist, skipped", flush=True)
                    continue
                if group == "parse" and data is None:
                    data = px.parse_data()
                extra = {"data": data} if group == "parse" else {}
                _, res = mod.run(name, seed=seed, steps=args.steps, ship=ship, produced_by=produced_by, **extra)
                ckpt = results.checkpoint_path(out, shipped=ship).with_suffix(".safetensors")
                print(
                    f"  {out}: {res['train_steps']} steps in {res['train_seconds']} s; f1/exact "
                    f"{res.get('f1', res.get('exact_order_2x'))}; {ckpt.stat().st_size / 1e6:.2f} MB",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
