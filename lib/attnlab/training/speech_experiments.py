"""Lesson 13's speech toy trained: :func:`train_transcriber` fits a
:class:`attnlab.models.speech.Transcriber` with the course's step budget.

:func:`run` trains one of the named speller runs of :data:`SPEECH_RUNS` (600 steps, seed 0), scores it
on the test words and writes its checkpoint and results (``ship=True``: the committed files, as
``scripts/lesson13_experiments.py`` does); with ``ATTNLAB_USE_SHIPPED=1`` it loads the shipped run
instead of training. :func:`load_trained` reads a trained speller back.

* ``transcriber`` -- the speller with Chorowski et al.'s (2015) location-aware score;
* ``transcriber_content`` -- the control with a content-only score (``prev_conv=0``), as Chan et al.
  (2016) used in Listen, Attend and Spell.
"""

from __future__ import annotations

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.core.profiles import get_profile
from attnlab.data.corpus.signals import (
    SIGNAL_VERSION,
    SignalSplits,
    char_vocab,
    make_signal_dataloaders,
    make_signal_splits,
)
from attnlab.models.speech import Transcriber, TranscriberConfig, evaluate_transcriber
from attnlab.training import experiments, results
from attnlab.training.evaluate import count_params
from attnlab.training.train import fit_budget, set_seed

__all__ = ["SPEECH_RUNS", "SPEECH_STEPS", "train_transcriber", "run", "load_trained"]

# name -> TranscriberConfig fields; each trains SPEECH_STEPS steps with seed 0 on make_signal_splits(seed=0)
SPEECH_RUNS = {"transcriber": {"prev_conv": 5}, "transcriber_content": {"prev_conv": 0}}
SPEECH_STEPS = 600
TASK = "spell"  # results of lesson 13's own tables (not translation: report.load_all_results leaves them out)
_HINT = "run scripts/lesson13_experiments.py transcriber transcriber_content"


def train_transcriber(
    steps: int = 600,
    seed: int = 0,
    *,
    splits: SignalSplits | None = None,
    config: TranscriberConfig | None = None,
    bs: int = 64,
    lr: float = 1e-2,
    device: str | torch.device = "cpu",
    progress: bool = False,
):
    """Train a :class:`Transcriber` through :func:`attnlab.training.train.fit_budget` for ``steps`` optimiser steps.

    Args:
        steps: optimiser steps (>= 1).
        seed: seed of the weights, the data (when ``splits`` is None) and the training order.
        splits: the utterances (default :func:`attnlab.data.corpus.signals.make_signal_splits` with ``seed``).
        config: the model (default ``TranscriberConfig()``).
        bs: batch size.
        lr: peak learning rate of the one-cycle schedule.
        device: where to train.
        progress: show the step progress bar.

    Returns:
        ``(model, stats)``: the trained model in eval mode and :class:`attnlab.training.train.TrainStats`.
    """
    steps = check_positive_int("steps", steps)
    seed = check_int("seed", seed)
    splits = make_signal_splits(seed=seed) if splits is None else splits
    config = TranscriberConfig() if config is None else config
    set_seed(seed)
    model = Transcriber(config).to(device)
    dls = make_signal_dataloaders(splits, char_vocab(), bs=bs, device=device, seed=seed)
    _, stats = fit_budget(model, dls, steps=steps, lr=lr, progress=progress)
    model.eval()
    return model, stats


def _check_name(name) -> str:
    if not isinstance(name, str) or name not in SPEECH_RUNS:
        raise KeyError(f"unknown speller run {name!r}; known: {sorted(SPEECH_RUNS)}")
    return name


def run(
    name: str = "transcriber",
    *,
    steps: int = SPEECH_STEPS,
    seed: int = 0,
    ship: bool = False,
    save: bool = True,
    splits: SignalSplits | None = None,
    produced_by: str | None = None,
):
    """Train the speller run ``name``, score it on the test words and write its checkpoint and results.

    Args:
        name: a run of :data:`SPEECH_RUNS`.
        steps: optimiser steps.
        seed: seed of the weights and the training order (the data are ``make_signal_splits(seed=0)``
            unless ``splits`` is given).
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        save: write the files at all.
        splits: other data.
        produced_by: the command recorded in the results.

    With ``ATTNLAB_USE_SHIPPED=1`` the shipped run (its budget, seed 0, the default data) is loaded instead.

    Returns:
        ``(model, results)``: the model in eval mode and the dict of
        :func:`attnlab.models.speech.evaluate_transcriber` plus ``params``, ``seed``, ``train_steps``,
        ``train_seconds`` and the provenance.
    """
    _check_name(name)
    steps = check_positive_int("steps", steps)
    if experiments.use_shipped() and steps == SPEECH_STEPS and seed == 0 and not ship and splits is None:
        return experiments.load_shipped_run(name, load_trained, _HINT)
    splits = make_signal_splits() if splits is None else splits
    load_before = results.load_average()
    model, stats = train_transcriber(steps, seed, splits=splits, config=TranscriberConfig(**SPEECH_RUNS[name]))
    res = {
        "model": name,
        "task": TASK,
        **evaluate_transcriber(model, splits.test),
        "params": count_params(model),
        "seed": seed,
        "budget": f"{steps:,} steps",
        "train_steps": stats.steps,
        "train_seconds": stats.seconds,
        "corpus_version": SIGNAL_VERSION,
        **results.provenance(
            produced_by=produced_by or ("python scripts/lesson13_experiments.py" if ship else "live run"),
            profile=get_profile(),
            threads=torch.get_num_threads(),
            load_before=load_before,
        ),
    }
    if save:
        experiments.save_run(
            model, name, res, ship=ship, device="cpu", tgt_vocab=char_vocab(), corpus_version=SIGNAL_VERSION
        )
    return model, res


def load_trained(name: str, *, prefer_live: bool = True, device: str | torch.device = "cpu"):
    """Load a trained speller run: the learner's own when there is one, else the shipped one.

    Returns:
        ``(model, meta, source)`` with ``source`` either ``"live run"`` or ``"shipped"``.

    Raises:
        KeyError: an unknown name.
        CheckpointError: no checkpoint of the current signals, or a damaged one.
    """
    _check_name(name)
    return experiments.find_trained(
        name,
        expected=lambda meta: SIGNAL_VERSION,
        data="signals",
        hint=_HINT,
        family="transcriber",
        prefer_live=prefer_live,
        device=device,
    )
