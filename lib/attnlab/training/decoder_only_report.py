"""Lesson 11's measurements of the decoder-only model against lesson 06's encoder-decoder.

Everything here reads shipped runs and the test split; ``python scripts/lesson11_experiments.py analyse``
calls :func:`analyse`, which writes ``data/results/comparisons/lesson11.json`` for the lesson to read.

* :func:`seed_summary` -- BLEU and exact match (overall and by source length) over the seeds of a run;
* :func:`head_aer` -- the alignment error rate of every layer's and head's attention from target
  positions to source positions (the encoder-decoder's cross-attention, the decoder-only model's
  target-to-source block of its self-attention), scored as lesson 02 scores attention;
* :func:`first_token_mass` -- the attention mass on the sequence's first token per layer (attention
  sinks, Xiao et al. 2023), beside what uniform attention would give it;
* :func:`window_scores` -- BLEU with a sliding window over the keys, without and with sink tokens;
* :func:`decode_speed` -- sentences per second of greedy decoding with and without the key/value cache.

Shape legend
------------
B  batch size
N  layers (of the decoder-only stack; the encoder-decoder's decoder layers)
H  heads
T  target length
S  source length
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np
import torch

from attnlab.core.checks import eval_mode
from attnlab.data.corpus import BUCKET_NAMES, Pair
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.metrics import alignment_error_rate, corpus_bleu, exact_match
from attnlab.data.vocab import Vocab
from attnlab.models.decoder_only import DecoderOnly
from attnlab.models.decoding import length_batches, translate
from attnlab.training import results
from attnlab.training.experiments import load_trained, result_name, synthetic_data

__all__ = [
    "ANALYSIS",
    "seed_names",
    "seed_summary",
    "source_attention",
    "head_aer",
    "first_token_mass",
    "window_scores",
    "decode_speed",
    "analyse",
]

ANALYSIS = "lesson11"
SEEDS = (0, 1, 2)
MODELS = ("decoder_only", "transformer")
FIGURES = ("bleu", "exact_match", *(f"bleu {b}" for b in BUCKET_NAMES), *(f"em {b}" for b in BUCKET_NAMES))


def seed_names(name: str, pair: str, seeds: Sequence[int] = SEEDS) -> list[str]:
    """The shipped files of ``name``'s seeds: ``name`` (seed 0), ``name_seed1``, ... (``_ko`` for Korean)."""
    return [result_name(name if s == 0 else f"{name}_seed{s}", pair) for s in seeds]


def _figures(r: dict) -> dict:
    out = {"bleu": r["bleu"], "exact_match": r["exact_match"]}
    for b, v in r["by_bucket"].items():
        out[f"bleu {b}"], out[f"em {b}"] = v["bleu"], v["exact_match"]
    return out


def seed_summary(name: str, pair: str) -> dict:
    """Mean and sd (``ddof=1``) over the shipped seeds of ``name`` on ``pair`` of every figure of :data:`FIGURES`.

    Returns:
        ``{"runs": [names found], "mean": {fig: value}, "sd": {fig: value}, "per_seed": {fig: [values]},
        "params": int}``; a seed whose file is missing is left out (``runs`` says which were found).
    """
    found = {}
    for n in seed_names(name, pair):
        path = results.results_path(n, shipped=True)
        if path.exists():
            found[n] = json.loads(path.read_text())
    if not found:
        raise FileNotFoundError(f"no shipped results of {name!r} on {pair!r}")
    figs = [_figures(r) for r in found.values()]
    per = {f: [x[f] for x in figs] for f in figs[0]}
    sd = lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan")  # noqa: E731
    return {
        "runs": list(found),
        "per_seed": per,
        "mean": {f: round(float(np.mean(v)), 4) for f, v in per.items()},
        "sd": {f: round(sd(v), 4) for f, v in per.items()},
        "params": next(iter(found.values()))["params"],
        "sentences_per_second": [r.get("sentences_per_second") for r in found.values()],
    }


@torch.no_grad()
def source_attention(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, bs: int = 100) -> list:
    """Per pair the ``(N, H, T, S)`` attention of target positions to source positions (gold target fed in).

    The encoder-decoder's cross-attention, or the decoder-only model's target-to-source block of its
    self-attention (which does not sum to 1 over the source: the rest went to the target prefix).
    ``T`` and ``S`` count the words only (no ``<eos>``).
    """
    key = "target_to_source" if isinstance(model, DecoderOnly) else "cross"
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    out: list = [None] * len(items)
    with eval_mode(model):
        for idx in length_batches(len(items), [len(it[0]) for it in items], bs):
            src, tgt_in, _ = collate([items[i] for i in idx])
            maps = model.attention_maps(src, tgt_in)[key]  # (B, N, H, T, S)
            for row, i in enumerate(idx):
                out[i] = maps[row, :, :, : len(pairs[i].tgt), : len(pairs[i].src)].float().numpy()
    return out


def head_aer(maps: Sequence[np.ndarray], pairs: Sequence[Pair]) -> np.ndarray:
    """``(N, H)`` AER of each layer's and head's argmax links (Och & Ney 2003; lower is better).

    Args:
        maps: per pair ``(N, H, T, S)`` from :func:`source_attention`.
        pairs: the pairs, with gold alignments.
    """
    N, H = maps[0].shape[:2]
    return np.array([[alignment_error_rate([m[n, h] for m in maps], pairs) for h in range(H)] for n in range(N)])


@torch.no_grad()
def first_token_mass(model: DecoderOnly, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
                     bs: int = 100) -> dict:
    """Attention mass on the first token of ``source <sep> target`` per layer, over every target query and head.

    Returns:
        ``{"first": [N], "uniform": [N], "eos": [N]}``: the mean weight on position 0, what uniform
        attention over the visible keys would give it (the mean of ``1 / keys``), and the mean weight
        on the source's ``<eos>`` (another candidate sink).
    """
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    first, uniform, eos, n = 0.0, 0.0, 0.0, 0
    with eval_mode(model):
        for idx in length_batches(len(items), [len(it[0]) for it in items], bs):
            src, tgt_in, _ = collate([items[i] for i in idx])
            full = model.attention_maps(src, tgt_in)["self"]  # (B, N, H, L, L)
            S = src.shape[1]
            for row, i in enumerate(idx):
                s_len, t_len = len(items[i][0]), len(items[i][1])
                q = full[row, :, :, S : S + t_len]  # (N, H, t_len, L) the target queries
                first += q[..., 0].sum((1, 2)).double().numpy() / q.shape[1]
                eos += q[..., s_len - 1].sum((1, 2)).double().numpy() / q.shape[1]
                uniform += float(sum(1.0 / (s_len + t + 1) for t in range(t_len)))
                n += t_len
    return {"first": (first / n).round(4).tolist(), "uniform": round(uniform / n, 4),
            "eos": (eos / n).round(4).tolist()}


def window_scores(model: DecoderOnly, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
                  settings: Sequence[tuple[int | None, int]]) -> list[dict]:
    """BLEU and exact match of greedy decoding with each ``(window, sinks)`` (``window=None``: full attention)."""
    refs = [list(p.tgt) for p in pairs]
    out = []
    for window, sinks in settings:
        with model.attention_window(window, sinks):
            hyps, _, _ = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab)
        out.append({"window": window, "sinks": sinks, "bleu": round(corpus_bleu(hyps, refs), 2),
                    "exact_match": round(exact_match(hyps, refs), 4)})
    return out


def decode_speed(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, *, cache: bool) -> float:
    """Sentences per second of batched greedy decoding of ``pairs``, with or without the key/value cache."""
    with model.kv_cache(cache):
        start = time.perf_counter()
        translate(model, [p.src for p in pairs], src_vocab, tgt_vocab)
        return round(len(pairs) / (time.perf_counter() - start), 1)


WINDOWS = ((None, 0), (48, 0), (48, 1), (48, 4), (32, 0), (32, 4))


def analyse(per_bucket: int = 40, n_long: int = 100, out: str = ANALYSIS) -> dict:
    """Measure everything the lesson shows from the shipped runs; write ``data/results/comparisons/<out>.json``.

    Args:
        per_bucket: test sentences per length bucket for the attention figures (the first of each).
        n_long: sentences of the longest bucket for the windows and the decoding speed (the first ones).
        out: the results name.
    """
    report: dict = {"seeds": {}, "aer": {}, "aer_last_mean": {}, "sinks": {}, "windows": {}, "speed": {}}
    for pair in ("fr", "ko"):
        splits, sv, tv = synthetic_data(pair)
        test = splits.test
        sample = [p for b in BUCKET_NAMES for p in [q for q in test if q.bucket == b][:per_bucket]]
        longest = [p for p in test if p.bucket == BUCKET_NAMES[-1]][:n_long]
        for name in MODELS:
            try:
                report["seeds"][f"{name} {pair}"] = seed_summary(name, pair)
            except FileNotFoundError:
                continue
            grids, last_mean = [], []
            for run in report["seeds"][f"{name} {pair}"]["runs"]:
                model, _, _ = load_trained(run, prefer_live=False)
                maps = source_attention(model, sample, sv, tv)
                grids.append(head_aer(maps, sample).round(4).tolist())
                # what lessons 02 and 06 score: the last layer's attention averaged over its heads
                last_mean.append(round(alignment_error_rate([m[-1].mean(0) for m in maps], sample), 4))
                if name == "decoder_only":
                    report["sinks"][run] = first_token_mass(model, sample, sv, tv)
                    report["windows"][run] = window_scores(model, longest, sv, tv, WINDOWS)
                if run in (result_name(n, "fr") for n in MODELS):
                    report["speed"][run] = {
                        "cache": decode_speed(model, longest, sv, tv, cache=True),
                        "no_cache": decode_speed(model, longest, sv, tv, cache=False),
                    }
            report["aer"][f"{name} {pair}"] = grids
            report["aer_last_mean"][f"{name} {pair}"] = last_mean
        report[f"n_attention_{pair}"], report[f"n_long_{pair}"] = len(sample), len(longest)
    report["provenance"] = results.provenance(
        produced_by="python scripts/lesson11_experiments.py analyse", profile="cpu", threads=1,
        load_before=results.load_average(),
    )
    results.write_comparison(out, results.json_ready(report))
    return report

