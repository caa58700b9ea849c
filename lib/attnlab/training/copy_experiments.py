"""Lesson 10's copy runs: presets, data, training and the recorded results of :class:`attnlab.models.copying.CopyModel`.

Three presets, each on English->French (``pair="fr"``) or English->Korean (files ``<name>_ko``), trained on the
copy corpus (:func:`attnlab.data.corpus.copying.make_copy_splits` with :data:`COPY_DATA`):

* ``pointer_gen`` -- the lesson-02 model with See et al.'s copy switch on (``attention="bahdanau", copy=True``);
* ``pointer_nocopy`` -- the same model, same data, copy switch off (unknown words must become ``<unk>``);
* ``conv_copy`` -- Allamanis et al.'s convolutional attention with a copy head (``attention="conv"``).

Sizes and training settings are the lesson-2 cpu preset's (:data:`attnlab.training.experiments.EXPERIMENTS`
``"bahdanau"``), except the step budget (:data:`COPY_STEPS`, per pair) and no label smoothing (the loss is the
negative log-likelihood of the mixture, whose unused temporary ids have probability 0).

The vocabularies are built from the training split without its copied words (:func:`copy_vocabs`): names
and numbers are never in them, so a model can only produce one by copying it.

``scripts/lesson10_experiments.py`` trains and ships them; the lesson loads them (``ATTNLAB_USE_SHIPPED``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import torch

from attnlab.core.profiles import get_profile
from attnlab.data import loaders
from attnlab.data.copy_metrics import copy_accuracy, p_gen_means, pointer_accuracy, unknown_fate
from attnlab.data.corpus.copying import CopyPair, copy_corpus_version, make_copy_splits
from attnlab.data.corpus.splits import Splits
from attnlab.data.loaders import collate
from attnlab.data.metrics import corpus_bleu
from attnlab.data.vocab import Vocab
from attnlab.models import decoding
from attnlab.models.copying import CopyModel, decode_extended, encode_copy_pair, greedy_copy
from attnlab.training import experiments, results
from attnlab.training import families as models
from attnlab.training.experiments import Experiment, RunPlan, capped_budget, check_pair, record_run, use_shipped

__all__ = [
    "COPY_DATA",
    "COPY_STEPS",
    "COPY_EXPERIMENTS",
    "preset",
    "copy_data",
    "copy_vocabs",
    "make_copy_dataloaders",
    "copy_outputs",
    "evaluate_copy",
    "run",
    "load_trained",
    "plain_model_fate",
    "shipped",
]

COPY_DATA = dict(n_train=20_000, n_valid=500, test_per_bucket=100, seed=0)
# Step budgets per pair. French: the lesson-02 budget (at 500 steps every run was still falling: conv_copy's
# validation loss 1.07 -> 1.05 over its last 50 steps). Korean needs more, as every Korean model of the course:
# pointer_gen_ko copied 0.808 of the unseen words after 500 steps and 0.932 after 1,000 (validation loss still
# 0.27 -> 0.23 over the last 150 steps); its misses were clauses and classifier phrases ("학교 678 개") the
# translation dropped, not pointing errors (its pointer accuracy was 0.986).
COPY_STEPS = {"fr": 1000, "ko": 2000}
TASK = "copy"

_MODELS = {
    "pointer_gen": (
        "lesson-02 Bahdanau model + See et al.'s copy switch (pointer-generator)",
        dict(attention="bahdanau", copy=True),
    ),
    "pointer_nocopy": (
        "lesson-02 Bahdanau model, copy switch off, on the copy corpus",
        dict(attention="bahdanau", copy=False),
    ),
    "conv_copy": ("Allamanis et al.'s convolutional attention with a copy head", dict(attention="conv", copy=True)),
}

COPY_EXPERIMENTS: dict[str, dict[str, Experiment]] = {}
for _name, (_desc, _model) in _MODELS.items():
    COPY_EXPERIMENTS[_name] = {}
    for _profile, _base in experiments.EXPERIMENTS["bahdanau"].items():
        sizes = {k: _base.model[k] for k in ("emb_dim", "hid_dim", "attn_dim")}
        COPY_EXPERIMENTS[_name][_profile] = dataclasses.replace(
            _base,
            name=_name,
            family="copy",
            description=_desc,
            model={**sizes, **_model},
            steps=COPY_STEPS["fr"],  # run() uses the pair's budget
            label_smoothing=0.0,
        )


def preset(name: str, profile: str | None = None) -> Experiment:
    """The :class:`~attnlab.training.experiments.Experiment` called ``name`` (:data:`COPY_EXPERIMENTS`).

    Raises:
        KeyError: an unknown name (the message lists the known ones).
    """
    return experiments.pick_preset(COPY_EXPERIMENTS, name, profile, what="copy experiment")


def copy_vocabs(pairs: Sequence[CopyPair]) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies of ``pairs`` without their copied words (names and numbers)."""

    def strip(p: CopyPair, side: str) -> list[str]:
        skip = {t for t, _, _ in p.copies} if side == "tgt" else {j for _, j, _ in p.copies}
        return [w for i, w in enumerate(getattr(p, side)) if i not in skip]

    return Vocab.build(strip(p, "src") for p in pairs), Vocab.build(strip(p, "tgt") for p in pairs)


@functools.lru_cache(maxsize=4)
def copy_data(pair: str = "fr", test_only: bool = False) -> tuple[Splits, Vocab, Vocab]:
    """The copy corpus of :data:`COPY_DATA` and its vocabularies: ``(splits, src_vocab, tgt_vocab)``.

    With ``test_only`` the training split is not drawn (empty; the vocabularies are then empty too):
    for evaluating a trained model, whose checkpoint holds its vocabularies.
    """
    pair = check_pair(pair)
    sizes = dict(COPY_DATA, n_train=0, n_valid=0) if test_only else COPY_DATA
    splits = make_copy_splits(target=pair, **sizes)
    return (splits, *copy_vocabs(splits.train))


def _items(pairs, src_vocab, tgt_vocab, copy: bool):
    return [encode_copy_pair(p.src, p.tgt, src_vocab, tgt_vocab, copy=copy)[:4] for p in pairs]


def make_copy_dataloaders(
    splits: Splits, src_vocab: Vocab, tgt_vocab: Vocab, *, copy: bool, bs: int, device, seed: int
):
    """fastai ``DataLoaders`` of ``(src, copy_ids, tgt_in, tgt_out)`` batches (``n_inp == 3``), length-bucketed
    and seeded like the course's other loaders (:func:`attnlab.data.loaders.make_dataloaders`)."""
    from fastai.data.core import DataLoaders
    from fastai.text.data import SortedDL

    train = _items(splits.train, src_vocab, tgt_vocab, copy)
    valid = _items(splits.valid, src_vocab, tgt_vocab, copy)
    common = dict(bs=bs, create_batch=collate, num_workers=0, device=device)
    train_dl = loaders.SeededSortedDL(
        train, res=[len(t[0]) for t in train], shuffle=True, drop_last=False, seed=seed, **common
    )
    valid_dl = SortedDL(valid, res=[len(t[0]) for t in valid], shuffle=False, **common)
    return DataLoaders(train_dl, valid_dl, device=device)


@torch.no_grad()
def copy_outputs(model: CopyModel, pairs: Sequence[CopyPair], src_vocab: Vocab, tgt_vocab: Vocab, *, bs: int = 100):
    """Greedy outputs and the teacher-forced copy distributions and ``p_gen`` of ``pairs``.

    Returns:
        ``{"hyps": token lists, "copy": per pair (T, S) arrays (the attention without copying),
        "p_gen": per pair (T,) arrays (None without copying), "steps": per pair the greedy run's
        ``(tokens, p_gen (L,), copy (L, S))``}``.
    """
    model.eval()
    copy = model.config.copy
    n = len(pairs)
    hyps, copies, gens, steps = [None] * n, [None] * n, [None] * n, [None] * n
    order = sorted(range(n), key=lambda i: len(pairs[i].src))
    for k in range(0, n, bs):
        idx = order[k : k + bs]
        enc = [encode_copy_pair(pairs[i].src, pairs[i].tgt, src_vocab, tgt_vocab, copy=copy) for i in idx]
        src, copy_ids, tgt_in, _ = collate([e[:4] for e in enc])
        _, parts = model(src, copy_ids, tgt_in, return_parts=True)
        ids, run_parts = greedy_copy(model, src, copy_ids, max_len=2 * src.size(1) + 10)
        for row, i in enumerate(idx):
            p, oovs = pairs[i], enc[row][4]
            T, S = len(p.tgt), len(p.src) + 1
            hyps[i] = decode_extended(ids[row].tolist(), tgt_vocab, oovs)
            key = "copy" if copy else "attn"
            copies[i] = parts[key][row, :T, :S].numpy()
            L = len(hyps[i]) + 1
            if copy:
                gens[i] = parts["p_gen"][row, :T].numpy()
            steps[i] = (
                hyps[i],
                None if not copy else run_parts["p_gen"][row, :L].numpy(),
                run_parts[key][row, :L, :S].numpy(),
            )
    return {"hyps": hyps, "copy": copies, "p_gen": gens if copy else None, "steps": steps}


def evaluate_copy(model: CopyModel, test: Sequence[CopyPair], src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    """The lesson's figures of a copy model on ``test``.

    Returns:
        ``bleu``, ``copy_accuracy`` (:func:`~attnlab.data.copy_metrics.copy_accuracy`: ``all``, ``name``,
        ``number``, ``sentences``), ``copy_all`` (its ``all``), ``pointer_all``, ``pointer_after_title``,
        ``pointer_untitled`` (:func:`~attnlab.data.copy_metrics.pointer_accuracy` of the copy distribution, or
        of the attention without copying), ``p_gen`` (:func:`~attnlab.data.copy_metrics.p_gen_means`, None
        without copying), ``n_test``, ``n_copies``.
    """
    out = copy_outputs(model, test, src_vocab, tgt_vocab)
    acc = copy_accuracy(out["hyps"], test)
    return {
        "bleu": corpus_bleu(out["hyps"], [list(p.tgt) for p in test]),
        "copy_accuracy": acc,
        "copy_all": acc["all"],
        "pointer_all": pointer_accuracy(out["copy"], test),
        "pointer_after_title": pointer_accuracy(out["copy"], test, kind="name", titled=True),
        "pointer_untitled": pointer_accuracy(out["copy"], test, titled=False),
        "p_gen": p_gen_means(out["p_gen"], test) if out["p_gen"] is not None else None,
        "n_test": len(test),
        "n_copies": sum(len(p.copies) for p in test),
    }


def run(
    name: str,
    *,
    pair: str = "fr",
    profile: str | None = None,
    steps: int | None = None,
    ship: bool = False,
    seed: int = 0,
    progress: bool = True,
    save: bool = True,
    produced_by: str | None = None,
) -> tuple[CopyModel, dict]:
    """Train a copy preset on the copy corpus of ``pair``, evaluate it on its test split, write its files.

    With ``ATTNLAB_USE_SHIPPED=1`` a run of the preset's budget and seed 0 is loaded from the shipped files
    instead (the results' ``source`` says so).

    Returns:
        ``(model, results)``; the files are named as :func:`attnlab.training.experiments.seed_result_name` says
        (``<name>[_seed<k>][_ko]``).
    """
    exp = preset(name, profile)
    pair = check_pair(pair)
    profile = profile or get_profile()
    experiments.check_one_process_run("the copy models", seed=seed, steps=steps)
    out = experiments.seed_result_name(name, pair, seed)
    if use_shipped() and steps is None and seed == 0 and not ship:
        return experiments.load_shipped_run(out, load_trained, "run scripts/lesson10_experiments.py")
    exp, capped = capped_budget(exp.with_budget(steps=COPY_STEPS[pair] if steps is None else steps))
    splits, src_vocab, tgt_vocab = copy_data(pair)
    config = {"src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), **exp.model}
    version = copy_corpus_version(pair)
    plan = RunPlan(
        exp=exp,
        out=out,
        dataloaders=lambda device: make_copy_dataloaders(
            splits, src_vocab, tgt_vocab, copy=exp.model["copy"], bs=exp.bs, device=device, seed=seed
        ),
        build=lambda: models.build_model(exp.family, config),
        evaluate=lambda model: evaluate_copy(model, splits.test, src_vocab, tgt_vocab),
        header={"model": out, "experiment": name, "family": exp.family, "pair": pair, "task": TASK},
        record={"corpus_version": version, "data": {**COPY_DATA, "target": pair}},
        checkpoint=dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            extra={"experiment": dataclasses.asdict(exp), "task": TASK, "pair": pair},
            corpus_version=version,
        ),
        profile=profile,
        seed=seed,
        ship=ship,
        save=save,
        progress=progress,
        produced_by=produced_by or ("python scripts/lesson10_experiments.py" if ship else "live run"),
        capped=capped,
    )
    return record_run(plan)


def shipped(name: str) -> bool:
    """True when the results of run ``name`` (e.g. ``"conv_copy_seed1"``) are shipped in ``data/results``."""
    return results.results_path(name, shipped=True).exists()


def load_trained(name: str, *, prefer_live: bool = True, device="cpu"):
    """Load a trained copy model (``pointer_gen``, ``pointer_gen_ko``, ``conv_copy_seed1``, ...).

    Returns:
        ``(model, meta, source)`` as :func:`attnlab.training.experiments.find_trained`.
    """
    return experiments.find_trained(
        name,
        expected=lambda meta: copy_corpus_version(check_pair(meta.get("pair", "fr"))),
        data="copy corpus",
        hint="run it (attnlab.training.copy_experiments.run) or scripts/lesson10_experiments.py",
        family="copy",
        prefer_live=prefer_live,
        device=device,
    )


def plain_model_fate(name: str = "bahdanau", pair: str = "fr") -> dict:
    """The lesson-02 model (shipped ``name``) on the copy test split of ``pair``: what the unknown words become.

    Returns:
        ``{"fate": unknown_fate counts, "copy_accuracy": ..., "bleu": ..., "n": sentences, "examples": the first
        three (source, output, reference)}``.
    """
    model, meta, _ = experiments.load_trained(name, prefer_live=False)
    test = copy_data(pair, test_only=True)[0].test
    hyps, attns, _ = decoding.translate(model, [p.src for p in test], meta["src_vocab"], meta["tgt_vocab"])
    return {
        "fate": unknown_fate(hyps, attns, test),
        "copy_accuracy": copy_accuracy(hyps, test),
        "bleu": corpus_bleu(hyps, [list(p.tgt) for p in test]),
        "n": len(test),
        "examples": [
            (" ".join(p.src), " ".join(h), " ".join(p.tgt)) for p, h in list(zip(test, hyps, strict=True))[:3]
        ],
    }
