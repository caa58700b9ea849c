"""Naive vs tiled (online-softmax) vs PyTorch's fused attention: time and peak memory against N.

Run: ``python benchmarks/bench_scale.py`` (defaults: one head of width 64, N = 256 ... 8192,
block 256, 1 thread; ``--threads``, ``--block``, ``--max-n``, ``--min-run-time``, ``--json PATH``).

Four tables, each with the exponents of the log-log fits:

1. for each N the median forward time (``torch.utils.benchmark``) and the peak tensor memory of
   the forward pass (:func:`attnlab.core.scale.peak_memory`, every allocation tracked; inputs not
   counted) of the three, with the ratios side by side. SDPA's figure is a lower bound: the
   tracker sees the tensors an operator returns, not the scratch buffers inside a fused kernel;
2. the peak memory of the forward pass on the causal path and with a whole ``(N, N)`` boolean mask
   (the mask itself is an input, not counted);
3. the peak memory of one training step (forward + backward, causal), autograd through naive
   attention against :class:`attnlab.core.scale.FlashAttentionFunction`'s recomputing backward,
   N = 1024 ... 8192; the gradients are held at the end, so both peaks include them;
4. the key/value cache of the course Transformer with 4, 2 and 1 key/value heads, measured on real
   cache tensors against the formula ``2 L Hkv D T B bytes``.

Targets (Dao et al.'s claims, checked here): at N = 4096 the tiled forward peak is at most 1/20 of
the naive one on the plain, causal and masked paths, with a fitted exponent near 1, and the tiled
training step's at most 1/10. A measurement, not a test: nothing asserts on time. ``--json`` writes
the figures (the lesson reads ``benchmarks/bench_scale.json``).
"""

from __future__ import annotations

import argparse
import json
import platform

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
    training_step,
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


def masked_table(ns: list[int], block: int, head_dim: int) -> list[dict]:
    """Forward peak memory on the causal path and with a whole (N, N) bool mask."""
    rows = []
    g = torch.Generator().manual_seed(0)
    for n in ns:
        q, k, v = (torch.randn(1, 1, n, head_dim, generator=g) for _ in range(3))  # (B, H, N, D)
        keep = torch.rand(n, n, generator=g) > 0.1  # (N, N), an input: not counted
        row = {"N": n}
        with torch.no_grad():
            for path, kw in (("causal", {"causal": True}), ("mask", {"attn_keep": keep})):
                row[f"naive_{path}_B"] = peak_memory(naive_attention, q, k, v, **kw)
                row[f"tiled_{path}_B"] = peak_memory(tiled_attention, q, k, v, block_size=block, **kw)
        rows.append(row)
        print(
            f"{n:6d} | {row['naive_causal_B'] / 2**20:9.2f} {row['tiled_causal_B'] / 2**20:8.2f} "
            f"{row['naive_causal_B'] / row['tiled_causal_B']:8.1f}x | {row['naive_mask_B'] / 2**20:9.2f} "
            f"{row['tiled_mask_B'] / 2**20:8.2f} {row['naive_mask_B'] / row['tiled_mask_B']:8.1f}x",
            flush=True,
        )
    return rows


def training_table(ns: list[int], block: int, head_dim: int) -> list[dict]:
    """Peak memory of forward + backward (causal) through naive attention and through the recomputing backward."""
    rows = []
    g = torch.Generator().manual_seed(0)
    for n in ns:
        q, k, v = (torch.randn(1, 1, n, head_dim, generator=g).requires_grad_() for _ in range(3))  # (B, H, N, D)
        dout = torch.randn(1, 1, n, head_dim, generator=g)  # (B, H, N, D)
        row = {"N": n, "naive_train_B": peak_memory(training_step, naive_attention, q, k, v, dout, causal=True)}
        row["tiled_train_B"] = peak_memory(training_step, tiled_attention, q, k, v, dout, causal=True, block_size=block)
        rows.append(row)
        print(
            f"{n:6d} | {row['naive_train_B'] / 2**20:9.2f} {row['tiled_train_B'] / 2**20:8.2f} "
            f"{row['naive_train_B'] / row['tiled_train_B']:8.1f}x",
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
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ns = [n for n in (256, 512, 1024, 2048, 4096, 8192) if n <= args.max_n]
    print(f"threads={args.threads}, block={args.block}, one head of width {args.head_dim}, float32")
    print("\n1. forward pass (SDPA's memory is a lower bound: a fused kernel's scratch buffers are not seen)")
    print(f"{'N':>6s} {'naive ms':>9s} {'tiled ms':>9s} {'sdpa ms':>9s} {'t/n':>8s} | "
          f"{'naive MiB':>9s} {'tiled':>8s} {'sdpa':>8s} {'n/t':>9s} | max|tiled-sdpa|")
    rows = attention_table(ns, args.block, args.head_dim, args.min_run_time)
    # Below N ~ 1024 the tiled peak is the fixed (block x block) tile; above, the O(N d) output: the
    # memory slopes are fitted from N = 1024 on, where the question (N or N^2?) is decided.
    big = [i for i, n in enumerate(ns) if n >= 1024]

    def slope(values):
        return fitted_exponent([ns[i] for i in big], [values[i] for i in big]) if len(big) > 1 else float("nan")

    for name in ("naive", "tiled", "sdpa"):
        print(f"log-log slope of {name}: time {fitted_exponent(ns, [r[f'{name}_s'] for r in rows]):.2f}, "
              f"memory (N >= 1024) {slope([r[f'{name}_B'] for r in rows]):.2f}")
    print("\n2. forward pass, causal and with a whole (N, N) bool mask: peak MiB")
    print(f"{'N':>6s} | {'naive':>9s} {'tiled':>8s} {'n/t':>9s} | {'naive':>9s} {'tiled':>8s} {'n/t':>9s}")
    masked = masked_table(ns, args.block, args.head_dim)
    for path in ("causal", "mask"):
        print(f"log-log slope (N >= 1024), {path}: naive {slope([r[f'naive_{path}_B'] for r in masked]):.2f}, "
              f"tiled {slope([r[f'tiled_{path}_B'] for r in masked]):.2f}")
    train_ns = [n for n in ns if n >= 1024]
    print("\n3. one training step (forward + backward, causal): peak MiB")
    print(f"{'N':>6s} | {'naive':>9s} {'flash':>8s} {'n/f':>9s}")
    train = training_table(train_ns, args.block, args.head_dim)
    if len(train_ns) > 1:
        print(f"log-log slope, training: naive {fitted_exponent(train_ns, [r['naive_train_B'] for r in train]):.2f}, "
              f"flash {fitted_exponent(train_ns, [r['tiled_train_B'] for r in train]):.2f}")
    at = {r["N"]: r for r in rows}
    if 4096 in at:
        m4 = next(r for r in masked if r["N"] == 4096)
        t4 = next(r for r in train if r["N"] == 4096)
        print(f"\nN=4096: tiled forward peak = 1/{at[4096]['naive_B'] / at[4096]['tiled_B']:.0f} (plain), "
              f"1/{m4['naive_causal_B'] / m4['tiled_causal_B']:.0f} (causal), "
              f"1/{m4['naive_mask_B'] / m4['tiled_mask_B']:.0f} (mask) of naive's (target <= 1/20); "
              f"training step 1/{t4['naive_train_B'] / t4['tiled_train_B']:.0f} (target <= 1/10)")
    cache_table()
    if args.json:
        info = {"threads": args.threads, "block": args.block, "head_dim": args.head_dim, "machine": platform.machine(),
                "torch": torch.__version__}
        with open(args.json, "w") as f:
            json.dump({"settings": info, "forward": rows, "masked": masked, "training": train}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
