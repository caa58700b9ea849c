"""Tensors and fastai loaders (attnlab.data.loaders): encoding, padding, length-sorted seeded batches."""

import numpy
import pytest
import torch

from attnlab.data.corpus.splits import Splits, make_splits
from attnlab.data.loaders import collate, encode_pairs, make_dataloaders, padding_fraction
from attnlab.data.vocab import BOS, EOS, PAD, build_vocabs


@pytest.fixture(scope="module")
def small_splits():
    return make_splits(n_train=3000, n_valid=300, test_per_bucket=10, seed=7)


@pytest.fixture(scope="module")
def vocabs(small_splits):
    return build_vocabs(small_splits)


def test_encode_pairs_and_collate(small_splits, vocabs):
    src_v, tgt_v = vocabs
    ps = small_splits.valid[:5]
    items = encode_pairs(ps, src_v, tgt_v)
    for p, (s, ti, to) in zip(ps, items, strict=True):
        assert s.dtype == ti.dtype == to.dtype == torch.int64
        assert len(s) == len(p.src) + 1 and s[-1] == EOS
        assert len(ti) == len(to) == len(p.tgt) + 1 and ti[0] == BOS and to[-1] == EOS
        assert torch.equal(ti[1:], to[:-1])
    src, tgt_in, tgt_out = collate(items)
    S, T = max(len(p.src) for p in ps) + 1, max(len(p.tgt) for p in ps) + 1
    assert src.shape == (5, S) and tgt_in.shape == tgt_out.shape == (5, T)
    for b, (s, ti, to) in enumerate(items):
        assert torch.equal(src[b, : len(s)], s) and (src[b, len(s) :] == PAD).all()
        assert torch.equal(tgt_out[b, : len(to)], to) and (tgt_out[b, len(to) :] == PAD).all()
        assert torch.equal(tgt_in[b, : len(ti)], ti) and (tgt_in[b, len(ti) :] == PAD).all()
    assert (collate(items, pad=-1)[0] == -1).sum() == (src == PAD).sum()


def test_dataloaders(small_splits, vocabs):
    src_v, tgt_v = vocabs
    dls = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=1)
    assert dls.n_inp == 2 and len(dls.train) == -(-3000 // 32)
    src, tgt_in, tgt_out = dls.train.one_batch()
    assert src.shape[0] == tgt_in.shape[0] == 32 and tgt_in.shape == tgt_out.shape
    assert src.dtype == torch.int64 and src.device.type == "cpu"

    # every training pair exactly once per epoch; a new but reproducible order every epoch
    order1 = list(dls.train.get_idxs())
    assert sorted(order1) == list(range(3000))
    assert list(dls.train.get_idxs()) == order1  # one_batch / get_idxs do not advance the epoch
    n_batches = sum(1 for _ in dls.train)  # a full pass does
    assert n_batches == len(dls.train) and dls.train.epoch == 1
    order2 = list(dls.train.get_idxs())
    assert order2 != order1 and sorted(order2) == sorted(order1)
    dls_again = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=1)
    assert list(dls_again.train.get_idxs()) == order1
    other_seed = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=2)
    assert list(other_seed.train.get_idxs()) != order1

    # valid: sorted by source length (longest first), not shuffled
    lens = [int((b[0] != PAD).sum(1).max()) for b in dls.valid]
    assert lens == sorted(lens, reverse=True)
    assert sum(b[0].shape[0] for b in dls.valid) == 300


def test_bucketing_keeps_padding_low_and_the_order_shuffled(small_splits, vocabs):
    src_v, tgt_v = vocabs
    train = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu").train
    epoch = train.epoch
    bucketed = padding_fraction(train)
    assert train.epoch == epoch  # measuring does not shift the training order
    baseline = padding_fraction(make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", bucketed=False).train)
    assert bucketed < 0.1 and baseline > 0.3, (bucketed, baseline)
    # batches of similar length, but not in length order: the lengths of consecutive batches vary
    lengths = [len(small_splits.train[i].src) for i in train.get_idxs()]
    firsts = [lengths[i] for i in range(0, len(lengths), 32)]
    assert firsts != sorted(firsts) and firsts != sorted(firsts, reverse=True)
    assert firsts[0] == max(lengths)  # SortedDL puts the longest batch first (memory errors show at once)


def test_shuffling_leaves_numpy_global_state_alone(small_splits, vocabs):
    src_v, tgt_v = vocabs
    train = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu").train
    numpy.random.seed(123)
    expected = numpy.random.rand(3)
    numpy.random.seed(123)
    train.get_idxs()
    assert numpy.array_equal(numpy.random.rand(3), expected)


def test_the_training_order_is_the_one_every_shipped_model_was_trained_in(small_splits, vocabs):
    # The order is seeded from a name and (seed, epoch); a renamed seed string (the module moved, say)
    # silently trains every model on other batches. These indices were read before the library was
    # split into layers, and every shipped model was trained in the order they come from.
    src_v, tgt_v = vocabs
    train = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=0).train
    assert train.get_idxs()[:8] == [19, 251, 539, 569, 2294, 593, 1929, 2901]


def test_new_loader_keeps_the_seed(small_splits, vocabs):
    src_v, tgt_v = vocabs
    train = make_dataloaders(small_splits, src_v, tgt_v, bs=32, device="cpu", seed=5).train
    copy = train.new()
    assert (copy.seed, copy.bucketed) == (5, True) and copy.get_idxs() == train.get_idxs()


def test_dataloaders_train_with_fastai_learner(small_splits, vocabs):
    """A fastai Learner calls model(src, tgt_in) and loss_func(logits, tgt_out)."""
    from fastai.learner import Learner

    src_v, tgt_v = vocabs
    few = Splits(train=small_splits.train[:256], valid=small_splits.valid[:64], test=[])
    dls = make_dataloaders(few, src_v, tgt_v, bs=64, device="cpu")
    calls = []

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(len(tgt_v), 8)
            self.out = torch.nn.Linear(8, len(tgt_v))

        def forward(self, src, tgt_in):
            calls.append((src.shape, tgt_in.shape))
            return self.out(self.emb(tgt_in))  # (B, T, V)

    def loss(logits, tgt_out):
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD)

    learn = Learner(dls, Toy(), loss_func=loss)
    with learn.no_logging():
        learn.fit(1, lr=1e-2)
    assert len(calls) == 4 + 1 and all(s[0] == t[0] for s, t in calls)  # 4 train batches, 1 valid
    assert dls.train.epoch == 1
