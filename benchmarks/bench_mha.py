"""Forward+backward time of multi-head self-attention on CPU: PyTorch vs attnlab's two paths.

Run: ``python benchmarks/bench_mha.py`` (defaults: batch 32, length 128, width 256, 8 heads,
2 threads; ``--causal`` and ``--padding`` add masks). Prints the median time of each variant and
its ratio to ``nn.MultiheadAttention``; the timing itself is :mod:`attnlab.core.benchmark` (lesson 5
calls it too). Targets: fast path <= 1.1x, weights path <= 2x ``nn.MultiheadAttention``
(need_weights=False, PyTorch's own fast configuration). This is a measurement, not a test: nothing
asserts on time.
"""

from __future__ import annotations

import argparse

import torch

from attnlab.core.benchmark import report, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--causal", action="store_true", help="also apply a causal mask")
    parser.add_argument("--padding", action="store_true", help="also pad the batch to random lengths")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, B={args.batch} L={args.length} "
        f"E={args.width} H={args.heads} causal={args.causal} padding={args.padding}, "
        f"median of {args.repeats} (after {args.warmup} warmups)"
    )
    results = run(
        args.batch,
        args.length,
        args.width,
        args.heads,
        causal=args.causal,
        padding=args.padding,
        warmup=args.warmup,
        repeats=args.repeats,
    )
    print(report(results))


if __name__ == "__main__":
    main()
