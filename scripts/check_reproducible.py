"""Is a lesson's training reproducible? Train one experiment twice in this process and once in a fresh one.

``python scripts/check_reproducible.py [--name bahdanau] [--pair fr] [--steps N]``

Each run uses the lesson's own call (``experiments.run`` with the preset's step budget and seed 0,
nothing written to disk) and the three results are compared field by field, ignoring only the fields
that measure time or the machine's load. It also compares the final weights' sha256. Prints a table
and exits non-zero when two runs differ. Lesson 02's training (``bahdanau``, 1,000 steps) takes
about two minutes per run on one core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TIMING = {
    "train_seconds",
    "tokens_per_second",
    "decode_seconds",
    "sentences_per_second",
    "load_average",
    "date",
    "produced_by",
}


def one_run(name: str, pair: str, steps: int | None) -> dict:
    """Train once as the lesson does; return the results without timing fields, plus the weights' digest."""
    import torch

    from attnlab.core.profiles import use_course_threads
    from attnlab.training import experiments

    use_course_threads()
    model, res = experiments.run(name, pair=pair, steps=steps, progress=False, save=False)
    digest = hashlib.sha256()
    for key, value in sorted(model.state_dict().items()):
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    kept = {k: v for k, v in res.items() if k not in TIMING}
    kept["weights_sha256"] = digest.hexdigest()
    kept["torch_threads_seen"] = torch.get_num_threads()
    return kept


def differences(a: dict, b: dict) -> list[str]:
    """The keys whose values differ between two result dicts."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="bahdanau")
    ap.add_argument("--pair", default="fr")
    ap.add_argument("--steps", type=int, help="override the preset's budget (default: the lesson's)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one run, written to this file
    args = ap.parse_args(argv)
    if args.child:
        args.child.write_text(json.dumps(one_run(args.name, args.pair, args.steps)))
        return 0
    runs = {"process 1, run 1": one_run(args.name, args.pair, args.steps)}
    runs["process 1, run 2"] = one_run(args.name, args.pair, args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, __file__, "--name", args.name, "--pair", args.pair, "--child", str(out)]
        if args.steps:
            cmd += ["--steps", str(args.steps)]
        subprocess.run(cmd, check=True)
        runs["process 2"] = json.loads(out.read_text())
    runs = {k: json.loads(json.dumps(v)) for k, v in runs.items()}  # the same JSON round trip for all three
    ref = runs["process 1, run 1"]
    print(f"{args.name} ({args.pair}), {ref['train_steps']} steps, seed {ref['seed']}, {ref['torch_threads']} thread")
    print(f"{'run':18s} {'BLEU':>7s} {'exact':>7s} {'AER':>7s} {'EM 31-40':>9s}  weights sha256   differs from run 1")
    failed = False
    for label, r in runs.items():
        diff = differences(ref, r)
        failed |= bool(diff)
        aer = "-" if r.get("aer") is None else f"{r['aer']:.4f}"
        print(
            f"{label:18s} {r['bleu']:7.3f} {r['exact_match']:7.4f} {aer:>7s} "
            f"{r['by_bucket']['31-40']['exact_match']:9.4f}  {r['weights_sha256'][:14]}   "
            f"{', '.join(diff) or 'in nothing'}"
        )
    print("identical" if not failed else "NOT identical")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
