"""The ``gpu`` profile without a GPU: every gpu preset is built, sized and trained a few steps on the CPU.

No CI machine has a GPU, so this file is what keeps the gpu profile from rotting between GPU runs
(scripts/gpu_check.sh, scripts/GPU.md): each preset's model is built with the course corpus's real
vocabularies, its parameter count is checked against a count derived here from the architecture
(not from the module), :func:`attnlab.training.estimate.estimate` is checked against a direct measurement,
and a few optimiser steps go through the course's training path (``fit_budget``, fastai) with the
preset's own learning rate, weight decay and label smoothing, on a tiny batch of short sentences.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from attnlab.core import profiles
from attnlab.core.profiles import ProfileWarning, get_device, get_profile
from attnlab.data.corpus import Splits, load_splits
from attnlab.data.loaders import collate, encode_pairs, make_dataloaders
from attnlab.data.vocab import build_vocabs
from attnlab.models.losses import masked_cross_entropy
from attnlab.training import estimate as estimate_module
from attnlab.training import experiments
from attnlab.training.estimate import estimate
from attnlab.training.evaluate import count_params
from attnlab.training.train import fit_budget, set_seed

NAMES = sorted(experiments.EXPERIMENTS)
STEPS = 3
BS = 4


@pytest.fixture(scope="module")
def corpus_fr():
    """The course's English->French splits and vocabularies (cached under data/corpus)."""
    splits = load_splits(target="fr")
    return (splits, *build_vocabs(splits))


@pytest.fixture
def warn_again(monkeypatch):
    """Forget that the no-CUDA warning was given, and pretend that there is no CUDA device."""
    monkeypatch.setattr(profiles, "_warned_no_cuda", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


# ----------------------------------------------------------------- the profile without a GPU


def test_forced_gpu_profile_without_cuda_warns_once_and_runs_on_cpu(monkeypatch, warn_again):
    monkeypatch.setenv(profiles.ENV_VAR, "gpu")
    with pytest.warns(ProfileWarning, match=r"ATTNLAB_PROFILE=gpu but PyTorch sees no CUDA device.*on the CPU"):
        assert get_profile() == "gpu"
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        assert get_profile() == "gpu"
        assert get_device() == torch.device("cpu")
        assert get_device("gpu") == torch.device("cpu")
    assert not [w for w in later if issubclass(w.category, ProfileWarning)], "warned twice in one process"


def test_gpu_device_asked_for_without_cuda_warns(warn_again):
    with pytest.warns(ProfileWarning, match="no CUDA device"):
        assert get_device("gpu") == torch.device("cpu")


def test_cpu_profile_does_not_warn(monkeypatch, warn_again):
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfileWarning)
        assert get_profile() == "cpu" and get_device() == torch.device("cpu")


def test_get_device_rejects_an_unknown_profile():
    with pytest.raises(ValueError, match=r"profile must be one of \('cpu', 'gpu'\), got 'cuda'"):
        get_device("cuda")


# ----------------------------------------------------------------- parameter counts, derived independently


def _gru(inp: int, hid: int) -> int:
    return 3 * hid * (inp + hid) + 2 * 3 * hid  # weight_ih, weight_hh, bias_ih, bias_hh (gates r, z, n)


def _linear(inp: int, out: int, bias: bool = True) -> int:
    return inp * out + (out if bias else 0)


def rnn_params(m: dict, vs: int, vt: int) -> int:
    """Seq2SeqRNN's size from its description (rnn.py's module docstring), not from its modules."""
    E, H = m["emb_dim"], m["hid_dim"]
    A = m.get("attn_dim") or H
    attention, score = m.get("attention"), m.get("score", "concat")
    n = vs * E + 2 * _gru(E, H // 2)  # source embedding, bidirectional encoder of H/2 per direction
    n += _linear(H, H) + vt * E  # bridge to the first decoder state, target embedding
    feeds_context = attention != "luong" or m.get("input_feeding", True)
    n += _gru(E + (H if feeds_context else 0), H)
    if attention is not None:
        n += {
            "dot": 0,
            "scaled_dot": 0,
            "general": H * H,
            "concat": _linear(H, A, bias=False) + _linear(H, A) + A,
            "location": _linear(H, m.get("max_src_len", 64)),
        }[score]
    if attention == "luong":
        n += _linear(2 * H, H, bias=False) + _linear(H, vt)  # W_c, then the softmax layer W_s
        if m.get("local") == "p":
            n += _linear(H, H, bias=False) + H  # W_p and v_p of the predicted position
    else:
        n += _linear(2 * H + E, vt)  # deep output from [s_t; c_t; E y_{t-1}]
    n += A if m.get("coverage") else 0
    n += H if m.get("fertility") else 0  # u_f of the predicted fertility N sigmoid(u_f^T h_j)
    n += 8 * m["prev_conv"] + 8 * A if m.get("prev_conv") else 0  # 8 filters, then U_f
    n += _linear(H + 1, 1) if m.get("reinforce_baseline") == "learned" else 0  # REINFORCE's learned baseline
    return n + (1 if m.get("monotonic") else 0)


def transformer_params(m: dict, vs: int, vt: int) -> int:
    """The Transformer's size from the architecture of Vaswani et al. (2017) with pre-LN and GQA."""
    E, F, H = m["d_model"], m["dim_feedforward"], m["num_heads"]
    kv = (m.get("num_kv_heads") or H) * (E // H)  # width of the key and value projections
    mha = 2 * _linear(E, E) + 2 * _linear(E, kv)
    ff, norm = _linear(E, F) + _linear(F, E), 2 * E
    encoder = m["num_encoder_layers"] * (mha + ff + 2 * norm)
    decoder = m["num_decoder_layers"] * (2 * mha + ff + 3 * norm)
    n = encoder + decoder + (2 * norm if m.get("norm_first", True) else 0) + (vs + vt) * E
    n += 2 * m.get("max_len", 128) * E if m.get("positions") == "learned" else 0
    return n + (vt if m.get("tie_embeddings") else _linear(E, vt))


def agreement_params(m: dict, vs: int, vt: int) -> int:
    """Two Seq2SeqRNN of one size, English->X and X->English (the vocabularies swapped)."""
    return rnn_params(m, vs, vt) + rnn_params(m, vt, vs)


def decoder_only_params(m: dict, vs: int, vt: int) -> int:
    """Lesson 11's prefix LM: one stack of N pre-LN self-attention layers over ``source <sep> target``."""
    E, F = m["d_model"], m["dim_feedforward"]
    mha, ff, norm = 4 * _linear(E, E), _linear(E, F) + _linear(F, E), 2 * E
    n = m["num_layers"] * (mha + ff + 2 * norm) + (norm if m.get("norm_first", True) else 0) + (vs + vt) * E
    n += m.get("max_len", 160) * E if m.get("positions") == "learned" else 0
    return n + _linear(E, vt)


EXPECTED = {"rnn": rnn_params, "transformer": transformer_params, "agreement": agreement_params,
            "decoder_only": decoder_only_params}


def test_the_independent_counts_see_a_change_of_size(corpus_fr):
    # A count that ignored the config would pass the test above for one size only.
    _, src_vocab, tgt_vocab = corpus_fr
    for name in ("bahdanau", "transformer"):
        exp = experiments.preset(name, "gpu")
        width = "hid_dim" if exp.family == "rnn" else "dim_feedforward"
        wider = {**exp.model, width: exp.model[width] + 64}
        model = experiments.models.build_model(
            exp.family, {"src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), **wider}
        )
        assert count_params(model) == EXPECTED[exp.family](wider, len(src_vocab), len(tgt_vocab))
        assert count_params(model) != EXPECTED[exp.family](exp.model, len(src_vocab), len(tgt_vocab))


# ----------------------------------------------------------------- the memory estimate


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_the_lesson_models_fit_a_small_gpu_at_full_length(name, corpus_fr):
    # The worst batch the course corpus holds (40-token sources, 54-token targets) at the preset's
    # batch size: the training state of the two lesson models stays far below a 16 GB card.
    _, src_vocab, tgt_vocab = corpus_fr
    exp = experiments.preset(name, "gpu")
    e = estimate(exp, exp.bs, vocab_sizes=(len(src_vocab), len(tgt_vocab)))
    assert (e["src_len"], e["tgt_len"]) == (41, 55)
    assert 2**20 < e["total_bytes_estimate"] < 4 * 2**30, e


def test_estimate_of_an_experiment_builds_its_model(corpus_fr):
    _, src_vocab, tgt_vocab = corpus_fr
    exp = experiments.preset("bahdanau", "gpu")
    set_seed(0)
    model = experiments.build_model(exp, src_vocab, tgt_vocab)
    by_exp = estimate(exp, 16, vocab_sizes=(len(src_vocab), len(tgt_vocab)), src_len=7, tgt_len=8)
    assert by_exp == estimate(model, 16, src_len=7, tgt_len=8)


def test_estimate_rejects_bad_arguments():
    exp = experiments.preset("bahdanau", "gpu")
    with pytest.raises(ValueError, match="needs vocab_sizes"):
        estimate(exp, 8)
    with pytest.raises(ValueError, match=r"vocab_sizes must be \(source, target\)"):
        estimate(exp, 8, vocab_sizes=(10,))
    with pytest.raises(ValueError, match="bs"):
        estimate(exp, 0, vocab_sizes=(10, 10))
    with pytest.raises(TypeError, match="nn.Module or an Experiment"):
        estimate({"d_model": 8}, 8)
    with pytest.raises(TypeError, match="src_vocab_size and tgt_vocab_size"):
        estimate(torch.nn.Linear(2, 2), 8)


def test_estimate_leaves_the_random_state_and_the_mode_alone(corpus_fr):
    _, src_vocab, tgt_vocab = corpus_fr
    model = experiments.build_model(experiments.preset("transformer", "gpu"), src_vocab, tgt_vocab).eval()
    torch.manual_seed(123)
    estimate(model, 2, src_len=5, tgt_len=5)  # the gpu Transformer has dropout: training mode draws numbers
    drawn = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(drawn, torch.rand(1)) and not model.training


# ----------------------------------------------------------------- every gpu preset: size, memory, a few steps


def _tiny_training(model, exp, splits, src_vocab, tgt_vocab, device) -> tuple[float, float, list[float]]:
    """``STEPS`` optimiser steps through the course's training path on ``2 * BS`` short training pairs.

    Returns the loss on the first batch (eval mode) before and after, and the training losses.
    """
    short = [p for p in splits.train if len(p.src) <= 6][: 2 * BS]
    tiny = Splits(train=short, valid=short[:BS], test=short[:BS])
    supervised = exp.model.get("align_loss", 0) > 0  # as experiments.run: these batches carry gold links
    dls = make_dataloaders(tiny, src_vocab, tgt_vocab, bs=BS, device=device, alignments=supervised)
    src, tgt_in, tgt_out = (t.to(device) for t in collate(encode_pairs(short[:BS], src_vocab, tgt_vocab)))

    def loss() -> float:
        model.eval()
        with torch.no_grad():
            return float(masked_cross_entropy(model(src, tgt_in), tgt_out))

    before = loss()
    model.train()
    learn, stats = fit_budget(
        model, dls, steps=STEPS, lr=exp.lr, wd=exp.wd, label_smoothing=exp.label_smoothing, progress=False
    )
    assert stats.steps == STEPS
    if supervised:  # the gold attention reached the model: its alignment loss was computed
        assert model.aux_loss is not None and torch.isfinite(model.aux_loss)
    return before, loss(), [float(x) for x in learn.recorder.losses]


@pytest.mark.parametrize("name", NAMES)
def test_gpu_preset_builds_is_sized_and_trains(name, corpus_fr):
    """One test per preset (one model built): its size, its memory estimate, then STEPS optimiser steps."""
    splits, src_vocab, tgt_vocab = corpus_fr
    exp = experiments.preset(name, "gpu")
    sizes = (len(src_vocab), len(tgt_vocab))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfileWarning)  # CI has no CUDA: the gpu profile runs on the CPU here
        device = get_device("gpu")
    set_seed(0)
    model = experiments.build_model(exp, src_vocab, tgt_vocab).to(device)

    # 1. the size: the count derived from the architecture, and larger than the cpu preset's model
    expected = EXPECTED[exp.family](exp.model, *sizes)
    assert count_params(model) == expected == sum(p.numel() for p in model.parameters())
    small = experiments.build_model(experiments.preset(name, "cpu"), src_vocab, tgt_vocab)
    assert count_params(model) > 4 * count_params(small), "the gpu preset should be the larger model"

    # 2. the memory estimate (short sentences keep the measurement cheap; full length: the test below)
    e = estimate(model, exp.bs, src_len=9, tgt_len=11)
    assert e["params"] == expected
    assert e["param_bytes"] == e["grad_bytes"] == 4 * expected and e["optimizer_bytes"] == 8 * expected
    assert e["total_bytes_estimate"] == 16 * expected + e["activation_bytes_estimate"]
    # the extension from batches of 2 and 3 to bs is exact: a direct measurement at 5 agrees to the byte
    assert estimate(model, 5, src_len=9, tgt_len=11)["activation_bytes_estimate"] == estimate_module._saved_bytes(
        model, 5, 9, 11
    )
    # per sentence, at least the logits and their log-softmax are kept for the backward pass
    assert e["activation_bytes_per_sentence"] >= 2 * 4 * 11 * len(tgt_vocab)

    # 3. a few optimiser steps with the preset's lr, weight decay and label smoothing
    before, after, losses = _tiny_training(model, exp, splits, src_vocab, tgt_vocab, device)
    assert all(math.isfinite(x) for x in losses), losses
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert math.isfinite(before) and math.isfinite(after)
    assert after < before, f"{name}: loss {before:.4f} -> {after:.4f} after {STEPS} steps on the batch it trained on"
