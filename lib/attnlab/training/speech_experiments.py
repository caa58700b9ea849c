"""Lesson 13's speech toy trained: :func:`train_transcriber` fits a
:class:`attnlab.models.speech.Transcriber` with the course's step budget.
"""

from __future__ import annotations

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.data.corpus.signals import (
    SignalSplits,
    char_vocab,
    make_signal_dataloaders,
    make_signal_splits,
)
from attnlab.models.speech import Transcriber, TranscriberConfig
from attnlab.training.train import fit_budget, set_seed


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
