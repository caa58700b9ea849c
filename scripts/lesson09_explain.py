"""Lesson 09, "is attention an explanation?": every test of the lesson on the shipped models, three seeds each.

Usage::

    OMP_NUM_THREADS=1 python scripts/lesson09_explain.py [--part explanation|adversarial|shift ...]
    OMP_NUM_THREADS=1 python scripts/lesson09_explain.py --seeds        # train bahdanau/luong_location seeds 1, 2
    OMP_NUM_THREADS=1 python scripts/lesson09_explain.py --deep-decoder # train transformer_dec4

The figures go to ``data/results/comparisons/lesson09_explain.json`` (read it with
``attnlab.training.results.read_comparison("lesson09_explain")``); a ``--part`` run replaces only its
own part of the file. Everything is scored against the corpus's gold links
(:mod:`attnlab.training.explain`), English->French, for the three seeds of :data:`MODELS`
(seed 0 = the lesson-02/03 shipped run, seeds 1 and 2 = ``NAME_seedK``):

* ``explanation`` -- per seed: BLEU with uniform weights (Wiegreffe & Pinter 2019) on
  :data:`SENTENCES` test sentences of 11-20 tokens; Jain & Wallace's (2019) Kendall tau between the
  attention row and gradient importance and leave-one-out importance on the same sentences; their
  permutation test (median total-variation change of the output when one step's weights are
  shuffled, :data:`PERMUTATIONS` permutations) on the first :data:`PERM_SENTENCES` of them; where
  the peaks land relative to the gold links (Koehn & Knowles 2017) on all 500 sentences of 11-20
  tokens; and per model the spread of attention across its three seeds (Wiegreffe & Pinter).
* ``adversarial`` -- per seed: Jain & Wallace's adversarial weights, away from the model's own or from
  the gold links, with every step's output within total-variation distance epsilon, on
  :data:`ADV_SENTENCES` sentences.
* ``shift`` -- Shift-Att (Chen et al. 2020): naive and shifted AER of every decoder layer of the
  shipped Transformers of :data:`SHIFT_MODELS` (those that exist), whole test split.

Each part prints its figures and the seconds it took (wall time on a shared machine: an upper bound).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from attnlab.course.lessons import peak_offsets
from attnlab.data.corpus import load_splits
from attnlab.data.metrics import corpus_bleu
from attnlab.models.decoding import forced_attention, translate
from attnlab.training import experiments, results
from attnlab.training.checkpoint import CheckpointError
from attnlab.training.explain import (
    adversarial_attention,
    adversarial_summary,
    gold_weight,
    gradient_importance,
    leave_one_out_importance,
    permutation_effect,
    rank_agreement,
    seed_spread,
    shift_att_report,
    uniform_attention,
)

NAME = "lesson09_explain"
MODELS = ["bahdanau", "luong_location"]  # one aligns well, one cannot see the words in its score (lesson 03)
SEEDS = (0, 1, 2)
BUCKET = "11-20"
SENTENCES = 60  # uniform weights, gradient and leave-one-out importance
PERM_SENTENCES = 30  # the permutation test costs T x PERMUTATIONS decodes per sentence
PERMUTATIONS = 100  # as Jain & Wallace
ADV_SENTENCES = 30
EPSILONS = (0.01, 0.1)
SEARCH = dict(steps=150, lr=0.3, penalty=30.0, noise=0.1, seed=0)
SHIFT_MODELS = [
    ("transformer", "fr"),
    ("transformer_seed1", "fr"),
    ("transformer_seed2", "fr"),
    ("transformer_ko", "ko"),
    ("transformer_seed1_ko", "ko"),
    ("transformer_seed2_ko", "ko"),
    ("transformer_dec4", "fr"),  # four decoder layers (--deep-decoder), one seed
]
DEEP_DECODER = {"num_decoder_layers": 4}


def seed_file(name: str, seed: int) -> str:
    return name if seed == 0 else f"{name}_seed{seed}"


def mean_sd(per_seed: dict[str, dict], keys) -> dict:
    """``{"mean": {k: ...}, "sd": {k: ...}}`` over the seeds (sample sd, n - 1), as lesson 03's summaries."""
    out: dict = {"mean": {}, "sd": {}}
    for k in keys:
        xs = np.array([float(v[k]) for v in per_seed.values()])
        out["mean"][k] = round(float(xs.mean()), 4)
        out["sd"][k] = round(float(xs.std(ddof=1)), 4) if len(xs) > 1 else 0.0
    return out


def explanation_part() -> dict:
    test = load_splits(target="fr").test
    mid = [p for p in test if p.bucket == BUCKET]
    sample = mid[:SENTENCES]
    out: dict = {"pair": "fr", "bucket": BUCKET, "sentences": len(sample), "perm_sentences": PERM_SENTENCES,
                 "permutations": PERMUTATIONS, "peak_sentences": len(mid), "models": {}, "seed_spread": {}}
    for name in MODELS:
        per_seed, all_maps = {}, []
        for seed in SEEDS:
            start = time.perf_counter()
            file = seed_file(name, seed)
            model, meta, _ = experiments.load_trained(file, prefer_live=False)
            model.eval()
            sv, tv = meta["src_vocab"], meta["tgt_vocab"]
            refs = [p.tgt for p in sample]
            hyps, _, _ = translate(model, [p.src for p in sample], sv, tv)
            with uniform_attention(model):
                uniform, _, _ = translate(model, [p.src for p in sample], sv, tv)
            attns = forced_attention(model, sample, sv, tv)
            grads = [gradient_importance(model, p, sv, tv).numpy() for p in sample]
            loos = [leave_one_out_importance(model, p, sv, tv).numpy() for p in sample]
            g, lo = rank_agreement(attns, grads, sample), rank_agreement(attns, loos, sample)
            med = []  # per content token: the median TVD over the permutations
            for p in sample[:PERM_SENTENCES]:
                tvd = permutation_effect(model, p, sv, tv, permutations=PERMUTATIONS, seed=0).median(1).values
                med += [float(tvd[t]) for t, c in enumerate(p.content) if c and p.align[t]]
            maps = forced_attention(model, mid, sv, tv)
            all_maps.append(maps)
            peaks = peak_offsets(maps, mid)  # on gold, one before, one after, elsewhere
            med = np.array(med)
            per_seed[file] = {
                "bleu": corpus_bleu(hyps, refs),
                "bleu_uniform": corpus_bleu(uniform, refs),
                "tau_gradient": g["kendall_tau"],
                "tau_gradient_significant": g["significant"],
                "tau_loo": lo["kendall_tau"],
                "tau_loo_significant": lo["significant"],
                "top_is_top_gradient": g["same_top"],
                "top_is_top_loo": lo["same_top"],
                "gradient_top_on_gold": g["importance_top_on_gold"],
                "loo_top_on_gold": lo["importance_top_on_gold"],
                "attention_top_on_gold": g["attention_top_on_gold"],
                "rank_tokens": g["tokens"],
                "perm_median_tvd": float(np.median(med)),
                "perm_share_below_0.05": float(np.mean(med < 0.05)),
                "perm_tokens": len(med),
                **{k.replace(" ", "_"): v for k, v in peaks.items()},
                "gold_mass": gold_weight(maps, mid),
                "seconds": round(time.perf_counter() - start, 1),
            }
            print(file, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in per_seed[file].items()}))
        keys = [k for k in per_seed[name] if k not in ("seconds",) and not k.endswith("tokens")]
        out["models"][name] = {"seeds": per_seed, **mean_sd(per_seed, keys)}
        out["seed_spread"][name] = seed_spread(all_maps, mid)
        print(name, "seed spread", json.dumps(out["seed_spread"][name]))
    return out


def adversarial_part() -> dict:
    test = load_splits(target="fr").test
    sample = [p for p in test if p.bucket == BUCKET][:ADV_SENTENCES]
    out: dict = {"pair": "fr", "bucket": BUCKET, "sentences": len(sample), "search": SEARCH, "models": {}}
    for name in MODELS:
        per_seed = {}
        for seed in SEEDS:
            file = seed_file(name, seed)
            model, meta, _ = experiments.load_trained(file, prefer_live=False)
            for away_from in ("model", "gold"):
                for eps in EPSILONS:
                    start = time.perf_counter()
                    found = adversarial_attention(
                        model, sample, meta["src_vocab"], meta["tgt_vocab"], epsilon=eps, away_from=away_from, **SEARCH
                    )
                    s = adversarial_summary(found, sample)
                    s["seconds"] = round(time.perf_counter() - start, 1)
                    per_seed.setdefault(f"{away_from} {eps:g}", {})[file] = s
                    print(f"adversarial {file:22s} away from {away_from:5s} eps {eps:<5g} JSD {s['mean_jsd']:.4f}"
                          f"  max TVD {s['max_tvd']:.4f}  left gold {s['left_gold']:.3f}"
                          f"  gold mass {s['gold_mass_original']:.3f} -> {s['gold_mass_adversarial']:.3f}"
                          f"  ({s['seconds']} s)")
        keys = ("mean_jsd", "max_tvd", "left_gold", "gold_mass_original", "gold_mass_adversarial", "aer_adversarial")
        out["models"][name] = {setting: {"seeds": runs, **mean_sd(runs, keys)} for setting, runs in per_seed.items()}
    return out


def shift_part() -> dict:
    out: dict = {"models": {}}
    splits: dict = {}
    for file, pair in SHIFT_MODELS:
        try:
            model, meta, _ = experiments.load_trained(file, prefer_live=False)
        except (CheckpointError, FileNotFoundError) as err:
            print(f"shift-att: {file} not shipped, skipped ({err.__class__.__name__})")
            continue
        test = splits.setdefault(pair, load_splits(target=pair).test)
        rows = shift_att_report(model, test, meta["src_vocab"], meta["tgt_vocab"])
        c = model.config
        out["models"][file] = {"pair": pair, "test_sentences": len(test), "decoder_layers": c.num_decoder_layers,
                               "heads": c.num_heads, "rows": rows}
        for r in rows:
            if r["head"] == "mean":
                n, s = r["naive"]["aer"], r["shift"]["aer"]
                print(f"shift-att {file:18s} layer {r['layer']}  AER {n:.3f} -> {s:.3f}")
    return out


def train_seeds() -> None:
    """Train :data:`MODELS` again with seeds 1 and 2 (English->French), shipped as ``NAME_seedK``."""
    data = experiments.synthetic_data("fr")
    for name in MODELS:
        for seed in SEEDS[1:]:
            _, res = experiments.run(name, pair="fr", profile="cpu", progress=False, ship=True, seed=seed,
                                     data=data, out=seed_file(name, seed),
                                     produced_by="python scripts/lesson09_explain.py --seeds")
            print(json.dumps({k: res[k] for k in ("model", "seed", "bleu", "aer", "train_seconds")}))


def train_deep_decoder() -> None:
    """The lesson-6 Transformer preset with a 4-layer decoder, shipped as ``transformer_dec4`` (for Shift-Att)."""
    _, res = experiments.run("transformer", pair="fr", profile="cpu", progress=False, ship=True,
                             model_config=DEEP_DECODER, out="transformer_dec4",
                             produced_by="python scripts/lesson09_explain.py --deep-decoder")
    print(json.dumps({k: res[k] for k in ("model", "bleu", "aer", "params", "train_seconds")}))


PARTS = {"explanation": explanation_part, "adversarial": adversarial_part, "shift": shift_part}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", action="append", choices=sorted(PARTS), help="run only these parts (default: all)")
    ap.add_argument("--seeds", action="store_true", help="train the seeds 1 and 2 of MODELS first")
    ap.add_argument("--deep-decoder", action="store_true", help="train transformer_dec4 first")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.seeds:
        train_seeds()
    if args.deep_decoder:
        train_deep_decoder()
    try:
        summary = results.read_comparison(NAME)
    except FileNotFoundError:
        summary = {}
    load_before = results.load_average()
    for part in args.part or list(PARTS):
        start = time.perf_counter()
        summary[part] = PARTS[part]()
        summary[part]["seconds"] = round(time.perf_counter() - start, 1)
        summary[part]["provenance"] = results.provenance(
            produced_by=f"scripts/lesson09_explain.py --part {part}", profile="cpu", threads=1, load_before=load_before
        )
        path = results.write_comparison(NAME, summary)
        print(f"wrote {part} to {path} ({summary[part]['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
