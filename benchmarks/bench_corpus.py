"""Real-corpus pipeline at two sizes: tokenizer training, encoding, DataLoader speed, peak memory.

Run: ``python benchmarks/bench_corpus.py`` (defaults: 200,000 and 1,000,000 pairs; WMT'14 En→Fr has
about 36M, and 1M is enough to measure the rates). ``--pairs 100000 300000`` runs smaller.

The corpus is the course's own English→French generator (:func:`attnlab.data.corpus.generate_pairs`)
written as an ``English<TAB>French`` file, 10,000 pairs at a time, so generating it needs no memory
either; the smaller file is the first lines of the larger one. Each size then runs in a fresh
Python process (peak memory is per process) through :func:`attnlab.data.realcorpus.prepare` and one
pass of ``--batches`` training batches, and the script prints the figures side by side:

* tokenizer training time (both sides, on a sample of at most ``--sample`` pairs);
* encoding throughput, sentence pairs/s and subword tokens/s (both sides, streamed to the memmaps);
* DataLoader batches/s (and pairs/s) of the length-bucketed training loader;
* peak memory: the process's peak resident set (``VmHWM``, which includes the pages of the memory-
  mapped token files it has read: the kernel can drop those at any time) and the peak of its own
  heap (``RssAnon`` sampled every 5 ms), both above the baseline after the imports.

Flat memory means the second size's peaks match the first's although its file is several times
larger. Wall times on a busy machine mislead, so CPU seconds are printed beside them. The generated
corpus has only ~140 English words, so ``--vocab-size`` is small (120 by default; real corpora use
8,000-32,000 pieces); ``--gettext`` adds a run on genuine English→French text, the message catalogs
installed under ``/usr/share/locale/fr`` (kept in ``--workdir``, never in the repository). A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _text(tokens) -> str:
    s = " ".join(tokens[:-1]) + tokens[-1]
    return s[:1].upper() + s[1:]


def write_generated(path: Path, n: int, chunk: int = 10_000) -> None:
    """``n`` generated pairs as ``English<TAB>French`` lines, ``chunk`` at a time (seed = chunk number)."""
    from attnlab.data.corpus import generate_pairs

    with open(path, "w", encoding="utf-8") as f:
        for i, start in enumerate(range(0, n, chunk)):
            for p in generate_pairs(min(chunk, n - start), seed=1000 + i):
                f.write(f"{_text(p.src)}\t{_text(p.tgt)}\n")


def write_prefix(src: Path, dst: Path, n: int) -> None:
    """The first ``n`` lines of ``src``."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        for i, line in enumerate(f):
            if i == n:
                break
            g.write(line)


def write_gettext(path: Path, locale_dir: str = "/usr/share/locale/fr/LC_MESSAGES") -> int:
    """English→French pairs of the installed gettext catalogs (msgid → msgstr); returns how many."""
    import gettext

    pairs: dict[str, str] = {}
    for mo in sorted(Path(locale_dir).glob("*.mo")):
        try:
            with open(mo, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError, ValueError, KeyError):  # a damaged catalog is passed over
            continue
        for en, fr in catalog.items():
            if isinstance(en, str) and isinstance(fr, str) and en.strip() and fr.strip() and en != fr:
                pairs.setdefault(" ".join(en.split()), " ".join(fr.split()))  # no tab or newline left
    with open(path, "w", encoding="utf-8") as f:
        for en, fr in pairs.items():
            f.write(f"{en}\t{fr}\n")
    return len(pairs)


class _HeapSampler(threading.Thread):
    """Samples ``RssAnon`` (anonymous resident memory: the heap, not mapped files) every ``every`` s."""

    def __init__(self, every: float = 0.005):
        super().__init__(daemon=True)
        self.every, self.peak, self.stop = every, 0, threading.Event()

    @staticmethod
    def rss_anon() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss_anon())
            time.sleep(self.every)


def _vm_hwm() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def child(args) -> dict:
    """One size, in this process: prepare, iterate batches, measure."""
    import torch  # noqa: F401  (imported before the baseline: every real run has it loaded)
    from fastai.data.core import DataLoaders  # noqa: F401

    from attnlab.data import realcorpus

    base_hwm, base_anon = _vm_hwm(), _HeapSampler.rss_anon()
    sampler = _HeapSampler()
    sampler.start()
    cpu0, t0 = time.process_time(), time.perf_counter()
    rc = realcorpus.prepare(
        args.child, args.out, vocab_size=args.vocab_size, valid=args.valid, test=args.test, sample=args.sample,
        max_len=args.max_len, threads=args.threads, character_coverage=args.character_coverage, rebuild=True,
        model_type=args.model_type,
    )  # fmt: skip
    prepare_cpu, prepare_wall = time.process_time() - cpu0, time.perf_counter() - t0
    m = rc.manifest
    after_prepare_hwm, after_prepare_anon = _vm_hwm(), sampler.peak

    dls = rc.dataloaders(bs=args.bs, device="cpu", seed=0)
    n_batches = pairs = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    while n_batches < args.batches:
        for b in dls.train:
            n_batches += 1
            pairs += b[0].shape[0]
            if n_batches >= args.batches:
                break
    dl_cpu, dl_wall = time.process_time() - cpu0, time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    tokens = sum(s["tokens"]["src"] + s["tokens"]["tgt"] for s in m["splits"].values())
    encoded = sum(s["pairs"] for s in m["splits"].values())
    held = rc.held_out("test")
    exact = sum(rc.detokenize_tgt(rc.tgt_tokenizer.encode(x.fr)) == x.fr for x in held)
    return {
        "file": str(args.child),
        "file_mb": round(Path(args.child).stat().st_size / 1e6, 1),
        "pairs": m["lines"]["good"],
        "tokenizer_sample": m["lines"]["tokenizer_sample"],
        "vocab_sizes": m["vocab_sizes"],
        "threads": args.threads,
        "wall": m["seconds"],
        "cpu": m["cpu_seconds"],
        "prepare_wall": round(prepare_wall, 2),
        "prepare_cpu": round(prepare_cpu, 2),
        "encode_pairs_per_s": round(encoded / m["cpu_seconds"]["encode"]),
        "encode_tokens_per_s": round(tokens / m["cpu_seconds"]["encode"]),
        "tokens_per_pair": round(tokens / max(encoded, 1), 1),
        "batches": n_batches,
        "bs": args.bs,
        "batches_per_s": round(n_batches / dl_cpu, 1),
        "batches_per_s_wall": round(n_batches / dl_wall, 1),
        "pairs_per_s": round(pairs / dl_cpu),
        "disk_mb": round(sum(p.stat().st_size for p in rc.files.values()) / 1e6, 1),
        "peak_rss_mb": round((_vm_hwm() - base_hwm) / 1e6, 1),
        "peak_rss_prepare_mb": round((after_prepare_hwm - base_hwm) / 1e6, 1),
        "peak_heap_mb": round((sampler.peak - base_anon) / 1e6, 1),
        "peak_heap_prepare_mb": round((after_prepare_anon - base_anon) / 1e6, 1),
        "baseline_rss_mb": round(base_hwm / 1e6, 1),
        "test_round_trip": f"{exact}/{len(held)}",
        "load_average": round(os.getloadavg()[0], 2),
    }


def _run_child(script: Path, tsv: Path, out: Path, args) -> dict:
    cmd = [sys.executable, str(script), "--child", str(tsv), "--out", str(out)]
    keys = ("vocab_size", "model_type", "valid", "test", "sample", "bs", "batches", "threads", "character_coverage",
            "max_len")
    for k in keys:
        v = getattr(args, k)
        if v is not None:
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"the run on {tsv} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def table(rows: list[dict], labels: list[str]) -> str:
    """The figures side by side, one column per run."""
    spec = [
        ("pairs", "pairs in the file", "{:,}"),
        ("file_mb", "file MB", "{}"),
        ("tokenizer_sample", "tokenizer sample (pairs)", "{:,}"),
        ("vocab", "pieces (en / fr)", "{}"),
        ("tok_cpu", "tokenizer training, CPU s", "{:.2f}"),
        ("scan_cpu", "scan pass, CPU s", "{:.2f}"),
        ("encode_cpu", "encode pass, CPU s", "{:.2f}"),
        ("encode_pairs_per_s", "encoding, pairs/s (CPU)", "{:,}"),
        ("encode_tokens_per_s", "encoding, tokens/s (CPU)", "{:,}"),
        ("tokens_per_pair", "subword tokens per pair", "{}"),
        ("prepare", "prepare, wall s (CPU s)", "{}"),
        ("batches_per_s", "DataLoader batches/s (CPU)", "{}"),
        ("pairs_per_s", "DataLoader pairs/s (CPU)", "{:,}"),
        ("peak_heap_mb", "peak heap above baseline, MB", "{}"),
        ("peak_heap_prepare_mb", "  of it during prepare, MB", "{}"),
        ("peak_rss_mb", "peak RSS above baseline, MB", "{}"),
        ("disk_mb", "prepared files on disk, MB", "{}"),
        ("test_round_trip", "test refs: detok(enc(fr)) == fr", "{}"),
        ("load_average", "load average", "{}"),
    ]
    for r in rows:
        r["vocab"] = f"{r['vocab_sizes']['src']} / {r['vocab_sizes']['tgt']}"
        r["tok_cpu"], r["scan_cpu"], r["encode_cpu"] = r["cpu"]["tokenizers"], r["cpu"]["scan"], r["cpu"]["encode"]
        r["prepare"] = f"{r['prepare_wall']} ({r['prepare_cpu']})"
    width = max(14, *(len(s) + 2 for s in labels))
    lines = [f"{'':34s}" + "".join(f"{s:>{width}s}" for s in labels)]
    for key, label, fmt in spec:
        lines.append(f"{label:34s}" + "".join(f"{fmt.format(r[key]):>{width}s}" for r in rows))
    return "\n".join(lines)


def main(argv=None) -> int:
    """CLI: generate the corpora, run each size in its own process, print the table and the JSON."""
    ap = argparse.ArgumentParser(prog="python benchmarks/bench_corpus.py", description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[200_000, 1_000_000], help="corpus sizes to compare")
    ap.add_argument("--vocab-size", type=int, default=120, help="pieces per side (the generated corpus is small)")
    ap.add_argument("--model-type", default="unigram", choices=("unigram", "bpe"), help="SentencePiece model")
    ap.add_argument("--sample", type=int, default=50_000, help="most pairs the tokenizers are trained on")
    ap.add_argument("--valid", type=int, default=1000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--max-len", type=int, default=None, help="drop pairs with more pieces than this")
    ap.add_argument("--character-coverage", type=float, default=1.0)
    ap.add_argument("--bs", type=int, default=64, help="DataLoader batch size")
    ap.add_argument("--batches", type=int, default=2000, help="training batches to time")
    ap.add_argument("--threads", type=int, default=1, help="SentencePiece threads (figures are per CPU second)")
    ap.add_argument("--gettext", action="store_true", help="also run on the installed gettext catalogs (real text)")
    ap.add_argument("--gettext-vocab-size", type=int, default=4000)
    ap.add_argument("--workdir", type=Path, help="where the corpora go (default: a temporary folder, removed)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args)))
        return 0
    sizes = sorted(args.pairs)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    work.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).resolve()
    try:
        biggest = work / f"generated_{sizes[-1]}.tsv"
        if not biggest.exists():
            t = time.perf_counter()
            write_generated(biggest, sizes[-1])
            print(f"generated {sizes[-1]:,} pairs in {time.perf_counter() - t:.0f} s -> {biggest}", flush=True)
        rows, labels = [], []
        for n in sizes:
            tsv = biggest if n == sizes[-1] else work / f"generated_{n}.tsv"
            if not tsv.exists():
                write_prefix(biggest, tsv, n)
            rows.append(_run_child(script, tsv, work / f"prepared_{n}", args))
            labels.append(f"{n:,} pairs")
            print(f"{labels[-1]}: done", flush=True)
        if args.gettext:
            tsv = work / "gettext_fr.tsv"
            n = write_gettext(tsv)
            if n > 2 * (args.valid + args.test):
                real = argparse.Namespace(**{**vars(args), "vocab_size": args.gettext_vocab_size})
                rows.append(_run_child(script, tsv, work / "prepared_gettext", real))
                labels.append("gettext (real)")
            else:
                print(f"only {n} gettext pairs found: no real-text run")
        vocab = f"{args.vocab_size} (generated)" + (f" / {args.gettext_vocab_size} (gettext)" if args.gettext else "")
        print(f"\nbatch size {args.bs}, {args.batches} training batches timed, SentencePiece {args.model_type} with "
              f"{args.threads} thread(s), vocab {vocab}")
        print(table(rows, labels))
        print(json.dumps(rows))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
