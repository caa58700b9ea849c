"""Train and ship lesson 13's multi-source models (French + Korean -> English), then print their figures.

    OMP_NUM_THREADS=1 python scripts/lesson13_multisource.py [NAME ...] [--profile cpu|gpu] [--steps N] [--no-ship]

Trains each named preset of :mod:`attnlab.training.multisource_experiments` (default: both,
``multisource`` -- one attention per source, Zoph & Knight 2016 -- and ``multisource_flat`` -- one
attention over both sources) on one
CPU thread, seed 0, through :func:`attnlab.training.multisource_experiments.run`, and writes
``data/checkpoints/<name>.safetensors|.json`` and ``data/results/<name>.json`` (``--no-ship``: the
learner's folder ``data/runs`` instead). Then it prints the comparison (BLEU, per-source AER and
content-word agreement, the flat model's share of attention on French), read back from the results files.

``--analysis`` (alone: without training) then measures what lesson 13 says about the shipped runs
(:func:`attnlab.training.multisource_experiments.source_analysis`: each source alone, the his/her errors,
the flat model's attention on French, the overlap of the triples' test split with the pair corpora) and
writes ``data/results/comparisons/lesson13_multisource.json``.

``ATTNLAB_MAX_STEPS=N`` caps the budget as everywhere in the course; a capped run (like ``--steps``)
is not the preset's and is never shipped: add ``--no-ship``. ``--n-train/--n-valid/--test-per-bucket``
shrink the triples for a quick check (also ``--no-ship`` only).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one thread, as the lessons train

import torch  # noqa: E402

from attnlab.data.corpus.triples import load_triple_splits, make_triple_splits  # noqa: E402
from attnlab.training import experiments, results  # noqa: E402
from attnlab.training import multisource_experiments as msx  # noqa: E402
from attnlab.training.vision_experiments import format_table  # noqa: E402

NAMES = tuple(msx.MULTISOURCE_EXPERIMENTS)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python scripts/lesson13_multisource.py", description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=list(NAMES), help=f"presets (default: {', '.join(NAMES)})")
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="preset sizes (default: the active profile)")
    ap.add_argument("--steps", type=int, help="another step budget than the presets' (not for shipping)")
    ap.add_argument("--no-ship", action="store_true", help="write below data/runs instead of the shipped folders")
    ap.add_argument(
        "--analysis", action="store_true", help="measure the shipped runs for lesson 13 (no names: only that)"
    )
    sizes = ap.add_argument_group("smaller triples for a quick check (with --no-ship)")
    for flag in ("n-train", "n-valid", "test-per-bucket"):
        sizes.add_argument(f"--{flag}", type=int, metavar="N")
    args = ap.parse_args(argv)
    if argv == ["--analysis"]:
        args.names = []
    for name in args.names:
        try:
            msx.preset(name, args.profile)
        except KeyError as exc:
            ap.error(str(exc.args[0]))
    ship = not args.no_ship
    small = {k: getattr(args, k) for k in ("n_train", "n_valid", "test_per_bucket") if getattr(args, k) is not None}
    try:
        cap = experiments.max_steps()
    except ValueError as exc:
        ap.error(str(exc))
    if ship and (args.steps is not None or cap is not None or small):
        ap.error(
            "--steps, ATTNLAB_MAX_STEPS and smaller triples change the run: the shipped files hold the presets' "
            "runs (add --no-ship)"
        )
    torch.set_num_threads(1)
    produced_by = ("python scripts/lesson13_multisource.py " + shlex.join(argv)).strip()
    data = {}  # one set of triples per size, shared by the presets that use it
    for name in args.names:
        exp = msx.preset(name, args.profile)
        kw = {"n_train": exp.n_train, "n_valid": exp.n_valid, "test_per_bucket": exp.test_per_bucket, **small}
        key = tuple(sorted(kw.items()))
        if key not in data:
            start = time.perf_counter()
            data[key] = load_triple_splits(**kw, seed=msx.DATA_SEED)
            print(f"triples {kw}: {time.perf_counter() - start:.1f} s", flush=True)
        print(f"training {name} ({exp.description}), {exp.budget}", flush=True)
        _, res = msx.run(
            name,
            profile=args.profile,
            steps=args.steps,
            ship=ship,
            progress=False,
            data=data[key],
            produced_by=produced_by,
        )
        ckpt = results.checkpoint_path(name, shipped=ship).with_suffix(".safetensors")
        print(
            f"  {res['train_steps']} steps in {res['train_seconds']} s, final loss "
            f"{res['loss_curve'][-1]['train_loss'] if res['loss_curve'] else '?'}; {ckpt} "
            f"({ckpt.stat().st_size / 1e6:.2f} MB)",
            flush=True,
        )
    done = {}
    for name in NAMES:
        path = results.results_path(name, shipped=ship)
        if path.exists():
            done[name] = results.read_result(name, shipped=ship)
    rows = msx.comparison_rows(done)
    if rows:
        print(f"\nmulti-source translation (French + Korean -> English)\n{format_table(rows)}")
    if args.analysis:
        test = make_triple_splits(n_train=0, n_valid=0, seed=msx.DATA_SEED).test  # the shipped runs' test (drawn first)
        summary = msx.source_analysis(test)
        path = results.write_comparison("lesson13_multisource", {**summary, "produced_by": produced_by}, shipped=True)
        print(f"\nanalysis -> {path}\n{summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
