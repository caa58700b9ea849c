"""Naive vs tiled (online-softmax) vs PyTorch's fused attention: time and peak memory against N.

Run: ``python benchmarks/bench_scale.py`` (defaults: one head of width 64, N = 256 ... 8192,
block 256, 1 thread; ``--threads``, ``--block``, ``--max-n``, ``--min-run-time``).

For each N it prints the median forward time (``torch.utils.benchmark``) and the peak tensor memory
of the forward pass (:func:`attnlab.core.scale.peak_memory`, every allocation tracked; inputs not
counted) of the three, with the ratios naive / tiled side by side, and the exponents of the
log-log fits. Then the key/value cache of the course Transformer with 4, 2 and 1 key/value heads,
measured on real cache tensors against the formula ``2 L Hkv D T B bytes``.
Target: the tiled peak extra memory at N = 8192 is at most 1/20 of the naive one. A measurement,
not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from attnlab.core.scale import (
    fitted_exponent,
    kv_cache_bytes,
    median_seconds,
    naive_attention,
    peak_memory,
    tensor_bytes,
    tiled_attention,
)
from attnlab.models.transformer import Transformer, TransformerConfig


def attention_table(ns: list[int], block: int, head_dim: int, min_run_time: float) -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    for n in ns:
        q, k, v = (torch.randn(1, 1, n, head_dim, generator=g) for _ in range(3))  # (B, H, N, D)
        fns = {
            "naive": lambda q=q, k=k, v=v: naive_attention(q, k, v),
            "tiled": lambda q=q, k=k, v=v: tiled_attention(q, k, v, block_size=block),
            "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
        }
        row = {"N": n}
        with torch.no_grad():
            ref = fns["sdpa"]()
            row["err"] = float((fns["tiled"]() - ref).abs().max())
            for name, fn in fns.items():
                row[f"{name}_s"] = median_seconds(fn, min_run_time=min_run_time)
                row[f"{name}_B"] = peak_memory(fn)
        rows.append(row)
        print(
            f"{n:6d} {row['naive_s'] * 1e3:9.2f} {row['tiled_s'] * 1e3:9.2f} {row['sdpa_s'] * 1e3:9.2f} "
            f"{row['tiled_s'] / row['naive_s']:7.2f}x | {row['naive_B'] / 2**20:9.2f} {row['tiled_B'] / 2**20:8.2f} "
            f"{row['sdpa_B'] / 2**20:8.2f} {row['naive_B'] / row['tiled_B']:8.1f}x | {row['err']:.1e}",
            flush=True,
        )
    return rows


def cache_table() -> None:
    print("\nkey/value cache of the course Transformer (d_model 64, 4 heads, 1 decoder layer), B=8, T=40:")
    print(f"{'Hkv':>4s} {'measured B':>11s} {'formula B':>10s}")
    for h_kv in (4, 2, 1):
        model = Transformer(TransformerConfig(50, 50, d_model=64, num_heads=4, num_decoder_layers=1, num_kv_heads=h_kv))
        model.eval()
        src = torch.randint(4, 50, (8, 12))
        with torch.no_grad():
            memory = model.encode(src)
            state = model.init_state(memory)
            for t in range(40):
                _, state, _ = model.step(memory, state, torch.full((8,), 1), t)
        measured = tensor_bytes(state)
        formula = kv_cache_bytes(layers=1, kv_heads=h_kv, head_dim=16, tokens=40, batch=8, bytes_per=4)
        print(f"{h_kv:4d} {measured:11,d} {formula:10,d} {'ok' if measured == formula else 'MISMATCH'}")
    print("published: 80 layers, d=128, T=4096, fp16 -> "
          f"8 KV heads {kv_cache_bytes(layers=80, kv_heads=8, head_dim=128, tokens=4096, bytes_per=2) / 1e9:.2f} GB, "
          f"64 KV heads {kv_cache_bytes(layers=80, kv_heads=64, head_dim=128, tokens=4096, bytes_per=2) / 1e9:.2f} GB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--max-n", type=int, default=8192)
    ap.add_argument("--min-run-time", type=float, default=0.3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ns = [n for n in (256, 512, 1024, 2048, 4096, 8192) if n <= args.max_n]
    print(f"threads={args.threads}, block={args.block}, one head of width {args.head_dim}, float32, forward only")
    print(f"{'N':>6s} {'naive ms':>9s} {'tiled ms':>9s} {'sdpa ms':>9s} {'t/n':>8s} | "
          f"{'naive MiB':>9s} {'tiled':>8s} {'sdpa':>8s} {'n/t':>9s} | max|tiled-sdpa|")
    rows = attention_table(ns, args.block, args.head_dim, args.min_run_time)
    for name in ("naive", "tiled", "sdpa"):
        print(f"log-log slope of {name}: time {fitted_exponent(ns, [r[f'{name}_s'] for r in rows]):.2f}, "
              f"memory {fitted_exponent(ns, [r[f'{name}_B'] for r in rows]):.2f}")
    last = rows[-1]
    print(f"N={last['N']}: tiled peak = 1/{last['naive_B'] / last['tiled_B']:.0f} of naive's (target <= 1/20)")
    cache_table()


if __name__ == "__main__":
    main()
