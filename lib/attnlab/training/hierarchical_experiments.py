"""Lesson 13's hierarchical attention trained: :func:`train_han` fits a
:class:`attnlab.models.hierarchical.HAN` with the course's step budget.

:func:`run` trains one of the named runs of :data:`HAN_RUNS` (150 steps on
``make_document_splits(seed=0)``, any training seed), scores it on the test documents and writes its
checkpoint and results as ``<name>`` (seed 0) or ``<name>_seed<k>``; with ``ATTNLAB_USE_SHIPPED=1`` it
loads the shipped run of that seed instead of training. :func:`load_trained` reads one back.

* ``han`` -- Yang et al. (2016): a BiGRU under the word attention;
* ``han_emb`` -- word embeddings only under the word attention (``word_rnn=False``).
"""

from __future__ import annotations

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.core.profiles import get_profile
from attnlab.data.corpus.documents import (
    DOCUMENT_VERSION,
    DocumentSplits,
    document_vocab,
    make_document_dataloaders,
    make_document_splits,
)
from attnlab.models.hierarchical import HAN, HANConfig, evaluate_han
from attnlab.training import experiments, results
from attnlab.training.evaluate import count_params
from attnlab.training.train import Budget, set_seed

__all__ = ["HAN_RUNS", "HAN_STEPS", "HAN_SEEDS", "run_name", "train_han", "run", "load_trained"]

# name -> HANConfig fields besides the vocabulary size
HAN_RUNS = {"han": {"word_rnn": True}, "han_emb": {"word_rnn": False}}
HAN_STEPS = 150
TASK = "document_question"  # results of lesson 13's own tables (report.load_all_results leaves them out)
HAN_SEEDS = (0, 1, 2)  # the shipped seeds of each run
_HINT = "run scripts/lesson13_experiments.py han han_emb"


def train_han(
    steps: int = 150,
    seed: int = 0,
    *,
    splits: DocumentSplits | None = None,
    config: HANConfig | None = None,
    bs: int = 64,
    lr: float = 5e-3,
    device: str | torch.device = "cpu",
    progress: bool = False,
):
    """Train a :class:`HAN` on the generated documents through fastai, for ``steps`` optimiser steps.

    A fastai ``Learner`` with cross-entropy, accuracy, gradient clipping and the one-cycle policy
    driven by the course's step budget (:class:`attnlab.training.train.Budget`).

    Args:
        steps: optimiser steps (>= 1).
        seed: seed of the weights and the training order.
        splits: the data (default :func:`attnlab.data.corpus.documents.make_document_splits` with ``seed``).
        config: model configuration (default: ``HANConfig(vocab_size=len(document_vocab()))``).
        bs: batch size.
        lr: peak learning rate.
        device: where to train.
        progress: show fastai's progress bar.

    Returns:
        ``(model, info)``: the trained model (eval mode) and ``{"steps", "seconds", "final_loss"}``.
    """
    from fastai.callback.training import GradientClip
    from fastai.learner import Learner
    from fastai.losses import CrossEntropyLossFlat
    from fastai.metrics import accuracy

    steps = check_positive_int("steps", steps)
    seed = check_int("seed", seed)
    vocab = document_vocab()
    splits = make_document_splits(seed=seed) if splits is None else splits
    config = HANConfig(vocab_size=len(vocab)) if config is None else config
    set_seed(seed)
    model = HAN(config).to(device)
    dls = make_document_dataloaders(splits, vocab, bs=bs, device=device, seed=seed)
    budget = Budget(steps=steps)
    learn = Learner(dls, model, loss_func=CrossEntropyLossFlat(), metrics=[accuracy], cbs=[GradientClip(1.0), budget])
    if progress:
        learn.fit_one_cycle(1000, lr)
    else:
        with learn.no_bar(), learn.no_logging():
            learn.fit_one_cycle(1000, lr)
    model.eval()
    final = float(learn.recorder.losses[-1]) if learn.recorder.losses else float("nan")
    return model, {"steps": budget.done, "seconds": round(budget.elapsed, 2), "final_loss": round(final, 4)}


def run_name(name: str, seed: int = 0) -> str:
    """The file name of run ``name`` trained with ``seed``: ``name`` for seed 0, else ``name_seed<k>``."""
    if not isinstance(name, str) or name not in HAN_RUNS:
        raise KeyError(f"unknown HAN run {name!r}; known: {sorted(HAN_RUNS)}")
    seed = check_int("seed", seed, minimum=0)
    return name if seed == 0 else f"{name}_seed{seed}"


def run(
    name: str = "han",
    *,
    seed: int = 0,
    steps: int = HAN_STEPS,
    ship: bool = False,
    save: bool = True,
    splits: DocumentSplits | None = None,
    produced_by: str | None = None,
):
    """Train HAN run ``name`` with ``seed``, score it on the test documents, write its checkpoint and results.

    Args:
        name: a run of :data:`HAN_RUNS`.
        seed: seed of the weights and the training order (the data are ``make_document_splits(seed=0)``).
        steps: optimiser steps.
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        save: write the files at all.
        splits: other data.
        produced_by: the command recorded in the results.

    With ``ATTNLAB_USE_SHIPPED=1`` the shipped run of ``seed`` (its budget, the default data) is loaded instead.

    Returns:
        ``(model, results)``: the model in eval mode and the dict of
        :func:`attnlab.models.hierarchical.evaluate_han` plus ``params``, ``seed``, ``train_steps``,
        ``train_seconds`` and the provenance.
    """
    out = run_name(name, seed)
    steps = check_positive_int("steps", steps)
    if experiments.use_shipped() and steps == HAN_STEPS and not ship and splits is None:
        return experiments.load_shipped_run(out, load_trained, _HINT)
    splits = make_document_splits() if splits is None else splits
    load_before = results.load_average()
    config = HANConfig(vocab_size=len(document_vocab()), **HAN_RUNS[name])
    model, info = train_han(steps, seed, splits=splits, config=config)
    res = {
        "model": out,
        "task": TASK,
        "run": name,
        **evaluate_han(model, splits.test),
        "params": count_params(model),
        "seed": seed,
        "budget": f"{steps:,} steps",
        "train_steps": info["steps"],
        "train_seconds": info["seconds"],
        "final_loss": info["final_loss"],
        "corpus_version": DOCUMENT_VERSION,
        **results.provenance(
            produced_by=produced_by or ("python scripts/lesson13_experiments.py" if ship else "live run"),
            profile=get_profile(),
            threads=torch.get_num_threads(),
            load_before=load_before,
        ),
    }
    if save:
        experiments.save_run(model, out, res, ship=ship, device="cpu", corpus_version=DOCUMENT_VERSION)
    return model, res


def load_trained(name: str, *, prefer_live: bool = True, device: str | torch.device = "cpu"):
    """Load a trained HAN run by file name (``han``, ``han_seed1``, ``han_emb``, ...): the learner's, else the shipped.

    Returns:
        ``(model, meta, source)`` with ``source`` either ``"live run"`` or ``"shipped"``.

    Raises:
        CheckpointError: no checkpoint of the current documents, or a damaged one.
    """
    return experiments.find_trained(
        name,
        expected=lambda meta: DOCUMENT_VERSION,
        data="documents",
        hint=_HINT,
        family="han",
        prefer_live=prefer_live,
        device=device,
    )
