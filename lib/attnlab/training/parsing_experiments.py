"""Lesson 10's parser: the course's RNNs trained to translate English into its linearised tree.

:func:`run` trains one run of :data:`PARSE_RUNS` -- the lesson-02 Bahdanau model (``parse_bahdanau``)
or the lesson-01 model without attention (``parse_noattn``), each with its cpu/gpu preset of
:mod:`attnlab.training.experiments` unchanged -- on :func:`attnlab.data.parsing.make_parse_splits`
(the English->French corpus's English sentences, target = the bracketed tree), through the same
:func:`attnlab.training.experiments.record_run` as every translation run. It scores greedy output
with labelled bracketing F1 per length bucket (:func:`attnlab.data.parsing.bracket_f1`) and, for the
attention model, where the attention of each gold closing bracket points (:func:`closing_offsets`).
:func:`ceiling_summary` estimates how far below F1 = 1 a perfect parser must stay on the test split
(the grammar's PP attachments are ambiguous, :mod:`attnlab.data.parse_ambiguity`) and rescores the
shipped attention runs attachment-blind. Files: ``<name>`` (seed 0) or ``<name>_seed<k>``; with
``ATTNLAB_USE_SHIPPED=1`` the shipped run of the seed is loaded instead of trained.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

import numpy as np

from attnlab.core.checks import check_int, check_positive_int
from attnlab.core.profiles import get_profile
from attnlab.data import parse_ambiguity as pamb
from attnlab.data.corpus import BUCKET_NAMES, Pair
from attnlab.data.loaders import make_dataloaders
from attnlab.data.parsing import PARSE_VERSION, bracket_f1, closing_brackets, make_parse_splits
from attnlab.data.vocab import build_vocabs
from attnlab.models.decoding import forced_attention, translate
from attnlab.training import experiments, results

__all__ = [
    "PARSE_RUNS",
    "PARSE_SEEDS",
    "TASK",
    "run_name",
    "parse_data",
    "closing_offsets",
    "evaluate_parser",
    "bucket_summary",
    "run",
    "load_trained",
    "CEILING_COMPARISON",
    "ceiling_summary",
]

# run -> the translation preset it reuses (model and training settings unchanged)
PARSE_RUNS = {"parse_bahdanau": "bahdanau", "parse_noattn": "rnn_noattn"}
PARSE_SEEDS = (0, 1, 2)
TASK = "parsing"  # results of lesson 10's own tables (the translation report leaves them out)
_HINT = "run scripts/lesson10_pointers_parsing.py parse"


def run_name(name: str, seed: int = 0) -> str:
    """The file name of run ``name`` with ``seed``: ``name`` for seed 0, else ``name_seed<k>``."""
    if not isinstance(name, str) or name not in PARSE_RUNS:
        raise KeyError(f"unknown parsing run {name!r}; known: {sorted(PARSE_RUNS)}")
    seed = check_int("seed", seed, minimum=0)
    return name if seed == 0 else f"{name}_seed{seed}"


def parse_data(**sizes):
    """``(splits, src_vocab, tgt_vocab)`` of :func:`attnlab.data.parsing.make_parse_splits` (``sizes`` as there)."""
    splits = make_parse_splits(**sizes)
    return (splits, *build_vocabs(splits))


def closing_offsets(attns: Sequence[np.ndarray], pairs: Sequence[Pair]) -> Counter:
    """Where the attention of each gold closing bracket peaks, relative to its span's last word.

    Args:
        attns: per pair a ``(T, S)`` attention array with the gold target fed in
            (:func:`attnlab.models.decoding.forced_attention`).
        pairs: the pairs (source sentence, gold linearised tree).

    Returns:
        ``Counter`` of ``argmax - last word`` over every closing bracket (0: on the span's last
        word, 1: on the word after it).
    """
    out: Counter = Counter()
    for a, p in zip(attns, pairs, strict=True):
        if a.shape[0] != len(p.tgt):
            raise ValueError(f"attention has {a.shape[0]} rows for a target of {len(p.tgt)} tokens")
        for t, _, last in closing_brackets(p.tgt):
            out[int(a[t].argmax()) - last] += 1
    return out


def evaluate_parser(model, pairs: Sequence[Pair], src_vocab, tgt_vocab, *, bs: int = 250) -> dict:
    """Greedy parses of ``pairs``' sources scored against their trees: overall and per length bucket.

    Returns:
        ``{"f1", "precision", "recall", "exact", ..., "by_bucket": {bucket: {...}}}`` and, for a
        model with attention, ``closing_offsets`` (``{offset: count}``, see :func:`closing_offsets`).
    """
    longest = max(len(p.tgt) for p in pairs)
    hyps, _, seconds = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab, bs=bs, max_len=longest + 20)
    res = bracket_f1(hyps, [p.tgt for p in pairs]).as_dict()
    res["by_bucket"] = {}
    for b in BUCKET_NAMES:
        idx = [i for i, p in enumerate(pairs) if p.bucket == b]
        if idx:
            res["by_bucket"][b] = bracket_f1([hyps[i] for i in idx], [pairs[i].tgt for i in idx]).as_dict()
    attns = forced_attention(model, pairs, src_vocab, tgt_vocab, bs=bs)
    if attns is not None:
        res["closing_offsets"] = {str(k): v for k, v in sorted(closing_offsets(attns, pairs).items())}
    res["decode_seconds"] = round(seconds, 3)
    return res


def run(
    name: str = "parse_bahdanau",
    *,
    seed: int = 0,
    steps: int | None = None,
    profile: str | None = None,
    ship: bool = False,
    save: bool = True,
    progress: bool = False,
    data=None,
    produced_by: str | None = None,
):
    """Train parsing run ``name`` with ``seed``, score it on the test split, write its checkpoint and results.

    Args:
        name: a run of :data:`PARSE_RUNS`.
        seed: seed of the weights and the training order (the data are ``make_parse_splits(seed=0)``).
        steps: optimiser steps (default: the reused preset's budget).
        profile: ``cpu``/``gpu`` (default: the machine's).
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        save: write the files at all.
        progress: fastai progress bars.
        data: other ``(splits, src_vocab, tgt_vocab)`` (default: :func:`parse_data`).
        produced_by: the command recorded in the results.

    Returns:
        ``(model, results)``.
    """
    out = run_name(name, seed)
    if steps is not None:
        check_positive_int("steps", steps)
    if experiments.use_shipped() and steps is None and not ship and data is None:
        return experiments.load_shipped_run(out, load_trained, _HINT)
    profile = profile or get_profile()
    exp = experiments.preset(PARSE_RUNS[name], profile)
    exp = dataclasses.replace(exp, name=name, description=f"{exp.description}; English -> linearised tree")
    exp, capped = experiments.capped_budget(exp.with_budget(steps=steps))
    splits, src_vocab, tgt_vocab = parse_data() if data is None else data

    plan = experiments.RunPlan(
        exp=exp,
        out=out,
        dataloaders=lambda device: make_dataloaders(splits, src_vocab, tgt_vocab, bs=exp.bs, device=device, seed=seed),
        build=lambda: experiments.build_model(exp, src_vocab, tgt_vocab),
        evaluate=lambda model: evaluate_parser(model, splits.test, src_vocab, tgt_vocab),
        header={"model": out, "task": TASK, "run": name, "experiment": PARSE_RUNS[name]},
        record={"corpus_version": PARSE_VERSION},
        checkpoint=dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            extra={"experiment": dataclasses.asdict(exp), "task": TASK},
            corpus_version=PARSE_VERSION,
        ),
        profile=profile,
        seed=seed,
        ship=ship,
        save=save,
        progress=progress,
        produced_by=produced_by or ("python scripts/lesson10_pointers_parsing.py parse" if ship else "live run"),
        capped=capped,
    )
    return experiments.record_run(plan)


def bucket_summary(name: str, bucket: str, seeds: Sequence[int] = PARSE_SEEDS, fig: str = "f1") -> dict | None:
    """Mean and sample sd of ``fig`` in one length bucket over the shipped seeds of run ``name``.

    Returns:
        The form of :func:`attnlab.course.lessons.seed_summary` (``{"mean": {fig: x}, "sd": {fig: x or None},
        "n", "files"}``, what ``seed_verdict`` reads), or None when no seed is shipped.
    """
    if bucket not in BUCKET_NAMES:
        raise ValueError(f"bucket must be one of {BUCKET_NAMES}, got {bucket!r}")
    files = [f for f in (run_name(name, k) for k in seeds) if results.results_path(f, shipped=True).exists()]
    if not files:
        return None
    values = np.array([results.read_result(f)["by_bucket"][bucket][fig] for f in files], dtype=float)
    sd = float(values.std(ddof=1)) if len(values) > 1 else None
    return {"mean": {fig: float(values.mean())}, "sd": {fig: sd}, "n": len(files), "files": files}


def load_trained(name: str, *, prefer_live: bool = True, device="cpu"):
    """Load a trained parser by file name (``parse_bahdanau``, ``parse_noattn_seed1``, ...).

    Returns:
        ``(model, meta, source)`` with ``source`` either ``"live run"`` or ``"shipped"``.

    Raises:
        CheckpointError: no checkpoint of the current parse corpus, or a damaged one.
    """
    return experiments.find_trained(
        name,
        expected=lambda meta: PARSE_VERSION,
        data="parse corpus",
        hint=_HINT,
        family="rnn",
        prefer_live=prefer_live,
        device=device,
    )


# data/results/comparisons/<this>.json, written by scripts/lesson10_pointers_parsing.py ceiling
CEILING_COMPARISON = "lesson10_parse_ceiling"
CEILING_TARGET = 0.95  # the target F1 on 31-40 tokens


def ceiling_summary(
    name: str = "parse_bahdanau",
    *,
    seeds: Sequence[int] = PARSE_SEEDS,
    n_model: int = 20_000,
    model_seed: int = 1,
    log=print,
) -> dict:
    """The F1 ceiling of the test split per length bucket and run ``name``'s shipped seeds rescored.

    Args:
        name: a run of :data:`PARSE_RUNS` (its shipped checkpoints are decoded greedily, as
            :func:`evaluate_parser` does).
        seeds: the seeds to rescore.
        n_model: generated sentences per bucket for :func:`attnlab.data.parse_ambiguity.estimate_attachment_model`.
        model_seed: that sample's seed (a stream of its own, not the test split's).
        log: progress messages.

    Returns:
        ``{"by_bucket": {bucket: ceiling figures}, "runs": {file: {bucket: {"f1", "f1_blind", "f1_shipped"}}},
        "configurations": ..., "assumes": ...}`` (what the comparison file holds).
    """
    check_positive_int("n_model", n_model)
    pairs_trees = pamb.parse_test_sentences()
    pairs = [p for p, _ in pairs_trees]
    log(f"attachment model: {n_model} generated sentences per bucket")
    amodel = pamb.estimate_attachment_model(n_model, seed=model_seed)
    trees = [[r.tree for r in pamb.readings(s)] for _, s in pairs_trees]
    out: dict = {"by_bucket": {}, "runs": {}, "target": CEILING_TARGET, "test_sentences": len(pairs)}
    in_bucket = {b: [i for i, p in enumerate(pairs) if p.bucket == b] for b in BUCKET_NAMES}  # test indices
    sentences = {b: [pairs_trees[i][1] for i in idx] for b, idx in in_bucket.items()}
    for b in BUCKET_NAMES:
        c = pamb.ceiling(sentences[b], amodel).as_dict()
        # the better of the two parsers (a tree of the grammar, or the majority brackets) by expected F1
        tree = c["ceiling"] >= c["ceiling_majority_brackets"]
        c["ceiling_best"] = c["ceiling"] if tree else c["ceiling_majority_brackets"]
        c["best_parser_f1"] = c["bayes_parser_f1"] if tree else c["majority_brackets_f1"]
        c["best_parser"] = "tree" if tree else "majority brackets"
        out["by_bucket"][b] = c
        log(f"  {b}: {out['by_bucket'][b]}")
    variants = {
        "with_context": dict(context=True),  # also given the sentence's numbers of noun phrases and clauses
        "loglinear": dict(fit=True),  # a log-linear P(reading | words), fitted by conditional likelihood
    }
    for tag, kw in variants.items():
        log(f"attachment model {tag}")
        other = pamb.estimate_attachment_model(n_model, seed=model_seed, **kw)
        for b in BUCKET_NAMES:
            c = pamb.ceiling(sentences[b], other).as_dict()
            out["by_bucket"][b][f"ceiling_{tag}"] = c["ceiling"]
            out["by_bucket"][b][f"bayes_parser_f1_{tag}"] = c["bayes_parser_f1"]
            out["by_bucket"][b][f"ceiling_majority_brackets_{tag}"] = c["ceiling_majority_brackets"]
            out["by_bucket"][b][f"majority_brackets_f1_{tag}"] = c["majority_brackets_f1"]
    out["configurations"] = {b: [[list(k), of, n, c] for k, of, n, c in amodel.table(b)[:8]] for b in BUCKET_NAMES}
    out["model_sample"] = {"n_per_bucket": n_model, "seed": model_seed}
    longest = max(len(p.tgt) for p in pairs)
    for seed in seeds:
        file = run_name(name, seed)
        model, meta, _ = load_trained(file, prefer_live=False)
        hyps, _, _ = translate(
            model, [p.src for p in pairs], meta["src_vocab"], meta["tgt_vocab"], bs=250, max_len=longest + 20
        )
        shipped = results.read_result(file)["by_bucket"]
        row = {}
        for b, idx in in_bucket.items():
            std = bracket_f1([hyps[i] for i in idx], [pairs[i].tgt for i in idx]).as_dict()["f1"]
            blind = pamb.blind_f1([hyps[i] for i in idx], [trees[i] for i in idx])["f1"]
            row[b] = {"f1": std, "f1_blind": blind, "f1_shipped": shipped[b]["f1"]}
        out["runs"][file] = row
        log(f"  {file}: {row}")
    out["assumes"] = (
        "ceiling: the expected F1 of the parser that picks, per sentence, the reading (a tree of the grammar "
        "with the same words) with the most expected matched spans; ceiling_majority_brackets: of the parser "
        "that writes only the spans of probability > 1/2; ceiling_best: the higher of the two (best_parser_f1: "
        "that parser's F1 on the test trees); P(reading | words) taken proportional to "
        "the product over its PPs of P(host | kinds of the possible hosts, preposition is 'of', length bucket) "
        "counted on generated sentences (*_with_context: also given the sentence's numbers of noun phrases and "
        "clauses; *_loglinear: P(reading | words) log-linear in the same features, fitted by conditional "
        "likelihood); bayes_parser_f1: that parser scored against the gold trees; "
        "f1_blind: each prediction scored against its best-matching reading"
    )
    return out
