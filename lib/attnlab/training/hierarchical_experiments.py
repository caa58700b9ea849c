"""Lesson 13's hierarchical attention trained: :func:`train_han` fits a
:class:`attnlab.models.hierarchical.HAN` with the course's step budget.
"""

from __future__ import annotations

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.data.corpus.documents import (
    DocumentSplits,
    document_vocab,
    make_document_dataloaders,
    make_document_splits,
)
from attnlab.models.hierarchical import HAN, HANConfig
from attnlab.training.train import Budget, set_seed


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
