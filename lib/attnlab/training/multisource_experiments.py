"""Lesson 13's multi-source runs: presets, training and the recorded results of
:class:`attnlab.models.multisource.MultiSourceRNN` (French + Korean -> English).

:func:`source_analysis` measures what the lesson says about them, once, for
``scripts/lesson13_multisource.py`` to store (``data/results/comparisons/lesson13_multisource.json``):
each source alone (the X->English halves of the ``agreement_0`` pairs, decoded on the triples' test
split), the sentences wrong only in *his*/*her*, the flat model's attention on French for those
words, and how many test triples the pair corpora's splits also hold (the baselines trained on them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.checks import (
    check_positive_int,
)
from attnlab.core.profiles import get_profile
from attnlab.data import corpus as pair_corpus
from attnlab.data.corpus.triples import CORPUS_VERSION, LANGS, Triple, TripleSplits, load_triple_splits
from attnlab.data.metrics import corpus_bleu, exact_match
from attnlab.models import decoding
from attnlab.models import multisource as ms
from attnlab.models.multisource import DATA_SEED, TASK, MultiSourceRNN, build_vocabs, evaluate, make_triple_dataloaders
from attnlab.training import experiments
from attnlab.training import families as models
from attnlab.training.experiments import (
    Experiment,
    RunPlan,
    capped_budget,
    record_run,
    use_shipped,
)


@dataclass(frozen=True)
class MultiSourceExperiment(Experiment):
    """An :class:`attnlab.training.experiments.Experiment` of the ``multisource`` family, with the sizes of its triples.

    Attributes:
        n_train, n_valid: training and validation triples.
        test_per_bucket: test triples per English length bucket.
    """

    n_train: int = 50_000
    n_valid: int = 1_000
    test_per_bucket: int = 500

    def __post_init__(self):
        super().__post_init__()
        if self.steps is None:
            raise ValueError(f"experiment {self.name!r}: a multi-source preset has a step budget")
        for name in ("n_train", "n_valid", "test_per_bucket"):
            check_positive_int(name, getattr(self, name))


# The lesson-1 Bahdanau preset's sizes and training settings (experiments._RNN_CPU/_CPU, _RNN_GPU/_GPU),
# read from that preset so the two stay equal. The cpu profile trains on 50,000 triples (1,000 steps of
# 64 see each about 1.3 times; generating 100,000 would take ~25 s more), the gpu one on 100,000.
_SIZES = {"cpu": dict(n_train=50_000, n_valid=1_000), "gpu": dict(n_train=100_000, n_valid=2_000)}


_MODEL_FIELDS = ("emb_dim", "hid_dim", "attn_dim")


_DESCRIPTIONS = {
    "separate": "French + Korean -> English, one Bahdanau attention per source, contexts combined (Zoph & Knight)",
    "flat": "French + Korean -> English, one Bahdanau attention over both sources (flat)",
}


MULTISOURCE_EXPERIMENTS: dict[str, dict[str, MultiSourceExperiment]] = {}
for _name, _combine in (("multisource", "separate"), ("multisource_flat", "flat")):
    MULTISOURCE_EXPERIMENTS[_name] = {}
    for _profile, _base in experiments.EXPERIMENTS["bahdanau"].items():
        _fields = {f.name: getattr(_base, f.name) for f in dataclasses.fields(Experiment)}
        MULTISOURCE_EXPERIMENTS[_name][_profile] = MultiSourceExperiment(
            **{
                **_fields,
                "name": _name,
                "family": "multisource",
                "description": _DESCRIPTIONS[_combine],
                "model": {**{k: _base.model[k] for k in _MODEL_FIELDS}, "combine": _combine},
                **_SIZES[_profile],
            }
        )


def preset(name: str, profile: str | None = None) -> MultiSourceExperiment:
    """The :class:`MultiSourceExperiment` called ``name`` (``multisource``, ``multisource_flat``) for ``profile``.

    Raises:
        KeyError: an unknown name (the message lists the known ones).
        ValueError: an unknown profile.
    """
    return experiments.pick_preset(MULTISOURCE_EXPERIMENTS, name, profile, what="multi-source experiment")


def _data_record(exp: MultiSourceExperiment, data: TripleSplits) -> dict:
    """What the model was trained and tested on."""
    sizes = {part: len(getattr(data, part)) for part in ("train", "valid", "test")}
    return {"version": CORPUS_VERSION, "sources": list(LANGS), "target": "en", "seed": DATA_SEED, **sizes}


def run(
    name: str,
    *,
    profile: str | None = None,
    steps: int | None = None,
    ship: bool = False,
    seed: int = 0,
    progress: bool = True,
    save: bool = True,
    data: TripleSplits | None = None,
    produced_by: str | None = None,
) -> tuple[MultiSourceRNN, dict]:
    """Train a multi-source preset, evaluate it on its test triples, write its checkpoint and results.

    Args:
        name: ``"multisource"`` or ``"multisource_flat"`` (:data:`MULTISOURCE_EXPERIMENTS`).
        profile: ``cpu``/``gpu`` (default: the active profile).
        steps: another step budget than the preset's.
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        seed: training seed (initialisation and batch order; the triples do not change).
        progress: show a progress bar of the budget.
        save: write the files at all (``False``: only return the model and results).
        data: triples to use instead of the preset's (e.g. fewer;
        :func:`attnlab.data.corpus.triples.load_triple_splits`).
        produced_by: the command recorded in the results (default: "live run", or the lesson's script
            with ``ship``).

    With ``ATTNLAB_USE_SHIPPED=1`` a run of the preset's budget, seed 0 and data is loaded from the
    shipped files instead (``results["source"]`` says so); ``ATTNLAB_MAX_STEPS`` caps the budget
    (``results["budget_capped_by"]``).

    Returns:
        ``(model, results)``: the model in eval mode on the profile's device, and what :func:`evaluate`
        measured plus ``model``, ``experiment``, ``task``, ``params``, ``seed``, ``budget``, ``train_steps``,
        ``train_seconds``, ``tokens_per_second``, ``loss_curve``, ``data`` and the provenance of
        :func:`attnlab.training.results.provenance`.

    Raises:
        KeyError: an unknown name.
        TypeError, ValueError: a bad budget, seed or data, or a distributed launch.
    """
    exp = preset(name, profile)
    profile = profile or get_profile()
    experiments.check_one_process_run("the multi-source models", seed=seed, steps=steps)
    if data is not None and not isinstance(data, TripleSplits):
        raise TypeError(f"data must be TripleSplits (attnlab.data.corpus.triples), got {type(data).__name__}")
    if use_shipped() and steps is None and seed == 0 and not ship and data is None:
        return experiments.load_shipped_run(name, load_trained, "run scripts/lesson13_multisource.py")
    exp, capped = capped_budget(exp.with_budget(steps=steps))
    if data is None:
        data = load_triple_splits(
            n_train=exp.n_train, n_valid=exp.n_valid, test_per_bucket=exp.test_per_bucket, seed=DATA_SEED
        )
    src_vocab, tgt_vocab = build_vocabs(data)
    config = {"src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), **exp.model}
    if produced_by is None:
        produced_by = "python scripts/lesson13_multisource.py" if ship else "live run"
    plan = RunPlan(
        exp=exp,
        out=name,
        dataloaders=lambda device: make_triple_dataloaders(
            data, src_vocab, tgt_vocab, bs=exp.bs, device=device, seed=seed
        ),
        build=lambda: models.build_model(exp.family, config),
        evaluate=lambda model: evaluate(model, data.test, src_vocab, tgt_vocab),
        header={"model": name, "experiment": name, "family": exp.family, "task": TASK},
        record={"data": _data_record(exp, data)},
        checkpoint=dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            extra={"experiment": dataclasses.asdict(exp), "task": TASK},
            corpus_version=CORPUS_VERSION,
        ),
        profile=profile,
        seed=seed,
        ship=ship,
        save=save,
        progress=progress,
        produced_by=produced_by,
        capped=capped,
    )
    return record_run(plan)


def load_trained(name: str, *, prefer_live: bool = True, device: str | torch.device = "cpu"):
    """Load a trained multi-source model: the learner's own run when there is one, else the shipped one.

    Args:
        name: ``"multisource"`` or ``"multisource_flat"``.
        prefer_live: look at the learner's run first (``False``: the shipped checkpoint first).
        device: where to put the model.

    Returns:
        ``(model, meta, source)``: the model in eval mode, the checkpoint's JSON (``src_vocab`` and
        ``tgt_vocab`` as :class:`attnlab.data.vocab.Vocab`), and ``"live run"`` or ``"shipped"``.

    Raises:
        KeyError: an unknown name.
        CheckpointError: no place holds a checkpoint of the current triples, or one that exists is
            damaged or holds another model (a damaged file is reported, never skipped).
    """
    preset(name, "cpu")
    return experiments.find_trained(
        name,
        expected=lambda meta: CORPUS_VERSION,
        data="triples",
        hint="run it (attnlab.training.multisource_experiments.run) or scripts/lesson13_multisource.py",
        family="multisource",
        prefer_live=prefer_live,
        device=device,
    )


def comparison_rows(res_by_name: dict[str, dict]) -> list[dict]:
    """One flat row per model of the lesson's comparison table.

    Args:
        res_by_name: ``{name: results}`` as :func:`run` returns or writes them.

    Returns:
        Rows of ``model``, ``combine``, ``bleu``, ``chrf``, ``exact_match``, per source ``aer_<lang>`` and
        ``content_<lang>`` (``by_source[lang]["align_content"]``), the flat model's ``mass_fr``,
        ``mass_fr_no_ko_link`` and ``top_fr_content`` (``None`` for the separate one), ``params``,
        ``train_steps`` and ``train_seconds``.
    """
    rows = []
    for name, r in res_by_name.items():
        row = {"model": name, "combine": r["combine"], "bleu": r["bleu"], "chrf": r["chrf"]}
        row["exact_match"] = r["exact_match"]
        for lang in LANGS:
            row[f"aer_{lang}"] = r["by_source"][lang]["aer"]
            row[f"content_{lang}"] = r["by_source"][lang]["align_content"]
        share = r.get("source_share") or {}
        row.update({k: share.get(k) for k in ("mass_fr", "mass_fr_no_ko_link", "top_fr_content")})
        row.update(params=r["params"], train_steps=r["train_steps"], train_seconds=r["train_seconds"])
        rows.append(row)
    return rows


POSSESSIVES = ("his", "her")
SINGLE_SOURCE = {"fr": "agreement_0", "ko": "agreement_0_ko"}  # X->English halves: lesson-01 models, same budget


def only_possessives_differ(hyp: Sequence[str], ref: Sequence[str]) -> bool:
    """The output differs from the reference, and only where one has *his* and the other *her*."""
    if len(hyp) != len(ref):
        return False
    diffs = [(a, b) for a, b in zip(hyp, ref, strict=True) if a != b]
    return bool(diffs) and all({a, b} == set(POSSESSIVES) for a, b in diffs)


def split_overlap(test: Sequence[Triple]) -> dict:
    """How many English sentences of the triples' ``test`` the pair corpora's splits also hold, per pair and split.

    The triples are drawn from random streams of their own (:mod:`attnlab.data.corpus.triples`), so
    nothing keeps them out of the English->French and English->Korean corpora; the single-source
    baselines were trained on those (their ``train`` split, read X->English).

    Returns:
        ``{"fr": {"train": k, "valid": k, "test": k}, "ko": {...}, "n_test": len(test)}``.
    """
    english = {tuple(t.en) for t in test}
    out: dict = {"n_test": len(english)}
    for lang in LANGS:
        splits = pair_corpus.load_splits(target=lang)
        out[lang] = {
            part: len(english & {tuple(p.src) for p in getattr(splits, part)}) for part in ("train", "valid", "test")
        }
    return out


def source_analysis(test: Sequence[Triple]) -> dict:
    """The lesson's measurements of the two multi-source runs beside each source alone, on ``test``.

    Returns:
        ``{"single": {lang: {"bleu", "bleu_31_40", "exact_match"}}, "wrong": {label: n},
        "possessive_only": {label: n}, "flat_mass_fr": {"possessive", "other"}, "overlap":
        split_overlap(test), "n": len(test)}`` with labels ``"fr alone"``, ``"ko alone"``, ``"fr + ko"``.
    """
    test = list(test)
    refs = [list(t.en) for t in test]
    longest = [i for i, t in enumerate(test) if t.bucket == "31-40"]
    hyps = {}
    single = {}
    for lang, file in SINGLE_SOURCE.items():
        pair_model, meta = experiments.load_trained(file, prefer_live=False)[:2]
        out = decoding.translate(
            pair_model.backward_model, [t.side(lang) for t in test], meta["tgt_vocab"], meta["src_vocab"]
        )[0]
        hyps[f"{lang} alone"] = out
        single[lang] = {
            "bleu": corpus_bleu(out, refs),
            "exact_match": exact_match(out, refs),
            "bleu_31_40": corpus_bleu([out[i] for i in longest], [refs[i] for i in longest]),
        }
    model, meta = load_trained("multisource", prefer_live=False)[:2]
    hyps["fr + ko"] = ms.translate(model, test, meta["src_vocab"], meta["tgt_vocab"])[0]
    flat, flat_meta = load_trained("multisource_flat", prefer_live=False)[:2]
    share = np.concatenate(
        ms.source_mass(ms.source_attention(flat, test, flat_meta["src_vocab"], flat_meta["tgt_vocab"]), "fr")
    )
    words = np.concatenate([np.array(t.en) for t in test])
    possessive = np.isin(words, POSSESSIVES)
    return {
        "single": single,
        "wrong": {k: sum(h != r for h, r in zip(v, refs, strict=True)) for k, v in hyps.items()},
        "possessive_only": {
            k: sum(only_possessives_differ(h, r) for h, r in zip(v, refs, strict=True)) for k, v in hyps.items()
        },
        "flat_mass_fr": {"possessive": float(share[possessive].mean()), "other": float(share[~possessive].mean())},
        "overlap": split_overlap(test),
        "n": len(test),
    }
