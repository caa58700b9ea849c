import os

import pytest
import torch

os.environ.setdefault("ATTNLAB_PROFILE", "cpu")
# The test models are tiny: one thread is as fast as two, and it does not collapse when the
# machine is busy (OpenMP threads spin-wait for each other when the cores are oversubscribed).
torch.set_num_threads(1)


@pytest.fixture
def tmp_data_dir(tmp_path, monkeypatch):
    """A throwaway data/ folder for tests that write checkpoints or results."""
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(tmp_path))
    return tmp_path


def copy_task_splits(n_train=3000, seed=0):
    """A toy corpus: the target is the source, word for word (letters a..j, 3-7 tokens)."""
    import random

    from attnlab.data.corpus import Pair, Splits

    rng = random.Random(seed)
    letters = list("abcdefghij")

    def pair():
        toks = tuple(rng.choice(letters) for _ in range(rng.randint(3, 7)))
        return Pair(src=toks, tgt=toks, align=tuple((i,) for i in range(len(toks))), content=(True,) * len(toks))

    return Splits(
        train=[pair() for _ in range(n_train)], valid=[pair() for _ in range(200)], test=[pair() for _ in range(200)]
    )


@pytest.fixture(scope="session")
def copy_trained():
    """A tiny Bahdanau model trained for 400 steps on the copy task via the fastai toolkit.

    A step budget, not a time budget: on a busy machine 10 seconds bought too few steps and the
    tests that need a trained model failed (seen with two test suites sharing 2 cores).
    """
    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import fit_budget, set_seed

    set_seed(0)
    splits = copy_task_splits()
    src_vocab, tgt_vocab = build_vocabs(splits)
    dls = make_dataloaders(splits, src_vocab, tgt_vocab, bs=64)
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=16, hid_dim=48, attention="bahdanau"))
    learn, stats = fit_budget(model, dls, steps=400, lr=1e-2, progress=False)
    model.eval()
    return model, splits, src_vocab, tgt_vocab, learn, stats


@pytest.fixture(scope="session")
def copy_model(copy_trained):
    """(trained copy model, a padded source batch)."""
    from attnlab.data.loaders import collate, encode_pairs

    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    src, _, _ = collate(encode_pairs(splits.test[:32], src_vocab, tgt_vocab))
    return model, src
