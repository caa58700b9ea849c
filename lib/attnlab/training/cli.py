"""``python -m attnlab.training PRESET``: train one course model outside the lessons (see :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from attnlab.core.profiles import get_device
from attnlab.training import experiments, results
from attnlab.training.train import is_main_process, main_process_first, process_device, world_size


def _model_field(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``--model``: the value read as JSON (numbers, true/false/null), else as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--model takes KEY=VALUE (e.g. hid_dim=256), got {text!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.training PRESET ...``: train one course model and write its checkpoint and results.

    It calls :func:`attnlab.training.experiments.run`, so a model trained here is trained exactly as in the
    lessons and written in the same format (below ``data/runs``, or the shipped folders with
    ``--ship``). Launched by ``accelerate launch --num_processes N -m attnlab.training ...`` it trains
    on N processes (see the module docstring); rank 0 prints one JSON line of results.

    Args:
        argv: the arguments (default ``sys.argv[1:]``); ``--help`` lists them.

    Returns:
        The exit status (0). Bad arguments exit with status 2 and a message, as argparse does.
    """


    argv = list(sys.argv[1:] if argv is None else argv)
    names = sorted(experiments.EXPERIMENTS)
    ap = argparse.ArgumentParser(
        prog="python -m attnlab.training",
        description="Train one course model (a preset of attnlab.training.experiments) through the fastai toolkit.",
        epilog="Several processes: accelerate launch --num_processes N -m attnlab.training PRESET ... "
        "(bs is per process; the global batch is bs x N).",
    )
    ap.add_argument("preset", metavar="PRESET", help=f"one of: {', '.join(names)}")
    ap.add_argument("--pair", choices=experiments.PAIRS, default="fr", help="target language (default: fr)")
    ap.add_argument(
        "--corpus", metavar="PATH.tsv", help="train on this English<TAB>French file (streamed; subword vocabularies)"
    )
    budget = ap.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, metavar="N", help="budget in optimiser steps (default: the preset's)")
    budget.add_argument("--seconds", type=float, metavar="S", help="a time budget (not reproducible; 1 process)")
    ap.add_argument("--out", metavar="NAME", help="file name of the checkpoint and results (default: the preset's)")
    ap.add_argument("--profile", choices=("cpu", "gpu"), help="preset sizes (default: gpu where CUDA is, else cpu)")
    ap.add_argument("--ship", action="store_true", help="write the committed data/checkpoints and data/results")
    ap.add_argument("--seed", type=int, default=0, metavar="N", help="training seed (default: 0)")
    ap.add_argument("--bs", type=int, metavar="N", help="batch size per process (default: the preset's)")
    ap.add_argument(
        "--model", action="append", default=[], metavar="KEY=VALUE", help="a model-config field, e.g. hid_dim=256"
    )
    ap.add_argument("--curve-every", type=int, metavar="N", help="a learning curve every N steps (longest bucket)")
    corpus = ap.add_argument_group("corpus sizes")
    corpus.add_argument("--n-train", type=int, metavar="N", help="generated corpus: training pairs (100,000)")
    corpus.add_argument("--n-valid", type=int, metavar="N", help="validation pairs (2,000; --corpus: 1,000)")
    corpus.add_argument(
        "--test-per-bucket", type=int, metavar="N", help="generated corpus: test pairs per length bucket (500)"
    )
    corpus.add_argument("--n-test", type=int, metavar="N", help="--corpus: test pairs held out (1,000)")
    corpus.add_argument("--subword-vocab", type=int, metavar="N", help="--corpus: pieces per side (preset: 8,000)")
    args = ap.parse_args(argv)

    if args.preset not in experiments.EXPERIMENTS:
        ap.error(f"unknown preset {args.preset!r}; choose one of: {', '.join(names)}")
    sizes = {k: getattr(args, k) for k in ("n_train", "n_valid", "test_per_bucket") if getattr(args, k) is not None}
    if args.corpus is not None and {"n_train", "test_per_bucket"} & set(sizes):
        ap.error("--n-train/--test-per-bucket size the generated corpus; they do not apply to --corpus")
    if args.corpus is None and args.n_test is not None:
        ap.error("--n-test is the test split held out of --corpus; the generated corpus takes --test-per-bucket")
    if args.corpus is None and args.subword_vocab is not None:
        ap.error("--subword-vocab applies to --corpus only (the generated corpus has word vocabularies)")
    try:  # every check that needs no data, before any corpus is generated or read
        model_config = dict(_model_field(f) for f in args.model)
        exp = experiments.preset(args.preset, args.profile).with_changes(
            model=model_config, bs=args.bs, subword_vocab=args.subword_vocab
        )
        exp.with_budget(steps=args.steps, seconds=args.seconds)
        experiments.max_steps()
        processes = world_size()
        if processes > 1 and args.seconds is not None:
            raise ValueError(f"--seconds cannot be used with {processes} processes (they would fall out of step)")
        out = experiments._check_out(args.out) if args.out is not None else None
        if args.corpus is not None:
            if args.pair != "fr":
                raise ValueError(f"--corpus reads English->French files; --pair {args.pair} does not apply")
            experiments.check_real_corpus(exp, args.pair, args.curve_every)
            if not Path(args.corpus).is_file():
                raise ValueError(f"--corpus {args.corpus}: no such file")
    except ValueError as exc:
        ap.error(str(exc))
    pair = args.pair
    if args.corpus is not None:
        # the tokenizers and token ids go beside the checkpoint; rank 0 builds them, the others reuse them
        name = out or experiments.result_name(args.preset, pair)
        prepared = results.checkpoint_path(name, shipped=args.ship).parent / f"{name}.corpus"
        on_cpu = process_device(get_device(args.profile)).type == "cpu"
        held_out = {k: v for k, v in (("valid", args.n_valid), ("test", args.n_test)) if v is not None}
        try:
            with main_process_first(cpu=on_cpu):
                data = experiments.corpus_data(args.corpus, exp, prepared, seed=args.seed, **held_out)
        except ValueError as exc:  # e.g. a vocabulary the file is too small for: the message says what to use
            ap.error(f"--corpus {args.corpus}: {exc}")
    else:
        data = experiments.synthetic_data(pair, **sizes)
    main_process = is_main_process()
    if main_process:
        print(
            f"training {args.preset} ({exp.description}) on {processes} process(es), batch {exp.bs} x {processes}",
            flush=True,
        )
    model, res = experiments.run(
        args.preset,
        pair=pair,
        profile=args.profile,
        steps=args.steps,
        seconds=args.seconds,
        curve_every=args.curve_every,
        progress=False,
        ship=args.ship,
        seed=args.seed,
        data=data,
        produced_by="python -m attnlab.training " + shlex.join(argv),
        out=out,
        model_config=model_config or None,
        bs=args.bs,
    )
    if main_process:
        keys = ("model", "bleu", "exact_match", "train_steps", "train_seconds", "world_size", "global_batch")
        summary = {k: res.get(k) for k in keys}
        ckpt = results.checkpoint_path(res["model"], shipped=args.ship)
        summary["checkpoint"] = str(ckpt.with_suffix(".safetensors"))
        summary["results"] = str(results.results_path(res["model"], shipped=args.ship))
        print(json.dumps(summary), flush=True)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    return 0
