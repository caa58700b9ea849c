"""Train and ship lesson 13's models, then print their comparison tables.

    python scripts/lesson13_experiments.py [NAME ...] [--profile cpu|gpu] [--steps N] [--no-ship]

Trains each named preset of :mod:`attnlab.training.vision_experiments` (the captioners and the two
classifiers), the spellers of :data:`attnlab.training.speech_experiments.SPEECH_RUNS` (``transcriber``,
``transcriber_content``) and the document models of
:data:`attnlab.training.hierarchical_experiments.HAN_RUNS` (``han``, ``han_emb``: each with the seeds of
``HAN_SEEDS``) -- default: all of them -- on one CPU thread (the course's cpu-profile policy, set
before PyTorch starts), and writes ``data/checkpoints/<name>.safetensors|.json`` and
``data/results/<name>.json`` (``--no-ship``: the learner's folder ``data/runs`` instead). Then it
prints the captioning and classification tables, read back from the results files.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one thread, as the lessons train

import torch  # noqa: E402

from attnlab.training import hierarchical_experiments as hx  # noqa: E402
from attnlab.training import results  # noqa: E402
from attnlab.training import speech_experiments as spx  # noqa: E402
from attnlab.training import vision_experiments as vx  # noqa: E402

CAPTIONERS = tuple(n for n in vx.VISION_EXPERIMENTS if vx.VISION_EXPERIMENTS[n]["cpu"].family == "captioner")
CLASSIFIERS = ("vit_scenes", "cnn_scenes")
OTHERS = (*spx.SPEECH_RUNS, *hx.HAN_RUNS)


def _train_other(name: str, ship: bool, steps: int | None, produced_by: str) -> None:
    """A speller run, or a HAN run with each of its seeds."""
    if name in spx.SPEECH_RUNS:
        runs = [
            (name, lambda: spx.run(name, ship=ship, produced_by=produced_by, **({"steps": steps} if steps else {})))
        ]
    else:
        runs = [
            (
                hx.run_name(name, seed),
                lambda seed=seed: hx.run(
                    name, seed=seed, ship=ship, produced_by=produced_by, **({"steps": steps} if steps else {})
                ),
            )
            for seed in hx.HAN_SEEDS
        ]
    for out, go in runs:
        _, res = go()
        ckpt = results.checkpoint_path(out, shipped=ship).with_suffix(".safetensors")
        print(
            f"  {out}: {res['train_steps']} steps in {res['train_seconds']} s; "
            f"{ckpt} ({ckpt.stat().st_size / 1e6:.2f} MB)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python scripts/lesson13_experiments.py", description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=[*CAPTIONERS, *CLASSIFIERS, *OTHERS], help="runs (default: all)")
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="preset sizes (default: the active profile)")
    ap.add_argument("--steps", type=int, help="another step budget than the presets' (not for shipping)")
    ap.add_argument("--no-ship", action="store_true", help="write below data/runs instead of the shipped folders")
    args = ap.parse_args(argv)
    for name in args.names:
        if name in OTHERS:
            continue
        try:
            vx.preset(name, args.profile)
        except KeyError as exc:
            ap.error(str(exc.args[0]))
    ship = not args.no_ship
    if ship and args.steps is not None:
        ap.error("--steps changes the budget: the shipped files hold the presets' budgets (add --no-ship)")
    torch.set_num_threads(1)
    produced_by = "python scripts/lesson13_experiments.py " + shlex.join(argv)
    for name in args.names:
        if name in OTHERS:
            print(f"training {name}", flush=True)
            _train_other(name, ship, args.steps, produced_by.strip())
            continue
        exp = vx.preset(name, args.profile)
        print(f"training {name} ({exp.description}), {exp.budget}", flush=True)
        _, res = vx.run(
            name, profile=args.profile, steps=args.steps, ship=ship, progress=False, produced_by=produced_by.strip()
        )
        ckpt = results.checkpoint_path(name, shipped=ship).with_suffix(".safetensors")
        print(f"  {res['train_steps']} steps in {res['train_seconds']} s; {ckpt} ({ckpt.stat().st_size / 1e6:.2f} MB)")
    done = {}
    for name in (*CAPTIONERS, *CLASSIFIERS):
        path = results.results_path(name, shipped=ship)
        if path.exists():
            done[name] = results.read_result(name, shipped=ship)
    for title, group in (("captioning", CAPTIONERS), ("classification", CLASSIFIERS)):
        rows = vx.comparison_rows({n: done[n] for n in group if n in done})
        if rows:
            print(f"\n{title}\n{vx.format_table(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
