"""Tests of lesson 07's attention variants: the functions of attnlab.models.variants against hand-written
references, and each variant as one switch of the RNN attention model (checkpoints, hostile input)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from attnlab.core.checks import check_float
from attnlab.data import gold, metrics
from attnlab.data.corpus import Pair
from attnlab.data.loaders import collate
from attnlab.data.vocab import SPECIALS, Vocab
from attnlab.models import variants
from attnlab.models.decoding import beam_search
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.training import explain
from attnlab.training.checkpoint import load_checkpoint, save_checkpoint

VARIANTS = {
    "coverage": dict(coverage=True, coverage_loss=1.0),
    "supervised": dict(align_loss=0.5),
    "location_aware": dict(prev_conv=3),
    "monotonic": dict(monotonic=True),
    "gumbel": dict(hard="gumbel", temperature=0.5),
    "gumbel_annealed": dict(hard="gumbel", temperature=1.0, temperature_final=0.5),
    "fertility": dict(coverage=True, fertility=2, coverage_loss=1.0),
    "reinforce": dict(hard="reinforce", entropy_bonus=0.01),
    "coverage_see": dict(coverage=True, coverage_loss=1.0, coverage_loss_from=0.8),
    "undertranslation": dict(undertranslation_loss=1.0),
    "fertility_floor": dict(coverage=True, fertility=2, fertility_floor=0.5, coverage_loss=1.0),
    "reinforce_learned": dict(hard="reinforce", entropy_bonus=0.01, reinforce_baseline="learned"),
}


def tiny(**kw) -> Seq2SeqRNN:
    torch.manual_seed(0)
    cfg = RNNConfig(src_vocab_size=12, tgt_vocab_size=11, emb_dim=6, hid_dim=8, attn_dim=5, attention="bahdanau", **kw)
    return Seq2SeqRNN(cfg)


SRC = torch.tensor([[4, 5, 6, 7, 2], [5, 8, 2, 0, 0]])  # (B, S): EOS = 2, PAD = 0
TGT_IN = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])  # (B, T)


def gold_batch() -> torch.Tensor:
    gold = torch.zeros(2, 4, 5)  # (B, T, S)
    gold[0, 0, 0] = gold[0, 1, 1] = 1.0
    gold[0, 2, 2] = gold[0, 2, 3] = 0.5
    gold[1, 0, 1] = 1.0
    return gold


# ----------------------------------------------------------------- coverage loss
def coverage_loss_reference(attn, keep):
    total, steps = 0.0, 0
    for b in range(attn.shape[0]):
        cov = [0.0] * attn.shape[2]
        for t in range(attn.shape[1]):
            if not keep[b, t]:
                continue
            total += sum(min(float(attn[b, t, i]), cov[i]) for i in range(attn.shape[2]))
            cov = [cov[i] + float(attn[b, t, i]) for i in range(attn.shape[2])]
            steps += 1
    return total / steps


def test_coverage_loss_matches_the_loop_and_ignores_padded_steps():
    g = torch.Generator().manual_seed(1)
    attn = torch.softmax(torch.randn(3, 6, 5, generator=g), -1)  # (B, T, S)
    keep = torch.ones(3, 6, dtype=torch.bool)
    keep[1, 4:] = keep[2, 2:] = False
    got = variants.coverage_loss(attn, keep)
    assert abs(float(got) - coverage_loss_reference(attn, keep)) < 1e-6
    # garbage on padded steps changes nothing
    noisy = attn.clone()
    noisy[1, 4:] = 7.0
    assert abs(float(variants.coverage_loss(noisy, keep)) - float(got)) < 1e-6


def test_coverage_loss_is_zero_when_each_word_is_read_once_and_counts_a_repeat():
    once = torch.eye(3).unsqueeze(0)  # (1, 3, 3): one word per step
    assert float(variants.coverage_loss(once)) == 0.0
    twice = torch.tensor([[[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]]])  # word 0 read twice
    assert float(variants.coverage_loss(twice)) == pytest.approx(1 / 3)


def test_coverage_loss_refuses_a_bad_mask():
    with pytest.raises(ValueError, match=r"tgt_keep must be a bool \(B, T\)"):
        variants.coverage_loss(torch.rand(2, 3, 4), torch.ones(2, 4, dtype=torch.bool))


# ----------------------------------------------------------------- supervised attention
def test_alignment_loss_is_cross_entropy_over_linked_steps_only():
    attn = torch.softmax(torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(2)), -1)  # (B, T, S)
    gold = gold_batch()
    want = (
        -(
            attn[0, 0, 0].log()
            + attn[0, 1, 1].log()
            + 0.5 * (attn[0, 2, 2].log() + attn[0, 2, 3].log())
            + attn[1, 0, 1].log()
        )
        / 4
    )
    torch.testing.assert_close(variants.alignment_loss(attn, gold), want)
    # rows without a link (padding, <eos>, unaligned words) do not count, whatever the attention does there
    moved = attn.clone()
    moved[0, 3] = torch.tensor([1.0, 0, 0, 0, 0])
    moved[1, 1:] = 0.0
    torch.testing.assert_close(variants.alignment_loss(moved, gold), want)


def test_alignment_loss_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"gold must have the attention's shape"):
        variants.alignment_loss(torch.rand(2, 4, 5), torch.rand(2, 4, 6))


def test_gold_attention_spreads_each_row_over_its_sure_links():
    pair = Pair(src=("a", "b", "c"), tgt=("x", "y", "z", "w"), align=((0,), (1, 2), (), (2,)), content=(True,) * 4)
    g = gold.gold_attention(pair)
    assert g.shape == (5, 4)
    torch.testing.assert_close(g[1], torch.tensor([0.0, 0.5, 0.5, 0.0]))
    assert g[2].sum() == 0 and g[4].sum() == 0  # unaligned word and <eos>
    with pytest.raises(ValueError, match="gold links"):
        gold.gold_attention(Pair(src=("a",), tgt=("x",)))


def test_collate_pads_a_gold_attention_with_zeros():
    items = [
        (torch.tensor([4, 2]), torch.tensor([1, 5]), torch.ones(2, 2), torch.tensor([5, 2])),
        (torch.tensor([4, 5, 2]), torch.tensor([1]), torch.ones(1, 3), torch.tensor([2])),
    ]
    src, tgt_in, gold, tgt_out = collate(items)
    assert gold.shape == (2, 2, 3)
    assert gold[0, :, 2].sum() == 0 and gold[1, 1].sum() == 0


# ----------------------------------------------------------------- monotonic attention
def monotonic_reference(p, prev):
    """Raffel et al.'s definition, term by term."""
    B, S = p.shape
    out = torch.zeros(B, S, dtype=p.dtype)
    for b, j in itertools.product(range(B), range(S)):
        total = 0.0
        for k in range(j + 1):
            prod = 1.0
            for m in range(k, j):
                prod *= 1 - float(p[b, m])
            total += float(prev[b, k]) * prod
        out[b, j] = float(p[b, j]) * total
    return out


@pytest.mark.parametrize("parallel", [False, True])
def test_monotonic_expected_alignment_matches_the_definition(parallel):
    g = torch.Generator().manual_seed(3)
    p = torch.rand(3, 6, generator=g, dtype=torch.float64)
    prev = torch.softmax(torch.randn(3, 6, generator=g, dtype=torch.float64), -1)
    got = variants.monotonic_attention(p, prev, parallel=parallel)
    torch.testing.assert_close(got, monotonic_reference(p, prev), atol=1e-12, rtol=0)
    assert bool((got.sum(-1) <= 1 + 1e-12).all())


def test_monotonic_parallel_form_is_exact_where_the_closed_form_divides_by_zero():
    # p = 1 makes the exclusive cumulative product 0 from the next position on: Raffel et al.'s closed
    # form divides by it (inf * 0 = NaN without a clamp, wrong values with one); the scan is exact
    p = torch.tensor([[0.3, 1.0, 0.6, 0.2]], dtype=torch.float64)
    prev = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    one_minus = torch.cat([torch.ones(1, 1, dtype=torch.float64), 1 - p[:, :-1]], dim=1)
    cumprod = torch.cumprod(one_minus, dim=1)
    unclamped = p * cumprod * torch.cumsum(prev / cumprod, dim=1)
    assert not torch.isfinite(unclamped).all()
    got = variants.monotonic_attention(p, prev, parallel=True)
    exact = variants.monotonic_attention(p, prev, parallel=False)
    torch.testing.assert_close(got, exact, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_monotonic_parallel_form_is_exact_after_positions_with_p_near_1(dtype):
    # Regression: the closed form divided by cumprod_excl(1 - p) = 1e-12 at position 3, below its
    # 1e-10 clamp, and gave 0.005 where the head, starting on position 3, stops with p = 0.5.
    p = torch.tensor([[0.9999, 0.9999, 0.9999, 0.5, 0.3]], dtype=dtype)
    prev = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0]], dtype=dtype)
    want = torch.tensor([[0.0, 0.0, 0.0, 0.5, 0.5 * 0.3]], dtype=dtype)
    tol = dict(atol=1e-7, rtol=0) if dtype == torch.float32 else dict(atol=1e-15, rtol=0)
    torch.testing.assert_close(variants.monotonic_attention(p, prev, parallel=False), want, **tol)
    torch.testing.assert_close(variants.monotonic_attention(p, prev, parallel=True), want, **tol)
    # a certain stop (p = 1) no longer costs the positions after it their exactness, nor the gradients
    p = torch.tensor([[0.3, 1.0, 0.6, 0.2]], dtype=dtype, requires_grad=True)
    prev = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=dtype, requires_grad=True)
    grads = []
    for parallel in (True, False):
        got = variants.monotonic_attention(p, prev, parallel=parallel)
        torch.testing.assert_close(got.detach(), monotonic_reference(p.detach(), prev.detach()), **tol)
        grads.append(torch.autograd.grad(got.sum(), (p, prev)))
    for par, rec in zip(*grads, strict=True):
        assert bool(par.isfinite().all())
        torch.testing.assert_close(par, rec, **tol)


@pytest.mark.numeric
@pytest.mark.parametrize("S", [5, 17, 40, 64])
def test_monotonic_parallel_form_equals_the_recurrence_within_1e_5_with_exact_0s_1s_and_runs_near_1(S):
    """Lesson 08's claim (issue 26): in float32 the scan equals the recurrence to 1e-5 for random p with
    exact 0s and 1s and runs of p = 1 - 1e-4 (where the clamped closed form went wrong), every start."""
    g = torch.Generator().manual_seed(S)
    B = 64
    p = torch.rand(B, S, generator=g)  # (B, S)
    kind = torch.randint(0, 6, (B, S), generator=g)  # (B, S): 0 -> exact 0, 1 -> exact 1, 2, 3 -> near 1
    p = torch.where(kind == 0, 0.0, torch.where(kind == 1, 1.0, p))
    p = torch.where((kind == 2) | (kind == 3), 1 - 1e-4, p)
    run_start = torch.randint(0, S, (B,), generator=g)  # and one run of near-1 p per row, up to 8 long
    pos = torch.arange(S)
    in_run = (pos >= run_start[:, None]) & (pos < run_start[:, None] + torch.randint(1, 9, (B, 1), generator=g))
    p = torch.where(in_run, 1 - 1e-4, p).float()
    assert bool((p == 0).any() and (p == 1).any() and (p == torch.tensor(1 - 1e-4)).any())
    starts = {
        "one-hot after the run": torch.nn.functional.one_hot((run_start + 3).clamp_max(S - 1), S).float(),
        "distribution": torch.softmax(torch.randn(B, S, generator=g) * 3, -1),
        "one-hot at 0": torch.nn.functional.one_hot(torch.zeros(B, dtype=torch.long), S).float(),
    }
    for what, prev in starts.items():
        scan = variants.monotonic_attention(p, prev, parallel=True)
        loop = variants.monotonic_attention(p, prev, parallel=False)
        exact = variants.monotonic_attention(p.double(), prev.double(), parallel=False)
        assert bool(scan.isfinite().all()), what
        assert float((scan - loop).abs().max()) <= 1e-5, what
        assert float((scan.double() - exact).abs().max()) <= 1e-5, what
        assert bool((scan.sum(-1) <= 1 + 1e-5).all()), what


def test_monotonic_with_a_one_hot_start_and_certain_stops_is_hard():
    prev = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    p = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    want = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    torch.testing.assert_close(variants.monotonic_attention(p, prev, parallel=False), want)
    near = p.double().clamp(1e-7, 1 - 1e-7)  # the parallel form, where its clamp does not bite
    torch.testing.assert_close(variants.monotonic_attention(near, prev.double()), want.double(), atol=1e-6, rtol=0)


def test_hard_monotonic_attention_stops_at_the_first_selected_position_on_or_after_the_last():
    p = torch.tensor([[0.9, 0.2, 0.7, 0.6], [0.9, 0.1, 0.2, 0.3], [0.0, 0.0, 0.6, 0.0]])
    prev = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    got = variants.hard_monotonic_attention(p, prev)
    want = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    torch.testing.assert_close(got, want)  # row 1 ran off the end: no position, zero context
    # a row that has run off stays off
    torch.testing.assert_close(variants.hard_monotonic_attention(p, got)[1], torch.zeros(4))


def test_monotonic_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"prev must have the shape of p"):
        variants.monotonic_attention(torch.rand(2, 4), torch.rand(2, 5))


# ----------------------------------------------------------------- hard attention
def test_gumbel_straight_through_is_one_hot_forward_and_soft_backward():
    g = torch.Generator().manual_seed(4)
    scores = torch.randn(3, 5, generator=g, requires_grad=True)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    y = variants.gumbel_straight_through(scores, mask, 0.7, generator=torch.Generator().manual_seed(5))
    assert torch.equal(y.detach().sum(-1), torch.ones(3))
    assert set(y.detach().unique().tolist()) <= {0.0, 1.0}
    assert y.detach()[1, 3:].sum() == 0 and y.detach()[2, 0] == 1  # never a padded position
    # the gradient is the soft sample's: recompute it by hand with the same noise
    u = torch.rand(scores.shape, generator=torch.Generator().manual_seed(5))
    gumbel = -torch.log(-torch.log(u.clamp(1e-10, 1 - 1e-7)))
    soft = torch.softmax(((scores + gumbel) / 0.7).masked_fill(~mask, float("-inf")), -1)
    w = torch.randn(3, 5, generator=g)
    (grad,) = torch.autograd.grad((y * w).sum(), scores)
    (want,) = torch.autograd.grad((soft * w).sum(), scores)
    torch.testing.assert_close(grad, want)
    torch.testing.assert_close(y.detach(), torch.nn.functional.one_hot(soft.argmax(-1), 5).float())


@pytest.mark.parametrize("tau", [0.0, -1.0, float("nan")])
def test_gumbel_refuses_a_temperature_that_is_not_positive(tau):
    with pytest.raises(ValueError, match=r"temperature must be > 0"):
        variants.gumbel_straight_through(torch.rand(1, 3), torch.ones(1, 3, dtype=torch.bool), tau)


def test_check_float_refuses_a_bool_and_a_string():
    with pytest.raises(TypeError, match="lam must be a float"):
        check_float("lam", True)
    with pytest.raises(TypeError, match="lam must be a float"):
        check_float("lam", "1")


# ----------------------------------------------------------------- dropped / repeated words
def test_dropped_repeated_counts_from_the_gold_links():
    pair = Pair(
        src=("the", "cat", "sees", "a", "dog"),
        tgt=("le", "chat", "voit", "un", "chien"),
        align=((0,), (1,), (2,), (3,), (4,)),
        content=(False, True, True, False, True),
    )
    assert metrics.dropped_repeated(pair.tgt, pair) == (0, 0)
    assert metrics.dropped_repeated(("le", "chat", "chat", "voit", "un"), pair) == (1, 1)  # chien dropped, chat twice
    # function words are not counted: dropping "un" is no dropped source word
    assert metrics.dropped_repeated(("le", "chat", "voit", "chien"), pair) == (0, 0)
    by_bucket = metrics.coverage_errors([("le", "chat", "chat", "voit", "un"), pair.tgt], [pair, pair])
    assert by_bucket == {"1-10": {"dropped": 1, "repeated": 1, "sentences": 2, "per_100_words": round(100 * 2 / 6, 2)}}


def test_coverage_errors_refuses_unequal_lengths():
    pair = Pair(src=("a",), tgt=("x",), align=((0,),), content=(True,))
    with pytest.raises(ValueError, match="same length"):
        metrics.coverage_errors([], [pair])


# ----------------------------------------------------------------- the switches on the model
def test_default_config_has_every_variant_off_and_old_configs_load():
    c = RNNConfig(src_vocab_size=5, tgt_vocab_size=5, attention="bahdanau")
    assert (c.coverage, c.prev_conv, c.monotonic, c.hard, c.coverage_loss, c.align_loss) == (
        False,
        0,
        False,
        None,
        0.0,
        0.0,
    )
    assert (c.sources, c.fertility, c.entropy_bonus, c.temperature_final) == (1, 0, 0.0, None)
    model = tiny()
    names = {k for k in model.state_dict()}
    assert not any(k.startswith(("coverage_proj", "prev_", "monotonic", "source_combine", "fertility")) for k in names)
    assert not list(model.buffers())  # no reward baseline either


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_variant_trains_decodes_and_round_trips_through_a_checkpoint(name, tmp_path):
    model = tiny(**VARIANTS[name])
    model.train()
    logits, attn = model(SRC, TGT_IN, gold_batch(), return_attention=True)
    assert logits.shape == (2, 4, 11) and attn.shape == (2, 4, 5)
    assert float(attn.detach()[1, :, 3:].abs().sum()) == 0.0  # padding never attended
    loss = logits.logsumexp(-1).mean() + (model.aux_loss if model.aux_loss is not None else 0.0)
    loss.backward()
    trained = ("score", "coverage", "prev_", "fertility")
    assert all(p.grad is not None for n, p in model.named_parameters() if n.startswith(trained))
    if any(VARIANTS[name].get(k) for k in ("coverage_loss", "align_loss", "undertranslation_loss")):
        assert model.aux_loss is not None and float(model.aux_loss.detach()) > 0
    model.eval()
    out = beam_search(model, SRC, beam=2, max_len=6)
    assert out.tokens.shape[0] == 2
    src_vocab = Vocab([*SPECIALS, *(f"s{i}" for i in range(12 - len(SPECIALS)))])
    tgt_vocab = Vocab([*SPECIALS, *(f"w{i}" for i in range(11 - len(SPECIALS)))])
    save_checkpoint(model, tmp_path / "m", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    loaded, _ = load_checkpoint(tmp_path / "m")
    assert loaded.config == model.config
    with torch.no_grad():
        torch.testing.assert_close(loaded(SRC, TGT_IN), model(SRC, TGT_IN), atol=0, rtol=0)


def test_coverage_state_is_the_running_sum_of_attention_and_enters_the_score():
    model = tiny(coverage=True).eval()
    memory = model.encode(SRC)
    state = model.init_state(memory)
    assert len(state) == 2 and torch.equal(state[1], torch.zeros(2, 5))
    y = torch.tensor([1, 1])
    total = torch.zeros(2, 5)
    for t in range(3):
        _, state, attn = model.step(memory, state, y, t)
        total = total + attn
        torch.testing.assert_close(state[1], total)
    # the score sees the coverage: another coverage, other weights
    s0 = model.init_state(memory)
    _, _, a_fresh = model.step(memory, s0, y, 0)
    _, _, a_covered = model.step(memory, (s0[0], torch.ones(2, 5) * 3), y, 0)
    assert not torch.allclose(a_fresh, a_covered)


def test_monotonic_model_trains_with_the_expectation_and_decodes_hard():
    model = tiny(monotonic=True)
    model.train()
    _, soft = model(SRC, TGT_IN, return_attention=True)
    assert not set(soft.detach().unique().tolist()) <= {0.0, 1.0}
    model.eval()
    _, hard = model(SRC, TGT_IN, return_attention=True)
    assert set(hard.unique().tolist()) <= {0.0, 1.0}
    pos = hard.argmax(-1)  # (B, T): the read head never moves left while it is on the source
    alive = hard.sum(-1) > 0
    for b in range(2):
        steps = pos[b][alive[b]]
        assert bool((steps[1:] >= steps[:-1]).all())


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(align_loss=-0.1), r"align_loss must be >= 0"),
        (dict(coverage_loss=-1.0), r"coverage_loss must be >= 0"),
        (dict(hard="gumbel", temperature=0.0), r"temperature must be > 0"),
        (dict(fertility=2), r"fertility=2 divides the coverage update: it needs coverage=True"),
        (dict(coverage=True, fertility=-1), r"fertility must be >= 0, got -1"),
        (dict(coverage=True, fertility=1.5), r"fertility must be an int"),
        (dict(entropy_bonus=0.1), r"entropy_bonus .* needs hard='reinforce', got None"),
        (dict(hard="reinforce", entropy_bonus=-0.1), r"entropy_bonus must be >= 0"),
        (dict(reinforce_mix=0.5), r"reinforce_mix .* needs hard='reinforce', got None"),
        (dict(reinforce_baseline="learned"), r"reinforce_baseline='learned' .* needs hard='reinforce', got None"),
        (dict(hard="reinforce", reinforce_baseline="critic"), r"reinforce_baseline"),
        (dict(hard="reinforce", reinforce_mix=1.0), r"reinforce_mix must be in \[0, 1\), got"),
        (dict(hard="reinforce", reinforce_mix=-0.1), r"reinforce_mix must be in \[0, 1\), got"),
        (dict(temperature_final=0.5), r"temperature_final .* needs hard='gumbel', got None"),
        (dict(hard="reinforce", temperature_final=0.5), r"needs hard='gumbel', got 'reinforce'"),
        (dict(hard="gumbel", temperature_final=0.0), r"temperature_final must be > 0"),
        (dict(hard="gumbel", temperature=0.5, temperature_final=0.8), r"temperature_final must be <= temperature"),
        (dict(temperature=-2.0), r"temperature must be > 0"),
        (dict(hard="sampled"), r"hard='sampled'; expected one of \(None, 'gumbel', 'reinforce'\)"),
        (dict(prev_conv=4), r"prev_conv must be odd"),
        (dict(coverage=True, score="dot"), r"set score='concat'"),
        (dict(monotonic=True, hard="gumbel"), r"choose one"),
        (dict(coverage=1), r"coverage must be a bool"),
    ],
)
def test_hostile_configs_get_clear_errors(kw, match):
    base = dict(src_vocab_size=5, tgt_vocab_size=5, emb_dim=4, hid_dim=4, attention="bahdanau")
    with pytest.raises((ValueError, TypeError), match=match):
        RNNConfig(**{**base, **kw})


def test_variants_need_attention():
    with pytest.raises(ValueError, match="need attention"):
        RNNConfig(src_vocab_size=5, tgt_vocab_size=5, coverage_loss=1.0)


def test_a_coverage_state_of_the_wrong_shape_is_refused():
    model = tiny(coverage=True).eval()
    memory = model.encode(SRC)
    s0, cov = model.init_state(memory)
    y = torch.tensor([1, 1])
    with pytest.raises(ValueError, match=r"state\[1\] \(coverage\) must be a float \(B=2, S=5\) tensor, got"):
        model.step(memory, (s0, cov[:, :4]), y, 0)
    with pytest.raises(ValueError, match=r"state must be a tuple of 1 \(B, H\) tensors then 1 \(B, S\) \(coverage\)"):
        model.step(memory, (s0,), y, 0)


def test_supervised_training_needs_the_gold_attention_of_the_right_shape():
    model = tiny(align_loss=1.0).train()
    with pytest.raises(ValueError, match="needs the gold attention"):
        model(SRC, TGT_IN)
    with pytest.raises(ValueError, match=r"gold must be \(B, T, S\) = \(2, 4, 5\)"):
        model(SRC, TGT_IN, gold_batch()[:, :3])
    model.eval()
    model(SRC, TGT_IN)  # eval needs no gold
    assert model.aux_loss is None


def test_replacing_a_field_keeps_the_config_checked():
    c = RNNConfig(src_vocab_size=5, tgt_vocab_size=5, attention="bahdanau")
    with pytest.raises(ValueError, match="align_loss must be >= 0"):
        dataclasses.replace(c, align_loss=-1.0)


def test_a_checkpoint_saved_before_the_variants_loads_with_every_switch_off():
    import json

    from attnlab.training.results import checkpoint_path

    base = checkpoint_path("bahdanau", shipped=True)
    config = json.loads(base.with_suffix(".json").read_text())["config"]
    assert "coverage" not in config and "align_loss" not in config  # written before lesson 07
    model, _ = load_checkpoint(base)
    c = model.config
    assert (c.coverage, c.prev_conv, c.monotonic, c.hard, c.align_loss) == (False, 0, False, None, 0.0)
    assert len(model.init_state(model.encode(torch.tensor([[5, 2]])))) == 1  # the state has no extra tensors


def test_the_training_loop_adds_the_models_aux_loss_in_training_only():
    from types import SimpleNamespace

    from attnlab.training.train import AuxLoss

    model = tiny(align_loss=1.0).train()
    model(SRC, TGT_IN, gold_batch())
    cb = AuxLoss()
    for training, want in ((True, 2.0 + float(model.aux_loss.detach())), (False, 2.0)):
        learn = SimpleNamespace(model=model, loss_grad=torch.tensor(2.0), loss=torch.tensor(2.0), training=training)
        cb.learn = learn
        cb.after_loss()
        assert float(learn.loss_grad.detach()) == pytest.approx(want)
        assert float(learn.loss.detach()) == pytest.approx(want)


def test_supervised_batches_carry_the_gold_attention():
    from attnlab.data.corpus import Splits
    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs

    pairs = [
        Pair(src=("a", "b"), tgt=("x", "y", "z"), align=((0,), (1,), ()), content=(True, True, False)),
        Pair(src=("b",), tgt=("y",), align=((0,),), content=(True,)),
    ]
    splits = Splits(pairs, pairs, pairs)
    sv, tv = build_vocabs(splits)
    dls = make_dataloaders(splits, sv, tv, bs=2, device="cpu", alignments=True)
    src, tgt_in, gold, tgt_out = dls.valid.one_batch()
    assert gold.shape == (*tgt_in.shape, src.size(1))
    assert dls.valid.n_inp == 3
    assert float(gold.sum()) == 3.0  # three linked target tokens, each row summing to 1


def _gradient_problem(seed=0, B=3, S=5, D=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, S, generator=g), torch.randn(B, S, D, generator=g), torch.randn(B, D, generator=g)


def test_exact_hard_attention_gradient_is_p_times_loss_minus_its_mean():
    scores, values, target = _gradient_problem()
    grad = variants.hard_attention_gradients(scores, values, target, estimator="exact", samples=2)
    p = torch.softmax(scores, -1)
    losses = ((values - target[:, None]) ** 2).sum(-1)
    by_hand = p * (losses - (p * losses).sum(-1, keepdim=True))
    torch.testing.assert_close(grad, by_hand.expand(2, -1, -1))


def test_reinforce_is_unbiased_and_soft_attention_follows_another_gradient():
    scores, values, target = _gradient_problem()
    exact = variants.hard_attention_gradients(scores, values, target, estimator="exact")[0]
    draws = variants.hard_attention_gradients(
        scores, values, target, estimator="reinforce", samples=3000, generator=torch.Generator().manual_seed(1)
    )
    stderr = draws.std(0) / 3000**0.5
    assert ((draws.mean(0) - exact).abs() <= 4 * stderr + 1e-6).all()
    assert draws.var(0).mean() > 0.1  # a single draw is far from the mean: the noise lesson 07 shows
    soft = variants.hard_attention_gradients(scores, values, target, estimator="soft")[0]
    assert (soft - exact).abs().max() > 0.05


def test_straight_through_gumbel_gradient_estimates_vary_and_read_one_position():
    scores, values, target = _gradient_problem()
    draws = variants.hard_attention_gradients(
        scores, values, target, estimator="gumbel", samples=50, generator=torch.Generator().manual_seed(2)
    )
    assert draws.shape == (50, 3, 5) and torch.isfinite(draws).all()
    assert draws.var(0).mean() > 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(estimator="score-function"), "estimator='score-function'"),
        (dict(estimator="exact", samples=0), "samples must be an int >= 1"),
        (dict(estimator="reinforce", baseline_decay=1.0), r"baseline_decay must be in \[0, 1\)"),
        (dict(estimator="gumbel", temperature=0.0), "temperature"),
    ],
)
def test_hard_attention_gradients_refuse_bad_arguments(kw, match):
    scores, values, target = _gradient_problem()
    with pytest.raises(ValueError, match=match):
        variants.hard_attention_gradients(scores, values, target, **kw)


def test_hard_attention_gradients_refuse_values_that_do_not_fit():
    scores, values, target = _gradient_problem()
    with pytest.raises(ValueError, match=r"values must be \(B=3, S=5, D\)"):
        variants.hard_attention_gradients(scores, values[:, :4], target, estimator="exact")
    with pytest.raises(ValueError, match=r"target must be \(B=3, D=2\)"):
        variants.hard_attention_gradients(scores, values, target[:, :1], estimator="exact")


# ----------------------------------------------------------------- attention as explanation
def test_uniform_attention_spreads_weights_evenly_and_restores_the_model():
    model = tiny().eval()
    with torch.no_grad():
        before_logits, before = model(SRC, TGT_IN, return_attention=True)
        with explain.uniform_attention(model) as m:
            logits, attn = m(SRC, TGT_IN, return_attention=True)
        after_logits, _ = model(SRC, TGT_IN, return_attention=True)
    torch.testing.assert_close(attn[0], torch.full((4, 5), 0.2))
    torch.testing.assert_close(attn[1, :, :3], torch.full((4, 3), 1 / 3))
    assert float(attn[1, :, 3:].abs().sum()) == 0.0
    assert not torch.allclose(logits, before_logits)  # the intervention changes the output ...
    torch.testing.assert_close(after_logits, before_logits, atol=0, rtol=0)  # ... and is undone after the block
    assert "_attend" not in vars(model)


def test_uniform_attention_is_undone_when_the_block_raises():
    model = tiny()
    with pytest.raises(RuntimeError, match="inside"), explain.uniform_attention(model):
        raise RuntimeError("inside")
    assert "_attend" not in vars(model)


@pytest.mark.parametrize("kw", [dict(coverage=True), dict(monotonic=True)])
def test_uniform_attention_refuses_models_it_would_break(kw):
    with pytest.raises(ValueError, match="plain global soft attention"), explain.uniform_attention(tiny(**kw)):
        pass
    cfg = RNNConfig(src_vocab_size=12, tgt_vocab_size=11, emb_dim=6, hid_dim=8)
    with (
        pytest.raises(ValueError, match="needs a Seq2SeqRNN with attention"),
        explain.uniform_attention(Seq2SeqRNN(cfg)),
    ):
        pass


def _toy_vocabs():
    src_vocab = Vocab([*SPECIALS, *(f"s{i}" for i in range(12 - len(SPECIALS)))])
    tgt_vocab = Vocab([*SPECIALS, *(f"w{i}" for i in range(11 - len(SPECIALS)))])
    return src_vocab, tgt_vocab


def test_leave_one_out_importance_matches_one_forward_per_removed_word():
    model = tiny().eval()
    src_vocab, tgt_vocab = _toy_vocabs()
    pair = Pair(src=("s0", "s1", "s2"), tgt=("w0", "w1"), align=((0,), (2,)), content=(True, True))
    imp = explain.leave_one_out_importance(model, pair, src_vocab, tgt_vocab)
    assert imp.shape == (2, 3)

    def logp(src_words):
        src = torch.tensor([src_vocab.encode(src_words)])  # (1, S) with <eos>
        tgt_in = torch.tensor([[1, *tgt_vocab.encode(pair.tgt, eos=False)]])  # (1, T+1)
        with torch.no_grad():
            lp = torch.log_softmax(model(src, tgt_in), -1)[0]  # (T+1, V)
        return torch.stack([lp[t, tgt_vocab.encode(pair.tgt, eos=False)[t]] for t in range(2)])  # (T,)

    full = logp(pair.src)
    for j in range(3):
        torch.testing.assert_close(imp[:, j], full - logp(pair.src[:j] + pair.src[j + 1 :]), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="at least 2 words"):
        explain.leave_one_out_importance(model, Pair(src=("s0",), tgt=("w0",)), src_vocab, tgt_vocab)


def test_the_reinforce_baseline_lowers_the_variance_here_and_can_be_switched_off():
    scores, values, target = _gradient_problem()
    var = {}
    for flag in (False, True):
        draws = variants.hard_attention_gradients(
            scores,
            values,
            target,
            estimator="reinforce",
            samples=2000,
            baseline=flag,
            generator=torch.Generator().manual_seed(4),
        )
        var[flag] = float(draws.var(0).mean())
    assert var[True] < var[False]
    with pytest.raises(TypeError, match="baseline must be a bool"):
        variants.hard_attention_gradients(scores, values, target, estimator="reinforce", baseline=1)


# ----------------------------------------------------------------- fertility (Tu et al. 2016)
def test_fertility_is_predicted_once_per_word_and_divides_the_coverage_update():
    model = tiny(coverage=True, fertility=3).eval()
    memory = model.encode(SRC)
    u = model.fertility_proj.weight[0]  # (H,)
    phi = model.predicted_fertility(memory)
    assert phi.shape == (2, 5) and memory["fertility"] is phi
    for b in range(2):
        for j in range(5):
            want = 3 * torch.sigmoid(torch.dot(u, memory["states"][b, j]))
            torch.testing.assert_close(phi[b, j], want)
    state = model.init_state(memory)
    y = torch.tensor([1, 1])
    covered = torch.zeros(2, 5)
    with torch.no_grad():
        for t in range(3):
            _, state, attn = model.step(memory, state, y, t)
            covered = covered + attn / phi
            torch.testing.assert_close(state[1], covered)
    plain = tiny(coverage=True).eval()
    _, (s, cov), attn = plain.step(plain.encode(SRC), plain.init_state(plain.encode(SRC)), y, 0)
    assert torch.equal(cov, attn)  # without fertility the coverage is the plain sum, unchanged


def test_predicted_fertility_refuses_a_model_without_it_and_a_memory_without_it():
    with pytest.raises(ValueError, match="predicted_fertility needs a model with config.fertility > 0"):
        tiny(coverage=True).predicted_fertility(tiny(coverage=True).encode(SRC))
    model = tiny(coverage=True, fertility=2)
    with pytest.raises(TypeError, match=r"memory must be the dict .*\(with 'fertility'\), got \['lengths'"):
        model.predicted_fertility({k: v for k, v in model.encode(SRC).items() if k != "fertility"})
    memory = model.encode(SRC)
    del memory["fertility"]
    with pytest.raises(TypeError, match=r"memory must be the dict .*'fertility'\]"):
        model.decode(memory, TGT_IN)


# ----------------------------------------------------------------- REINFORCE hard attention
def test_reinforce_sample_is_one_hot_and_keeps_the_log_probability_and_entropy():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(4, 6, generator=g, requires_grad=True)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1, 3:] = False
    weights, log_prob, entropy = variants.reinforce_sample(scores, mask, generator=torch.Generator().manual_seed(3))
    assert not weights.requires_grad and set(weights.unique().tolist()) == {0.0, 1.0}
    assert torch.equal(weights.sum(-1), torch.ones(4))
    picked = weights.argmax(-1)
    for b in range(4):
        idx = [j for j in range(6) if mask[b, j]]
        logp = torch.log_softmax(scores[b, idx].detach(), 0)
        torch.testing.assert_close(log_prob[b].detach(), logp[idx.index(int(picked[b]))])
        torch.testing.assert_close(entropy[b].detach(), -(logp.exp() * logp).sum())
    log_prob.sum().backward(retain_graph=True)  # the gradient of log p(a) reaches the scores ...
    assert scores.grad.abs().sum() > 0 and float(scores.grad[1, 3:].abs().sum()) == 0.0
    (grad,) = torch.autograd.grad(entropy.sum(), scores)  # ... and so does the entropy's, finite off the mask
    assert torch.isfinite(grad).all() and float(grad[1, 3:].abs().sum()) == 0.0
    # ... the same generator gives the same draw, and masked positions are never drawn
    again, _, _ = variants.reinforce_sample(scores, mask, generator=torch.Generator().manual_seed(3))
    assert torch.equal(again, weights)
    many = sum(variants.reinforce_sample(scores, mask)[0] for _ in range(300))
    assert float(many[1, 3:].sum()) == 0.0 and float(many[1, :3].sum()) == 300.0


def test_reinforce_sample_refuses_a_bad_mask():
    with pytest.raises(ValueError, match=r"mask must be a bool \(B, S\) = \(2, 3\) tensor"):
        variants.reinforce_sample(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask has a row without True"):
        variants.reinforce_sample(torch.zeros(2, 3), torch.tensor([[True, False, False], [False] * 3]))


def test_next_tokens_and_sentence_log_likelihood_by_hand():
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0], [1, 0, 0, 0]])
    assert variants.next_tokens(tgt_in).tolist() == [[4, 5, 6, 2], [7, 2, 0, 0], [2, 0, 0, 0]]
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4, 9, generator=g)
    targets = variants.next_tokens(tgt_in)
    r = variants.sentence_log_likelihood(logits, targets)
    for b in range(3):
        lp = [float(torch.log_softmax(logits[b, t], 0)[targets[b, t]]) for t in range(4) if targets[b, t] != 0]
        assert float(r[b]) == pytest.approx(sum(lp) / len(lp), abs=1e-6)
    with pytest.raises(ValueError, match="targets has a row without a real token"):
        variants.sentence_log_likelihood(logits, torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"targets must be \(B, T\) = \(3, 4\)"):
        variants.sentence_log_likelihood(logits, targets[:, :3])


def test_reinforce_surrogate_by_hand():
    log_probs = torch.tensor([[-0.5, -1.0, -2.0], [-0.1, -3.0, -9.0]], requires_grad=True)
    keep = torch.tensor([[True, True, True], [True, True, False]])
    reward = torch.tensor([-1.0, -2.0], requires_grad=True)
    entropy = torch.tensor([[1.0, 0.5, 0.2], [0.3, 0.1, 7.0]])
    b = -1.2
    want = -((-1.0 - b) * (-3.5) + (-2.0 - b) * (-3.1)) / 2
    got = variants.reinforce_surrogate(log_probs, keep, reward, b)
    assert float(got.detach()) == pytest.approx(want)
    bonus = variants.reinforce_surrogate(log_probs, keep, reward, torch.tensor(b), entropy=entropy, entropy_bonus=0.1)
    assert float(bonus.detach()) == pytest.approx(want - 0.1 * (1.0 + 0.5 + 0.2 + 0.3 + 0.1) / 5)
    bonus.backward()
    assert reward.grad is None  # the advantage is a constant
    torch.testing.assert_close(log_probs.grad, -torch.tensor([[0.2, 0.2, 0.2], [-0.8, -0.8, 0.0]]) / 2)
    with pytest.raises(ValueError, match="entropy_bonus > 0 needs the"):
        variants.reinforce_surrogate(log_probs, keep, reward, b, entropy_bonus=0.1)
    with pytest.raises(ValueError, match=r"keep must be a bool \(B, T\) = \(2, 3\)"):
        variants.reinforce_surrogate(log_probs, keep.float(), reward, b)
    with pytest.raises(ValueError, match=r"reward must be \(B=2,\)"):
        variants.reinforce_surrogate(log_probs, keep, reward[:1], b)


def _reinforce_reference(model, attn):
    """The Bahdanau decoder written out with the positions the model sampled (``attn``'s one-hots):
    per step the log-probability and entropy of the choice, and the logits."""
    memory = model.encode(SRC)
    states, mask = memory["states"], memory["mask"]
    s = torch.tanh(model.bridge(memory["summary"]))  # (B, H)
    picks = attn.argmax(-1)  # (B, T)
    log_probs, entropies, pres = [], [], []
    for t in range(TGT_IN.size(1)):
        scores = model.score(s, states, memory["prepared"]).masked_fill(~mask, float("-inf"))  # (B, S)
        logp = torch.log_softmax(scores, -1)
        log_probs.append(logp.gather(1, picks[:, t : t + 1]).squeeze(1))
        entropies.append(-(logp.exp() * logp.masked_fill(~mask, 0.0)).sum(-1))
        context = states[torch.arange(2), picks[:, t]]  # (B, H): the state of the sampled position
        emb = model.tgt_emb(TGT_IN[:, t])
        s = model._cell(torch.cat([emb, context], -1), s)
        pres.append(torch.cat([s, context, emb], -1))
    logits = model.out(torch.stack(pres, 1))
    return torch.stack(log_probs, 1), torch.stack(entropies, 1), logits


def test_reinforce_training_matches_the_estimator_written_out_and_moves_the_baseline():
    """aux_loss has the gradient of -(r - b) sum_t log p(a_t) - lambda H (mean over the batch, the real
    steps), and the value of the entropy term alone: the policy-gradient value says nothing."""
    model = tiny(hard="reinforce", entropy_bonus=0.1).train()
    assert torch.isnan(model.reward_baseline) and "reward_baseline" not in model.state_dict()
    params = [p for n, p in model.named_parameters() if n.startswith("score")]
    keep = TGT_IN != 0
    targets = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])  # tgt_in shifted, <eos> after the last token
    baseline = None
    for call in range(2):
        torch.manual_seed(10 + call)
        logits, attn = model(SRC, TGT_IN, return_attention=True)
        assert set(attn.unique().tolist()) == {0.0, 1.0} and not attn.requires_grad
        log_probs, entropy, ref_logits = _reinforce_reference(model, attn)
        torch.testing.assert_close(logits, ref_logits)
        logp = torch.log_softmax(ref_logits.detach(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        reward = (logp * keep).sum(1) / keep.sum(1)  # (B,) mean gold-token log-likelihood
        b = reward.mean() if baseline is None else baseline  # the first batch is its own baseline
        entropy_term = -0.1 * (entropy * keep).sum() / keep.sum()
        want = -((reward - b) * (log_probs * keep).sum(1)).mean() + entropy_term
        torch.testing.assert_close(model.aux_loss, entropy_term)
        got_grads = torch.autograd.grad(model.aux_loss, params)
        want_grads = torch.autograd.grad(want, params)
        for got, wanted in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(got, wanted)
        assert any(g.abs().sum() > 0 for g in got_grads)
        baseline = 0.9 * b + 0.1 * reward.mean()
        torch.testing.assert_close(model.reward_baseline, baseline)
    plain = tiny(hard="reinforce").train()
    plain(SRC, TGT_IN)
    assert float(plain.aux_loss.detach()) == 0.0 and plain.aux_loss.requires_grad


def test_reinforce_with_a_learned_baseline_credits_each_step_with_its_reward_to_go():
    """reinforce_baseline="learned": aux_loss has the gradient of -(1/B) sum_{b,t} (G_t - b_t) log p(a_t)
    - lambda mean H + mean (b_t - G_t)^2, G_t the mean log-likelihood of the tokens from t on (per
    sentence length), b_t the head's prediction from the query state; its value is the entropy term."""
    model = tiny(hard="reinforce", entropy_bonus=0.1, reinforce_baseline="learned").train()
    assert "baseline_head.weight" in model.state_dict()
    keep = TGT_IN != 0
    targets = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])  # tgt_in shifted, <eos> after the last token
    torch.manual_seed(10)
    logits, attn = model(SRC, TGT_IN, return_attention=True)
    log_probs, entropy, ref_logits = _reinforce_reference(model, attn)
    logp = torch.log_softmax(ref_logits.detach(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1) * keep
    n = keep.sum(1, keepdim=True).float()  # (B, 1)
    to_go = torch.stack([logp[:, t:].sum(1) for t in range(4)], 1) / n  # (B, T)
    assert torch.allclose(to_go[:, 0], (logp.sum(1) / n.squeeze(1)))  # G_0 is the sentence reward
    # the queries: the decoder states before each step, written out as _reinforce_reference runs them
    memory = model.encode(SRC)
    s = torch.tanh(model.bridge(memory["summary"]))
    queries = []
    for t in range(4):
        queries.append(s)
        context = memory["states"][torch.arange(2), attn[:, t].argmax(-1)]
        s = model._cell(torch.cat([model.tgt_emb(TGT_IN[:, t]), context], -1), s)
    share = ((n - torch.arange(4).float()) / n).clamp_min(0)  # (B, T)
    feats = torch.cat([torch.stack(queries, 1).detach(), share.unsqueeze(-1)], -1)  # (B, T, H + 1)
    b = model.baseline_head(feats).squeeze(-1)  # (B, T)
    entropy_term = -0.1 * (entropy * keep).sum() / keep.sum()
    want = -(((to_go - b).detach() * log_probs * keep).sum()) / 2 + entropy_term + ((b - to_go) ** 2 * keep).sum() / keep.sum()
    (head_grad,) = torch.autograd.grad(model.aux_loss, model.baseline_head.weight, retain_graph=True)
    assert float(head_grad.abs().sum()) > 0  # the baseline is fitted, not fixed
    torch.testing.assert_close(model.aux_loss, entropy_term)
    params = [p for n_, p in model.named_parameters() if n_.startswith(("score", "baseline_head"))]
    for got, wanted in zip(torch.autograd.grad(model.aux_loss, params), torch.autograd.grad(want, params), strict=True):
        torch.testing.assert_close(got, wanted)


def test_reinforce_mix_reads_soft_contexts_on_some_steps_and_leaves_them_out_of_the_surrogate():
    """Xu et al.'s trick: a mixed step's weights are the softmax (with its gradient), a sampled step's a
    one-hot; the surrogate sums the log-probabilities of the sampled steps only."""
    model = tiny(hard="reinforce", reinforce_mix=0.5).train()
    seen = []
    original = model._special_weights

    def spy(scores, mask, prev, query):  # record each step's softmax and the model's (log_prob, entropy, sampled)
        out = original(scores, mask, prev, query)
        seen.append((torch.softmax(scores.masked_fill(~mask, float("-inf")), -1), *model._policy[-1][:3]))
        return out

    model._special_weights = spy
    torch.manual_seed(3)
    logits, attn = model(SRC, TGT_IN, return_attention=True)
    soft = torch.stack([w for w, _, _, _ in seen], 1)  # (B, T, S)
    log_probs = torch.stack([lp for _, lp, _, _ in seen], 1)  # (B, T)
    sampled = torch.stack([s for _, _, _, s in seen], 1)  # (B, T)
    keep = TGT_IN != 0
    assert (keep & sampled).any() and (keep & ~sampled).any()  # both kinds happen at p = 0.5 (seeded)
    torch.testing.assert_close(attn[~sampled], soft[~sampled])  # mixed steps: the expected context's weights
    hard_rows = attn[sampled]
    assert set(hard_rows.unique().tolist()) == {0.0, 1.0} and (hard_rows.sum(-1) == 1).all()
    assert attn.requires_grad  # the soft steps carry the scores' gradient
    targets = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
    logp = torch.log_softmax(logits.detach(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    reward = (logp * keep).sum(1) / keep.sum(1)  # (B,)
    want = -((reward - reward.mean()) * (log_probs * (keep & sampled)).sum(1)).mean()
    params = [p for n, p in model.named_parameters() if n.startswith("score")]
    got_grads = torch.autograd.grad(model.aux_loss, params, retain_graph=True)
    want_grads = torch.autograd.grad(want, params)
    for got, wanted in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(got, wanted)
    plain = tiny(hard="reinforce").train()  # without the mix every step samples (and draws no extra numbers)
    torch.manual_seed(3)
    _, again = plain(SRC, TGT_IN, return_attention=True)
    assert set(again.unique().tolist()) == {0.0, 1.0}


def test_reinforce_gradients_reach_the_scores_only_through_the_surrogate():
    model = tiny(hard="reinforce").train()
    torch.manual_seed(0)
    logits = model(SRC, TGT_IN)
    score_params = [p for n, p in model.named_parameters() if n.startswith("score")]
    assert score_params
    logits.logsumexp(-1).mean().backward(retain_graph=True)  # any loss of the outputs
    assert all(p.grad is None for p in score_params)
    assert model.decoder.weight_ih_l0.grad is not None
    model.aux_loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in score_params)


def test_reinforce_eval_takes_the_argmax_and_leaves_no_loss():
    model = tiny(hard="reinforce").eval()
    with torch.no_grad():
        _, attn = model(SRC, TGT_IN, return_attention=True)
        _, again = model(SRC, TGT_IN, return_attention=True)
    assert torch.equal(attn, again) and set(attn.unique().tolist()) == {0.0, 1.0}
    assert model.aux_loss is None and torch.isnan(model.reward_baseline)  # eval leaves the baseline alone
    memory = model.encode(SRC)
    state = model.init_state(memory)
    scores = model.score(state[0], memory["states"], memory["prepared"]).masked_fill(~memory["mask"], float("-inf"))
    assert torch.equal(attn[:, 0].argmax(-1), scores.argmax(-1))
    model.train()
    _, state, _ = model.step(memory, state, TGT_IN[:, 0], 0)  # sampling outside decode records nothing
    assert model._policy is None


# ----------------------------------------------------------------- Gumbel temperature annealing
def test_annealed_temperature_starts_ends_and_is_geometric_in_between():
    assert variants.annealed_temperature(0, 101, start=1.0, final=0.25) == pytest.approx(1.0)
    assert variants.annealed_temperature(50, 101, start=1.0, final=0.25) == pytest.approx(0.5)
    assert variants.annealed_temperature(100, 101, start=1.0, final=0.25) == pytest.approx(0.25)
    assert variants.annealed_temperature(150, 101, start=1.0, final=0.25) == 0.25  # clamped at the floor
    taus = [variants.annealed_temperature(k, 11, start=2.0, final=0.5) for k in range(11)]
    ratios = [b / a for a, b in itertools.pairwise(taus)]
    assert ratios == pytest.approx([0.25**0.1] * 10)  # tau_0 exp(-r k): one factor per step
    assert variants.annealed_temperature(0.5, 2, start=1.0, final=0.25) == pytest.approx(0.5)  # a time share
    assert variants.annealed_temperature(0, 1, start=1.0, final=0.5) == 1.0
    with pytest.raises(ValueError, match="final must be <= start"):
        variants.annealed_temperature(0, 10, start=0.5, final=1.0)
    with pytest.raises(ValueError, match="step must be >= 0"):
        variants.annealed_temperature(-1, 10, start=1.0, final=0.5)
    with pytest.raises(ValueError, match="total must be >= 1"):
        variants.annealed_temperature(0, 0, start=1.0, final=0.5)


def test_the_model_reads_its_temperature_from_the_attribute_and_checkpoints_ignore_it(tmp_path):
    model = tiny(hard="gumbel", temperature=1.0, temperature_final=0.2).train()
    assert model.temperature == 1.0
    outs = {}
    for tau in (1.0, 0.2):
        model.temperature = tau
        torch.manual_seed(0)
        logits = model(SRC, TGT_IN)
        (grad,) = torch.autograd.grad(logits.sum(), model.score.v.weight)
        outs[tau] = grad
    assert not torch.allclose(outs[1.0], outs[0.2])  # the straight-through gradient follows the temperature
    src_vocab, tgt_vocab = _toy_vocabs()
    save_checkpoint(model, tmp_path / "m", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    loaded, _ = load_checkpoint(tmp_path / "m")
    assert loaded.temperature == 1.0 and set(loaded.state_dict()) == set(tiny(hard="gumbel").state_dict())


# ----------------------------------------------------------------- lesson 07: under-translation, See's phase, floor
def undertranslation_reference(attn, src_keep, tgt_keep):
    total, steps = 0.0, int(tgt_keep.sum())
    for b in range(attn.shape[0]):
        for j in range(attn.shape[2]):
            if src_keep[b, j]:
                got = sum(float(attn[b, t, j]) for t in range(attn.shape[1]) if tgt_keep[b, t])
                total += (1 - got) ** 2
    return total / steps


@pytest.mark.numeric
def test_undertranslation_loss_matches_the_loop_and_ignores_padding():
    g = torch.Generator().manual_seed(5)
    attn = torch.softmax(torch.randn(3, 6, 5, generator=g), -1)  # (B, T, S)
    src_keep = torch.ones(3, 5, dtype=torch.bool)
    src_keep[2, 3:] = False
    tgt_keep = torch.ones(3, 6, dtype=torch.bool)
    tgt_keep[1, 4:] = False
    got = float(variants.undertranslation_loss(attn, src_keep, tgt_keep))
    assert got == pytest.approx(undertranslation_reference(attn, src_keep, tgt_keep), abs=1e-6)
    noisy = attn.clone()
    noisy[1, 4:] = 9.0  # padded steps
    assert float(variants.undertranslation_loss(noisy, src_keep, tgt_keep)) == pytest.approx(got, abs=1e-6)


def test_undertranslation_loss_is_zero_for_one_unit_per_word_and_charges_a_drop_that_see_misses():
    once = torch.eye(3).unsqueeze(0)  # (1, 3, 3): every word read once
    keep = torch.ones(1, 3, dtype=torch.bool)
    assert float(variants.undertranslation_loss(once, keep)) == 0.0
    split = torch.tensor([[[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1.0]]])  # words 0, 1 read by two steps: sums 1
    assert float(variants.undertranslation_loss(split, keep)) == 0.0
    assert float(variants.coverage_loss(split)) == pytest.approx(1 / 3)  # See et al. charge the split
    dropped = torch.tensor([[[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]]])  # word 2 never read, word 0 twice
    assert float(variants.undertranslation_loss(dropped, keep)) == pytest.approx(2 / 3)  # (1-2)^2 + (1-0)^2
    assert float(variants.coverage_loss(dropped)) == pytest.approx(1 / 3)  # only the repeat
    with pytest.raises(ValueError, match=r"src_keep must be a bool \(B, S\)"):
        variants.undertranslation_loss(once, torch.ones(1, 4, dtype=torch.bool))


def test_coverage_loss_charges_attention_split_over_steps_even_when_no_word_gets_more_than_one_unit():
    # the loss is min(a, C): it is zero only when no word is attended at two steps, not when sums stay <= 1
    g = torch.Generator().manual_seed(6)
    for _ in range(20):
        attn = torch.softmax(torch.randn(1, 4, 6, generator=g), -1) / 4  # (1, T, S) column sums <= 1
        assert bool((attn.sum(1) <= 1).all()) and float(variants.coverage_loss(attn)) > 0
    perm = torch.eye(5)[torch.randperm(5, generator=g)].unsqueeze(0)  # disjoint one-hot steps
    assert float(variants.coverage_loss(perm)) == 0.0


def test_fertility_floor_bounds_phi_and_is_checked():
    model = tiny(coverage=True, fertility=2, fertility_floor=0.5).eval()
    with torch.no_grad():
        model.fertility_proj.weight.fill_(-50.0)  # sigmoid -> 0: Tu et al.'s Phi would be 0
        phi = model.predicted_fertility(model.encode(SRC))
        assert float(phi.min()) >= 0.5 and float(phi.max()) <= 2.0
        plain = tiny(coverage=True, fertility=2).eval()
        plain.fertility_proj.weight.fill_(-50.0)
        assert float(plain.predicted_fertility(plain.encode(SRC)).min()) < 1e-3
    for bad in (2.0, 3.0, -0.1):
        with pytest.raises(ValueError, match="fertility_floor"):
            tiny(coverage=True, fertility=2, fertility_floor=bad)
    with pytest.raises(ValueError, match="fertility_floor"):
        tiny(coverage=True, fertility_floor=0.5)


def test_coverage_from_starts_with_w_c_zero_and_is_off_until_the_phase():
    model = tiny(coverage=True, coverage_loss=1.0, coverage_loss_from=0.8)
    assert float(model.coverage_proj.weight.abs().sum()) == 0.0 and model.coverage_phase
    model.train()
    model.coverage_phase = False
    model(SRC, TGT_IN)
    assert model.aux_loss is None  # no coverage loss before the phase
    model.coverage_phase = True
    model(SRC, TGT_IN)
    assert model.aux_loss is not None and float(model.aux_loss.detach()) > 0
    with pytest.raises(ValueError, match="coverage_loss_from"):
        tiny(coverage=True, coverage_loss_from=0.5)  # no loss to delay
    with pytest.raises(ValueError, match="coverage_loss_from"):
        tiny(coverage=True, coverage_loss=1.0, coverage_loss_from=1.0)


def test_coverage_phase_off_is_the_model_without_the_coverage_term():
    model = tiny(coverage=True, coverage_loss=1.0, coverage_loss_from=0.5).eval()
    with torch.no_grad():
        model.coverage_proj.weight.fill_(3.0)
        on = model(SRC, TGT_IN)
        model.coverage_phase = False
        off = model(SRC, TGT_IN)
        model.coverage_proj.weight.zero_()
        zero = model(SRC, TGT_IN)
    assert not torch.allclose(on, off)
    torch.testing.assert_close(off, zero, atol=0, rtol=0)


def test_gold_fertility_counts_sure_links_and_optionally_the_possible_ones():
    pair = Pair(
        src=("every", "bird", "sings", "."),
        tgt=("모든", "새", "가", "노래한다", "."),
        align=((0,), (1,), (), (2,), (3,)),
        possible=((), (), (1,), (), ()),
    )
    assert gold.gold_fertility(pair) == [1, 1, 1, 1]
    assert gold.gold_fertility(pair, possible=True) == [1, 2, 1, 1]  # the particle 가 goes with 새 (bird)
    fr = Pair(src=("next", "to", "it"), tgt=("à", "côté", "de", "lui"), align=((0, 1), (0, 1), (0, 1), (2,)))
    assert gold.gold_fertility(fr) == gold.gold_fertility(fr, possible=True) == [3, 3, 1]
