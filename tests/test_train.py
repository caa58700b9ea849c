"""The fastai training toolkit: loss, metric, time budget, and a model that learns to copy."""

import math
from types import SimpleNamespace

import pytest
import torch
from fastai.callback.core import CancelFitException
from fastai.learner import Learner

from attnlab.data.vocab import PAD
from attnlab.models.losses import masked_cross_entropy
from attnlab.training.evaluate import evaluate_model
from attnlab.training.train import Budget, MaskedCrossEntropy, token_accuracy


def test_masked_cross_entropy_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, PAD], [3, PAD, PAD]])
    manual = torch.stack(
        [-torch.log_softmax(logits[b, t], -1)[target[b, t]] for b, t in [(0, 0), (0, 1), (1, 0)]]
    ).mean()
    torch.testing.assert_close(masked_cross_entropy(logits, target), manual)
    # changing logits at padded positions changes nothing
    other = logits.clone()
    other[0, 2] += 100
    torch.testing.assert_close(masked_cross_entropy(other, target), manual)


def test_token_accuracy_ignores_padding():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 1] = logits[0, 1, 0] = logits[0, 2, 3] = 1
    target = torch.tensor([[1, 2, PAD]])
    assert token_accuracy(logits, target).item() == 0.5


def test_label_smoothing_spreads_mass_as_documented():
    """With smoothing e the target is (1 - e) one-hot + e / V uniform, over non-pad positions."""
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, PAD], [3, PAD, PAD]])
    keep = [(0, 0), (0, 1), (1, 0)]
    logp = torch.log_softmax(logits, -1)
    manual = torch.stack([-(0.9 * logp[b, t, target[b, t]] + 0.1 * logp[b, t].mean()) for b, t in keep]).mean()
    torch.testing.assert_close(masked_cross_entropy(logits, target, 0.1), manual)
    torch.testing.assert_close(MaskedCrossEntropy(0.1)(logits, target), manual)


def test_loss_and_metric_input_errors():
    logits, target = torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)
    for fn in (masked_cross_entropy, token_accuracy):
        with pytest.raises(
            ValueError, match=r"target must be \(B, T\) = \(2, 3\) to match logits \(2, 3, 5\), got shape \(2, 4\)"
        ):
            fn(logits, torch.zeros(2, 4, dtype=torch.long))
        with pytest.raises(ValueError, match=r"logits must be \(B, T, V\), got shape \(6, 5\)"):
            fn(logits.flatten(0, 1), target)
        with pytest.raises(TypeError, match="logits must be a floating-point tensor, got dtype torch.int64"):
            fn(logits.long(), target)
        with pytest.raises(TypeError, match="target must hold integer token ids, got dtype torch.float32"):
            fn(logits, target.float())
        with pytest.raises(ValueError, match=r"target holds token id 5, outside the vocabulary \[0, 5\)"):
            fn(logits, torch.full((2, 3), 5))
        with pytest.raises(ValueError, match=r"target holds token id -1, outside the vocabulary \[0, 5\)"):
            fn(logits, torch.full((2, 3), -1))
    for bad in (1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got"):
            masked_cross_entropy(logits, target, bad)
        with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got"):
            MaskedCrossEntropy(bad)  # refused when the Learner is built, not at the first batch
    with pytest.raises(TypeError, match="label_smoothing must be a float"):
        masked_cross_entropy(logits, target, "0.1")


def test_step_budget_stops_cleanly_and_runs_the_whole_cycle(copy_trained):
    *_, learn, stats = copy_trained
    assert isinstance(learn, Learner)
    assert stats.steps == 400 and len(learn.recorder.lrs) == 400, stats
    budget = next(cb for cb in learn.cbs if isinstance(cb, Budget))
    assert budget.stopped_early  # 400 steps end inside the 9th epoch of 47 batches
    # one-cycle went through warm-up and annealing inside the budget
    lrs = learn.recorder.lrs
    peak = max(range(len(lrs)), key=lrs.__getitem__)
    assert 0.1 * len(lrs) < peak < 0.45 * len(lrs)
    assert lrs[-1] < 0.05 * lrs[peak]
    assert stats.tokens > 0 and stats.tokens_per_second > 0


def test_tiny_model_learns_the_copy_task(copy_trained):
    model, splits, src_vocab, tgt_vocab, _, _ = copy_trained
    res = evaluate_model(model, splits.test, src_vocab, tgt_vocab)
    assert res["exact_match"] >= 0.9, res
    assert res["bleu"] >= 90, res
    # attention learns the diagonal: the gold alignment of copying
    assert res["align_all"] >= 0.45, res  # chance is about 0.2 (sentences of 3-7 tokens + <eos>)


def test_time_budget_rejects_nonsense():
    for bad in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="seconds must be positive and finite, got"):
            Budget(bad)
    with pytest.raises(TypeError, match="seconds must be a number, got str"):
        Budget("60")


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_time_budget_counts_training_time_only_and_schedules_by_it():
    """Driven event by event with a fake clock: validation time is not counted, pct_train is the
    share of the budget spent, and the fit is cancelled at the first batch that ends past it."""
    clock = FakeClock()
    cb = Budget(10, clock=clock)
    cb.learn = learn = SimpleNamespace(training=True, pct_train=0.0)
    cb.before_fit()
    clock.now = 100.0
    cb.before_train()
    clock.now = 102.0
    cb.before_batch()
    assert learn.pct_train == pytest.approx(0.2)
    cb.after_batch()  # 2 s of 10: keep going
    clock.now = 105.0
    cb.after_train()
    assert cb.elapsed == pytest.approx(5.0)
    learn.training = False  # a 50 s validation pass counts for nothing
    clock.now = 155.0
    cb.before_batch()
    cb.after_batch()
    assert learn.pct_train == pytest.approx(0.2) and not cb.stopped_early
    learn.training = True
    cb.before_train()
    clock.now = 158.0
    cb.before_batch()
    assert learn.pct_train == pytest.approx(0.8)
    cb.after_batch()
    clock.now = 160.5
    with pytest.raises(CancelFitException):
        cb.after_batch()
    assert cb.stopped_early and cb.elapsed == pytest.approx(10.5)


def test_time_budget_without_schedule_leaves_pct_train_alone():
    clock = FakeClock()
    cb = Budget(4, schedule=False, clock=clock)
    cb.learn = learn = SimpleNamespace(training=True, pct_train=0.123)
    cb.before_fit()
    cb.before_train()
    clock.now = 3.0
    cb.before_batch()
    cb.after_batch()
    assert learn.pct_train == 0.123
    clock.now = 4.0
    with pytest.raises(CancelFitException):
        cb.after_batch()


def test_step_budget_counts_training_steps_only_and_schedules_by_them():
    """A budget of 3 steps: pct_train is 0, 1/3, 2/3 before the training batches, validation batches
    count for nothing, and the fit is cancelled right after the third training step."""
    cb = Budget(steps=3, clock=FakeClock())
    cb.learn = learn = SimpleNamespace(training=True, pct_train=0.0)
    cb.before_fit()
    cb.before_train()
    seen = []
    for _ in range(2):
        cb.before_batch()
        seen.append(learn.pct_train)
        cb.after_batch()
    learn.training = False
    for _ in range(5):  # validation
        cb.before_batch()
        cb.after_batch()
    learn.training = True
    cb.before_batch()
    seen.append(learn.pct_train)
    with pytest.raises(CancelFitException):
        cb.after_batch()
    assert seen == pytest.approx([0, 1 / 3, 2 / 3]) and cb.done == 3 and cb.stopped_early


def test_budget_needs_exactly_one_of_steps_and_seconds():
    with pytest.raises(ValueError, match="give exactly one of seconds and steps"):
        Budget()
    with pytest.raises(ValueError, match="give exactly one of seconds and steps"):
        Budget(10, steps=5)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="steps must be >= 1"):
            Budget(steps=bad)
    with pytest.raises(TypeError, match="steps must be an int"):
        Budget(steps=2.5)


def test_step_budget_runs_are_reproducible():
    """The same seed and step budget give the same run twice: identical losses and weights."""
    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import fit_budget, set_seed

    from .conftest import copy_task_splits

    runs = []
    for _ in range(2):
        set_seed(0)
        splits = copy_task_splits(n_train=640)
        src_vocab, tgt_vocab = build_vocabs(splits)
        dls = make_dataloaders(splits, src_vocab, tgt_vocab, bs=64)
        model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention="bahdanau"))
        learn, stats = fit_budget(model, dls, steps=25, lr=1e-2, progress=False)
        runs.append((stats, [float(x) for x in learn.recorder.losses], model.state_dict()))
    (s1, l1, w1), (s2, l2, w2) = runs
    assert s1.steps == s2.steps == 25 and len(l1) == 25
    assert l1 == l2
    for k in w1:
        assert torch.equal(w1[k], w2[k]), k


def _tiny_run(steps, **kw):
    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import fit_budget, set_seed

    from .conftest import copy_task_splits

    set_seed(0)
    splits = copy_task_splits(n_train=640)
    src_vocab, tgt_vocab = build_vocabs(splits)
    dls = make_dataloaders(splits, src_vocab, tgt_vocab, bs=64)
    cfg = RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention="bahdanau", dropout=0.3)
    model = Seq2SeqRNN(cfg)
    learn, stats = fit_budget(model, dls, steps=steps, lr=1e-2, **kw)
    return learn, stats, model.state_dict()


def test_loss_curve_and_progress_bar_leave_the_run_unchanged():
    """Validation passes and the step bar draw no random numbers: same weights as a plain run (dropout on)."""
    _, plain, w_plain = _tiny_run(23, progress=False)
    learn, curved, w_curved = _tiny_run(23, progress=True, loss_every=10)
    for k in w_plain:
        assert torch.equal(w_plain[k], w_curved[k]), k
    assert plain.loss_curve == []
    steps = [p["step"] for p in curved.loss_curve]
    assert steps == [10, 20, 23]  # every 10 steps, and the step that ends the budget
    assert all(set(p) == {"step", "train_loss", "valid_loss", "lr"} for p in curved.loss_curve)
    # train_loss is the mean of the recorded raw losses of the steps since the previous point
    assert learn.model.training  # the validation passes gave training mode back
    first, last = curved.loss_curve[0], curved.loss_curve[-1]
    assert last["valid_loss"] < first["valid_loss"] and last["train_loss"] < first["train_loss"]
    assert last["lr"] < 0.05 * max(p["lr"] for p in curved.loss_curve)  # one-cycle annealed by the last step


def test_loss_curve_valid_loss_is_the_token_weighted_loss_of_the_valid_split():
    from attnlab.models.losses import masked_cross_entropy

    learn, stats, _ = _tiny_run(5, progress=False, loss_every=5)
    model = learn.model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for src, tgt_in, tgt_out in learn.dls.valid:
            n = int((tgt_out != PAD).sum())
            total += float(masked_cross_entropy(model(src, tgt_in), tgt_out)) * n
            tokens += n
    assert stats.loss_curve[-1]["valid_loss"] == pytest.approx(total / tokens, abs=1e-4)


def test_curve_every_for_and_loss_curve_arguments():
    from attnlab.training.train import LossCurve, curve_every_for

    assert curve_every_for(1000) == 50 and curve_every_for(1500) == 75 and curve_every_for(7) == 1
    # a validation pass is costly: never closer than 50 steps, unless that leaves fewer than 4 points
    assert curve_every_for(200) == 50 and curve_every_for(20) == 5 and curve_every_for(3) == 1
    assert curve_every_for(None) == 50
    with pytest.raises(ValueError, match="every must be"):
        LossCurve(0)
    with pytest.raises(ValueError, match="points must be"):
        curve_every_for(100, points=0)


def test_smoothed_loss_floor_is_the_loss_of_the_smoothed_target_itself():
    from attnlab.models.losses import smoothed_loss_floor

    V, e = 7, 0.1
    target = torch.tensor([[3]])
    smoothed = torch.full((V,), e / V)
    smoothed[3] += 1 - e
    perfect = torch.log(smoothed)[None, None]  # (1, 1, V) logits whose softmax is the smoothed target
    assert masked_cross_entropy(perfect, target, e).item() == pytest.approx(smoothed_loss_floor(V, e), abs=1e-6)
    worse = perfect.clone()
    worse[0, 0, 3] += 1.0
    assert masked_cross_entropy(worse, target, e).item() > smoothed_loss_floor(V, e)
    assert smoothed_loss_floor(V, 0.0) == 0.0
    with pytest.raises(ValueError, match="vocab_size must be >= 2, got 1"):
        smoothed_loss_floor(1, 0.1)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\)"):
        smoothed_loss_floor(7, 1.0)


def test_gumbel_annealing_lowers_the_temperature_step_by_step_in_a_fit():
    """fit_budget adds GumbelAnnealing for a model with temperature_final: over a 4-step budget the
    batches train at tau_0 exp(-r k), from the config's temperature down to temperature_final."""
    from fastai.callback.core import Callback

    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import GumbelAnnealing, fit_budget, set_seed

    from .conftest import copy_task_splits

    class Seen(Callback):
        order = 60  # after GumbelAnnealing (52) set the temperature

        def before_fit(self):
            self.taus = []

        def before_batch(self):
            if self.training:
                self.taus.append(self.learn.model.temperature)

    set_seed(0)
    splits = copy_task_splits(n_train=256)
    src_vocab, tgt_vocab = build_vocabs(splits)
    dls = make_dataloaders(splits, src_vocab, tgt_vocab, bs=64)
    runs = {}
    for final in (0.2, None):
        cfg = RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention="bahdanau", hard="gumbel")
        if final is not None:
            cfg = RNNConfig(**{**cfg.__dict__, "temperature_final": final})
        seen = Seen()
        learn, stats = fit_budget(Seq2SeqRNN(cfg), dls, steps=4, progress=False, cbs=[seen])
        runs[final] = (seen.taus, [type(cb) for cb in learn.cbs])
    taus, kinds = runs[0.2]
    assert taus == pytest.approx([1.0, 0.2 ** (1 / 3), 0.2 ** (2 / 3), 0.2]) and GumbelAnnealing in kinds
    taus, kinds = runs[None]
    assert taus == [1.0] * 4 and GumbelAnnealing not in kinds


def test_gumbel_annealing_follows_a_time_budget_by_its_share():
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import GumbelAnnealing

    model = Seq2SeqRNN(
        RNNConfig(5, 5, emb_dim=4, hid_dim=4, attention="bahdanau", hard="gumbel", temperature_final=0.25)
    )
    clock = FakeClock()
    budget = Budget(10.0, clock=clock)
    cb = GumbelAnnealing(budget)
    cb.learn = budget.learn = SimpleNamespace(model=model, training=True, pct_train=0.0)
    budget.before_fit()
    budget.before_train()
    clock.now += 5.0
    cb.before_batch()
    assert model.temperature == pytest.approx(0.5)  # half the time: the geometric mean of 1 and 0.25


def test_target_count_counts_tokens_but_every_class_label():
    from attnlab.training.train import target_count

    assert target_count(torch.tensor([[5, 6, PAD], [7, PAD, PAD]])) == 3
    assert target_count(torch.tensor([0, 3, 0, 1])) == 4  # class 0 is a label, not padding


def test_fit_budget_takes_another_loss_and_metrics_and_refuses_a_smoothing_it_would_ignore():
    """A classifier trained by fit_budget with its own loss: the loss and metrics are the learner's,
    every image counts as a target, and the validation loss is weighted per image."""
    from fastai.data.core import DataLoaders
    from fastai.data.load import DataLoader

    from attnlab.training.train import fit_budget, set_seed

    set_seed(0)
    x = torch.randn(64, 5)
    y = torch.randint(0, 3, (64,))  # class 0 among them
    train = DataLoader(list(zip(x, y, strict=True)), bs=16, shuffle=True)
    valid = DataLoader(list(zip(x[:20], y[:20], strict=True)), bs=8)  # 8 + 8 + 4: unequal batches
    dls = DataLoaders(train, valid)
    model = torch.nn.Linear(5, 3)
    ce = torch.nn.CrossEntropyLoss()

    def right(out, target):
        return (out.argmax(-1) == target).float().mean()

    learn, stats = fit_budget(model, dls, steps=4, progress=False, loss_func=ce, metrics=[right], loss_every=4)
    assert learn.loss_func is ce and [m.name for m in learn.metrics] == ["right"]
    assert stats.steps == 4 and stats.tokens == 4 * 16
    with torch.no_grad():
        want = float(ce(model(x[:20]), y[:20]))  # the mean over the 20 examples
    assert stats.loss_curve[-1]["valid_loss"] == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError, match="label_smoothing=0.1 configures the default loss"):
        fit_budget(model, dls, steps=1, progress=False, loss_func=ce, label_smoothing=0.1)
    with pytest.raises(TypeError, match="loss_func must be callable"):
        fit_budget(model, dls, steps=1, progress=False, loss_func="cross-entropy")


def test_coverage_phase_switches_coverage_on_for_the_final_share_and_fertility_is_traced():
    """fit_budget adds CoveragePhase for a coverage_loss_from model (off for the first 3 of 4 steps at
    f = 0.75, on for the last, on after the fit) and FertilityTrace for a fertility model."""
    from fastai.callback.core import Callback

    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
    from attnlab.training.train import CoveragePhase, FertilityTrace, fit_budget, set_seed

    from .conftest import copy_task_splits

    class Seen(Callback):
        order = 60  # after CoveragePhase (52)

        def before_fit(self):
            self.phases = []

        def before_batch(self):
            if self.training:
                self.phases.append(self.learn.model.coverage_phase)

    set_seed(0)
    splits = copy_task_splits(n_train=256)
    src_vocab, tgt_vocab = build_vocabs(splits)
    dls = make_dataloaders(splits, src_vocab, tgt_vocab, bs=64)
    common = dict(emb_dim=8, hid_dim=16, attention="bahdanau", coverage=True, coverage_loss=1.0)
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), coverage_loss_from=0.75, **common))
    seen = Seen()
    learn, stats = fit_budget(model, dls, steps=4, progress=False, cbs=[seen])
    assert seen.phases == [False, False, False, True] and model.coverage_phase
    assert CoveragePhase in [type(cb) for cb in learn.cbs] and not stats.fertility_trace
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), fertility=2, fertility_floor=0.5, **common))
    learn, stats = fit_budget(model, dls, steps=4, progress=False, loss_every=2)
    assert FertilityTrace in [type(cb) for cb in learn.cbs] and CoveragePhase not in [type(cb) for cb in learn.cbs]
    assert [p["step"] for p in stats.fertility_trace] == [1, 2, 4]
    assert all(0.5 <= p["p10"] <= p["median"] <= p["p90"] <= 2.0 for p in stats.fertility_trace)
