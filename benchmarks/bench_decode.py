"""Greedy decoding speed of the Transformer with and without its key/value cache.

Run: ``python benchmarks/bench_decode.py`` (defaults: the trained ``transformer`` checkpoint, the
2,000-sentence test split, batches of 250, greedy, the current torch thread count). Both runs go
through :func:`attnlab.models.decoding.translate`, the function behind the course's
``sentences_per_second``; the script prints sentences/second side by side, the speed-up, and
checks that both runs produce the same translations. Target: the test split in <= 5 s with the
cache (a prototype without one needed 18-40 s on a 2-core CPU). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from attnlab.data.corpus import load_splits
from attnlab.data.vocab import build_vocabs
from attnlab.models.decoding import translate
from attnlab.training.experiments import load_trained


def run(name: str = "transformer", limit: int | None = None, bs: int = 250, beam: int = 1) -> dict:
    """Decode the test split with and without the cache; returns the measurements as a dict."""
    model, meta, source = load_trained(name)
    if not hasattr(model, "kv_cache"):
        raise SystemExit(f"{name!r} is not a Transformer checkpoint (no key/value cache to switch)")
    splits = load_splits()
    src_vocab, tgt_vocab = build_vocabs(splits)
    if src_vocab != meta["src_vocab"] or tgt_vocab != meta["tgt_vocab"]:
        raise SystemExit(f"{name!r} was trained with other vocabularies than the current corpus")
    sources = [p.src for p in splits.test[:limit]]
    translate(model, sources[:bs], src_vocab, tgt_vocab, beam=beam, bs=bs)  # warm-up
    timings, outputs = {}, {}
    for label, enabled in (("with cache", True), ("without cache", False)):
        with model.kv_cache(enabled):
            outputs[label], _, timings[label] = translate(model, sources, src_vocab, tgt_vocab, beam=beam, bs=bs)
    same = outputs["with cache"] == outputs["without cache"]
    n = len(sources)
    return {
        "checkpoint": f"{name} ({source})",
        "sentences": n,
        "beam": beam,
        "threads": torch.get_num_threads(),
        "load_average": round(os.getloadavg()[0], 2),
        "seconds": {k: round(v, 2) for k, v in timings.items()},
        "sentences_per_second": {k: round(n / v, 1) for k, v in timings.items()},
        "speedup": round(timings["without cache"] / timings["with cache"], 2),
        "same_translations": same,
    }


def main(argv=None) -> int:
    """CLI; prints a small table and the JSON of the measurements."""
    ap = argparse.ArgumentParser(prog="python benchmarks/bench_decode.py", description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="transformer", help="experiment name of the checkpoint")
    ap.add_argument("--limit", type=int, help="decode only the first N test sentences")
    ap.add_argument("--bs", type=int, default=250, help="sentences per batch")
    ap.add_argument("--beam", type=int, default=1, help="beam width (1 = greedy)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    r = run(args.name, args.limit, args.bs, args.beam)
    setting = f"beam {r['beam']}, {r['threads']} thread(s), load average {r['load_average']}"
    print(f"{r['checkpoint']}: {r['sentences']} test sentences, {setting}")
    print(f"{'':>15s} {'seconds':>8s} {'sentences/s':>12s}")
    for label in ("with cache", "without cache"):
        print(f"{label:>15s} {r['seconds'][label]:8.2f} {r['sentences_per_second'][label]:12.1f}")
    print(f"speed-up of the cache: {r['speedup']:.2f}x; same translations: {r['same_translations']}")
    print(json.dumps(r))
    return 0 if r["same_translations"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
