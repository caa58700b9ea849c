"""Train and ship lesson 13's models, then print their comparison tables.

    python scripts/lesson13_experiments.py [NAME ...] [--profile cpu|gpu] [--steps N] [--no-ship]

Trains each named preset of :mod:`attnlab.training.vision_experiments` (default: all four, ``captioner``,
``captioner_ds``, ``vit_scenes``, ``cnn_scenes``) on one CPU thread -- the course's cpu-profile
policy, set before PyTorch starts -- and writes ``data/checkpoints/<name>.safetensors|.json`` and
``data/results/<name>.json`` (``--no-ship``: the learner's folder ``data/runs`` instead). Then it
prints the captioning table (doubly stochastic penalty off vs on) and the classification table
(the ViT beside the CNN), read back from the results files.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one thread, as the lessons train

import torch  # noqa: E402

from attnlab.training import results  # noqa: E402
from attnlab.training import vision_experiments as vx  # noqa: E402

CAPTIONERS = ("captioner", "captioner_ds")
CLASSIFIERS = ("vit_scenes", "cnn_scenes")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python scripts/lesson13_experiments.py", description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=[*CAPTIONERS, *CLASSIFIERS], help="presets (default: all four)")
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="preset sizes (default: the active profile)")
    ap.add_argument("--steps", type=int, help="another step budget than the presets' (not for shipping)")
    ap.add_argument("--no-ship", action="store_true", help="write below data/runs instead of the shipped folders")
    args = ap.parse_args(argv)
    for name in args.names:
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
