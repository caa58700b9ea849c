"""Training speed and peak GPU memory of the gpu presets, against :func:`attnlab.training.estimate.estimate`.

Run: ``python scripts/gpu_bench.py [--names rnn_noattn bahdanau transformer] [--steps 60] [--out FILE]``
(part of ``scripts/gpu_check.sh``; see scripts/GPU.md). For each preset, a fresh model trains
``--steps`` optimiser steps through the course's path (:func:`attnlab.training.train.fit_budget`, fastai) on
the English->French training split at the preset's batch size, after ``--warmup`` steps that are
not timed (CUDA start-up, kernel selection). Printed and written as JSON: steps/s, target tokens/s,
``torch.cuda.max_memory_allocated`` of the timed steps, and the estimate's total for the same batch
size (at the corpus's longest sentences, so it should lie above the measured peak). With CUDA, each
preset is also run under bf16 autocast (fastai's ``MixedPrecision``), to see whether it pays.

Without CUDA (the CPU rehearsal) it runs the same steps on the CPU and records no peak memory. A
measurement, not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import torch

from attnlab.core.profiles import ProfileWarning, get_device, use_course_threads
from attnlab.data.corpus import load_splits
from attnlab.data.loaders import make_dataloaders
from attnlab.data.vocab import build_vocabs
from attnlab.training import experiments
from attnlab.training.estimate import estimate
from attnlab.training.train import fit_budget, set_seed

MiB = 2**20


def measure(name: str, data, loaders: dict, device: torch.device, steps: int, warmup: int, precision: str) -> dict:
    """Train a fresh ``name`` (gpu preset) ``warmup`` + ``steps`` steps; the timed part's figures.

    ``loaders`` caches the DataLoaders by batch size (encoding the training split takes seconds).
    """
    splits, src_vocab, tgt_vocab = data
    exp = experiments.preset(name, "gpu")
    set_seed(0)
    if exp.bs not in loaders:
        loaders[exp.bs] = make_dataloaders(splits, src_vocab, tgt_vocab, bs=exp.bs, device=device, seed=0)
    dls = loaders[exp.bs]
    model = experiments.build_model(exp, src_vocab, tgt_vocab).to(device)
    cbs = []
    if precision == "bf16":
        from fastai.callback.fp16 import MixedPrecision

        cbs = [MixedPrecision(amp_mode="bf16")]
    kw = dict(lr=exp.lr, wd=exp.wd, label_smoothing=exp.label_smoothing, progress=False, profile="gpu", cbs=cbs)
    fit_budget(model, dls, steps=warmup, **kw)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    _, stats = fit_budget(model, dls, steps=steps, **kw)  # a new Learner: Adam's state is allocated again
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    est = estimate(model, exp.bs, src_len=41, tgt_len=55)
    return {
        "name": name,
        "precision": precision,
        "bs": exp.bs,
        "params": est["params"],
        "steps": stats.steps,
        "train_seconds": stats.seconds,
        "wall_seconds": round(wall, 2),
        "steps_per_second": round(stats.steps / max(stats.seconds, 1e-9), 2),
        "tokens_per_second": stats.tokens_per_second,
        "final_loss": stats.final_loss,
        "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "estimate_total_bytes": est["total_bytes_estimate"],
        "estimate_activation_bytes": est["activation_bytes_estimate"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", nargs="+", default=["rnn_noattn", "bahdanau", "transformer"])
    ap.add_argument("--steps", type=int, default=60, help="timed optimiser steps per preset")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--no-bf16", action="store_true", help="skip the bf16-autocast runs")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfileWarning)  # the rehearsal runs the gpu presets on the CPU on purpose
        device = get_device("gpu")
    use_course_threads("gpu")  # ATTNLAB_THREADS when set (gpu_check.sh sets it), else PyTorch's default
    splits = load_splits(target="fr")
    data = (splits, *build_vocabs(splits))
    precisions = ["fp32"] + ([] if args.no_bf16 or device.type != "cuda" else ["bf16"])
    env = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(env))
    print(f"{'preset':12s} {'prec':5s} {'steps/s':>8s} {'tok/s':>10s} {'peak MiB':>9s} {'est. MiB':>9s}", flush=True)
    rows, loaders = [], {}
    for name in args.names:
        for precision in precisions:
            r = measure(name, data, loaders, device, args.steps, args.warmup, precision)
            rows.append(r)
            peak = f"{r['peak_bytes'] / MiB:9.0f}" if r["peak_bytes"] is not None else f"{'-':>9s}"
            print(
                f"{name:12s} {precision:5s} {r['steps_per_second']:8.2f} {r['tokens_per_second']:10.0f} {peak} "
                f"{r['estimate_total_bytes'] / MiB:9.0f}",
                flush=True,
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**env, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
