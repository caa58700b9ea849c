"""Train and ship lesson 10's copy runs, then measure the lesson-02 model on the copy test split.

Usage::

    OMP_NUM_THREADS=1 nice -n 5 python scripts/lesson10_experiments.py [--queue K/N] [--fate-only]

Runs (:data:`RUNS`; :mod:`attnlab.training.copy_experiments`): seed 0 of the three presets on both pairs, and
seeds 1 and 2 of the pointer-generator (both pairs) and of the convolutional copy network (French): the three
seeds the lesson's comparisons need. Each is shipped as ``NAME[_seedK][_ko]``; a run whose
results are already shipped is skipped, so the command resumes where it stopped. ``--queue K/N`` takes every
N-th run starting at the K-th (0-based), so N processes can share the list.

Afterwards (or with ``--fate-only``) the shipped lesson-02 models ``bahdanau`` and ``bahdanau_ko`` translate the
copy corpus's test split and what each sentence's unknown name or number became is counted
(:func:`attnlab.training.copy_experiments.plain_model_fate`) into
``data/results/comparisons/lesson10_copy.json``.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from attnlab.training import copy_experiments, experiments, results

RUNS = [  # ordered so that --queue 0/2 and 1/2 share the slow convolutional runs evenly
    ("pointer_gen", "ko", 0),
    ("conv_copy", "fr", 0),
    ("pointer_gen", "fr", 0),
    ("conv_copy", "fr", 1),
    ("pointer_nocopy", "fr", 0),
    ("conv_copy", "fr", 2),
    ("pointer_gen", "fr", 1),
    ("conv_copy", "ko", 0),
    ("pointer_gen", "fr", 2),
    ("pointer_nocopy", "ko", 0),
    ("pointer_gen", "ko", 1),
    ("pointer_gen", "ko", 2),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queue", default="0/1", help="K/N: every N-th run from the K-th")
    ap.add_argument("--fate-only", action="store_true")
    args = ap.parse_args(argv)
    k, n = map(int, args.queue.split("/"))
    failed = 0
    if not args.fate_only:
        for name, pair, seed in RUNS[k::n]:
            out = experiments.seed_result_name(name, pair, seed)
            if results.results_path(out, shipped=True).exists():
                print(f"{out}: shipped, skipped", flush=True)
                continue
            print(f"{out}: training", flush=True)
            try:
                _, res = copy_experiments.run(name, pair=pair, seed=seed, ship=True, progress=False)
                print(
                    f"{out}: bleu {res['bleu']:.1f} copy {res['copy_all']:.3f} pointer {res['pointer_all']:.3f}",
                    flush=True,
                )
            except Exception:  # one failed run must not stop the queue
                traceback.print_exc()
                failed += 1
    if args.fate_only or k == 0:
        summary = {
            pair: copy_experiments.plain_model_fate(name, pair)
            for name, pair in (("bahdanau", "fr"), ("bahdanau_ko", "ko"))
        }
        results.write_comparison("lesson10_copy", {"plain_model": summary})
        print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
