"""Ship the toy runs that lessons 1, 3, 5 and 6 train in their own cells (:mod:`attnlab.course.toys`).

``python scripts/lesson05_06_toys.py [NAME ...]`` trains each toy run (default: all of them) with seed 0 and
its lesson's budget, and writes ``data/checkpoints/NAME.{safetensors,json}`` and ``data/results/NAME.json``.
Under ``ATTNLAB_USE_SHIPPED=1`` the lessons load these files instead of training (the browser and
exercise tests open them that way); without it they train the same runs live in seconds.
"""

from __future__ import annotations

import argparse
import json

from attnlab.course import toys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/lesson05_06_toys.py")
    ap.add_argument("names", nargs="*", help=f"toy runs (default: all of {list(toys.TOYS)})")
    args = ap.parse_args(argv)
    for name in args.names or list(toys.TOYS):
        _, res = toys.run(name, ship=True)
        keys = ("train_steps", "train_seconds", "final_loss", "accuracy", "on_target", "exact_match", "same_letters",
                "token_accuracy")
        print(name, json.dumps({k: res[k] for k in keys if k in res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
