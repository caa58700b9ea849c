"""Agreement-trained attention (Cohn et al. 2016): the two directions, their batches, the trace term, evaluation."""

import dataclasses
import functools

import pytest
import torch

from attnlab.data.corpus.splits import Pair, Splits, generate_pairs
from attnlab.data.loaders import collate, encode_pairs, make_dataloaders
from attnlab.data.vocab import BOS, EOS, PAD, build_vocabs
from attnlab.models import agreement as ag
from attnlab.models.decoding import beam_search
from attnlab.models.losses import masked_cross_entropy
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.training import evaluate, experiments
from attnlab.training import families as models
from attnlab.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from attnlab.training.evaluate import evaluate_model


@functools.cache
def _corpus(target: str, n: int = 240):
    """Generated English->``target`` pairs (all four length buckets) and their vocabularies."""
    pairs = generate_pairs(n, seed=7, target=target)
    return pairs, *build_vocabs(pairs)


def _tiny(target="fr", agreement=1.0, seed=0, **fields):
    pairs, sv, tv = _corpus(target)
    torch.manual_seed(seed)
    config = ag.AgreementConfig(len(sv), len(tv), agreement=agreement, emb_dim=8, hid_dim=12, attn_dim=6, **fields)
    return ag.AgreementPair(config), pairs, sv, tv


# --------------------------------------------------------------------------- the backward batch
@pytest.mark.parametrize("target", ["fr", "ko"])
def test_the_backward_batch_is_built_from_the_forward_one(target):
    pairs, sv, tv = _corpus(target)
    splits = Splits(train=pairs[:200], valid=pairs[200:], test=[])
    dls = make_dataloaders(splits, sv, tv, bs=16, device="cpu", seed=3)
    batches = 0
    for _, tgt_in, tgt_out in dls.train:  # the loaders' real batches
        assert torch.equal(ag.outputs_from_inputs(tgt_in), tgt_out)
        assert torch.equal(ag.inputs_from_outputs(tgt_out), tgt_in)
        batches += 1
    assert batches == 13
    # Derived from the forward batch, the backward batch is what the loaders give for the reversed pairs.
    fwd = collate(encode_pairs(pairs[:9], sv, tv))
    bwd = collate(encode_pairs(ag.reverse_pairs(pairs[:9]), tv, sv))
    src, tgt_in, tgt_out = fwd
    assert torch.equal(ag.outputs_from_inputs(tgt_in), bwd[0])  # backward source = X + <eos>
    assert torch.equal(ag.inputs_from_outputs(src), bwd[1])  # backward decoder input = <bos> + English
    assert torch.equal(src, bwd[2])  # backward target = English + <eos> = the forward source


def test_framing_errors_name_the_argument():
    good_in = torch.tensor([[BOS, 5, 6], [BOS, 7, PAD]])
    assert ag.outputs_from_inputs(good_in).tolist() == [[5, 6, EOS], [7, EOS, PAD]]
    with pytest.raises(ValueError, match=r"tgt_in row 1 must start with id 1"):
        ag.outputs_from_inputs(torch.tensor([[BOS, 5], [5, 6]]))
    with pytest.raises(ValueError, match=r"tgt_in row 0 has <bos> or <eos> among its tokens"):
        ag.outputs_from_inputs(torch.tensor([[BOS, 5, EOS]]))
    with pytest.raises(ValueError, match=r"tgt_in row 0 has padding \(id 0\) before a real token"):
        ag.outputs_from_inputs(torch.tensor([[BOS, PAD, 5]]))
    with pytest.raises(TypeError, match="tgt_in must hold integer token ids"):
        ag.outputs_from_inputs(torch.tensor([[1.0, 5.0]]))
    with pytest.raises(ValueError, match=r"tgt_out row 1 must end with id 2 before its padding"):
        ag.inputs_from_outputs(torch.tensor([[5, EOS], [5, PAD]]))
    with pytest.raises(ValueError, match=r"tgt_out row 0 has <bos> or <eos> among its tokens"):
        ag.inputs_from_outputs(torch.tensor([[EOS, 5, EOS]]))
    # through the model in training: the backward direction needs both framings
    model, *_ = _tiny()
    model.train()
    with pytest.raises(ValueError, match=r"src row 0 must end with id 2 before its padding, got \[5, 6, 0\]"):
        model(torch.tensor([[5, 6, PAD]]), torch.tensor([[BOS, 5]]))
    with pytest.raises(ValueError, match=r"tgt_in row 0 must start with id 1, got \[5, 6\]"):
        model(torch.tensor([[5, EOS]]), torch.tensor([[5, 6]]))


# --------------------------------------------------------------------------- the agreement term
def _loop_agreement(attn_fwd, attn_bwd, n_src, n_tgt):
    """Hand-written reference: 1 - sum_b sum_{t<n_tgt[b], j<n_src[b]} A_f[b,t,j] A_b[b,j,t] / sum_b n_tgt[b]."""
    total = 0.0
    for b in range(attn_fwd.shape[0]):
        for t in range(n_tgt[b]):
            for j in range(n_src[b]):
                total += float(attn_fwd[b, t, j]) * float(attn_bwd[b, j, t])
    return 1.0 - total / sum(n_tgt)


def test_agreement_loss_matches_a_loop_on_a_padded_batch():
    torch.manual_seed(1)
    n_src, n_tgt = [4, 2], [3, 5]  # English / X positions incl. <eos>; batch widths S = 4, T = 5
    S, T = max(n_src), max(n_tgt)
    attn_fwd = torch.rand(2, T, S).softmax(-1)  # (B, T, S)
    attn_bwd = torch.rand(2, S, T).softmax(-1)  # (B, S, T)
    src_keep = torch.arange(S) < torch.tensor(n_src).unsqueeze(1)  # (B, S)
    tgt_keep = torch.arange(T) < torch.tensor(n_tgt).unsqueeze(1)  # (B, T)
    loss = ag.agreement_loss(attn_fwd, attn_bwd, src_keep, tgt_keep)
    torch.testing.assert_close(loss, torch.tensor(_loop_agreement(attn_fwd, attn_bwd, n_src, n_tgt)))
    # whatever the padded positions hold (here NaN) counts nowhere
    dirty_f, dirty_b = attn_fwd.clone(), attn_bwd.clone()
    dirty_f[0, 3:] = float("nan")
    dirty_f[1, :, 2:] = float("nan")
    dirty_b[1, 2:] = float("nan")
    dirty_b[0, :, 3:] = float("nan")
    torch.testing.assert_close(ag.agreement_loss(dirty_f, dirty_b, src_keep, tgt_keep), loss)
    # two hard maps that are each other's transpose agree perfectly; a mismatched pair does not
    perm = torch.eye(3)[[2, 0, 1]].unsqueeze(0)  # (1, 3, 3)
    keep = torch.ones(1, 3, dtype=torch.bool)  # (1, 3)
    assert float(ag.agreement_loss(perm, perm.transpose(1, 2), keep, keep)) == 0.0
    assert float(ag.agreement_loss(perm, perm, keep, keep)) == 1.0


def test_agreement_loss_refuses_wrong_maps_and_masks():
    f, b = torch.rand(2, 5, 4), torch.rand(2, 4, 5)  # (B, T, S), (B, S, T)
    sk, tk = torch.ones(2, 4, dtype=torch.bool), torch.ones(2, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"attn_bwd must be \(B, S, T\) = \(2, 4, 5\) .* got shape \(2, 5, 4\)"):
        ag.agreement_loss(f, b.transpose(1, 2), sk, tk)
    with pytest.raises(ValueError, match=r"attn_bwd must be \(B, S, T\) = \(2, 4, 5\)"):
        ag.agreement_loss(f, b[:1], sk, tk)
    with pytest.raises(ValueError, match=r"attn_fwd must be \(B, T, S\), got shape \(5, 4\)"):
        ag.agreement_loss(f[0], b, sk, tk)
    with pytest.raises(TypeError, match="attn_bwd must be a floating-point tensor"):
        ag.agreement_loss(f, b.long(), sk, tk)
    with pytest.raises(TypeError, match="src_keep must be a bool tensor"):
        ag.agreement_loss(f, b, sk.long(), tk)
    with pytest.raises(ValueError, match=r"tgt_keep must be \(2, 5\) on cpu, got shape \(2, 4\)"):
        ag.agreement_loss(f, b, sk, sk)
    empty = tk.clone()
    empty[1] = False
    with pytest.raises(ValueError, match="tgt_keep row 1 has no True"):
        ag.agreement_loss(f, b, sk, empty)


# --------------------------------------------------------------------------- config and model
def test_config_builds_two_mirrored_directions_and_refuses_bad_values():
    cfg = ag.AgreementConfig(30, 40, emb_dim=8, hid_dim=12, attn_dim=6, score="general", dropout=0.1)
    fwd, bwd = cfg.direction_configs()
    assert (fwd.src_vocab_size, fwd.tgt_vocab_size, bwd.src_vocab_size, bwd.tgt_vocab_size) == (30, 40, 40, 30)
    assert dataclasses.replace(bwd, src_vocab_size=30, tgt_vocab_size=40) == fwd
    assert fwd == RNNConfig(
        30, 40, emb_dim=8, hid_dim=12, attention="bahdanau", score="general", attn_dim=6, dropout=0.1
    )
    with pytest.raises(ValueError, match=r"agreement must be >= 0.0, got -0.5"):
        ag.AgreementConfig(30, 40, agreement=-0.5)
    with pytest.raises(ValueError, match=r"agreement must be >= 0.0, got nan"):
        ag.AgreementConfig(30, 40, agreement=float("nan"))
    with pytest.raises(TypeError, match="agreement must be a float, got str"):
        ag.AgreementConfig(30, 40, agreement="1")
    with pytest.raises(ValueError, match=r"backward_label_smoothing must be in \[0, 1\), got 1.0"):
        ag.AgreementConfig(30, 40, backward_label_smoothing=1.0)
    with pytest.raises(ValueError, match=r"attention must be one of \('bahdanau', 'luong'\) .* got None"):
        ag.AgreementConfig(30, 40, attention=None)
    with pytest.raises(ValueError, match="src_vocab_size must be >= 1, got 0"):
        ag.AgreementConfig(0, 40)
    with pytest.raises(TypeError, match="tgt_vocab_size must be an int, got float"):
        ag.AgreementConfig(30, 40.0)
    with pytest.raises(ValueError, match="hid_dim must be even"):
        ag.AgreementConfig(30, 40, hid_dim=7)
    with pytest.raises(TypeError, match="config must be an AgreementConfig, got RNNConfig"):
        ag.AgreementPair(fwd)


def test_a_checkpoint_with_vocabularies_of_the_wrong_sizes_is_refused(tmp_path):
    model, _, sv, tv = _tiny()
    with pytest.raises(CheckpointError, match=r"src_vocab has \d+ tokens but the config's src_vocab_size is \d+"):
        save_checkpoint(model, tmp_path / "swapped", src_vocab=tv, tgt_vocab=sv)


def test_registry_builds_the_pair():
    fam = models.get_family("agreement")
    assert (fam.model_cls, fam.config_cls) == (ag.AgreementPair, ag.AgreementConfig)
    model = models.build_model("agreement", {"src_vocab_size": 9, "tgt_vocab_size": 11, "emb_dim": 4, "hid_dim": 6})
    assert models.family_of(model) is fam
    assert type(model.forward_model) is Seq2SeqRNN and type(model.backward_model) is Seq2SeqRNN


def test_the_forward_model_starts_from_a_lone_models_weights():
    pair, _, sv, tv = _tiny(seed=5)
    torch.manual_seed(5)
    lone = Seq2SeqRNN(pair.config.direction_configs()[0])
    mine, theirs = pair.forward_model.state_dict(), lone.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_eval_mode_is_the_forward_model_alone():
    model, pairs, sv, tv = _tiny()
    src, tgt_in, _ = collate(encode_pairs(pairs[:6], sv, tv))
    model.eval()
    logits, attn = model(src, tgt_in, return_attention=True)
    ref_logits, ref_attn = model.forward_model(src, tgt_in, return_attention=True)
    assert torch.equal(logits, ref_logits) and torch.equal(attn, ref_attn)
    assert model.aux_loss is None and model.last_terms == {}
    assert torch.equal(model(src, tgt_in), ref_logits)
    # every decoder sees the English->X model
    for beam in (1, 3):
        got, want = beam_search(model, src, beam=beam, max_len=30), beam_search(model.forward_model, src, beam, 30)
        assert torch.equal(got.tokens, want.tokens) and torch.equal(got.attn, want.attn)
    with pytest.raises(ValueError, match="src holds token id"):
        model.check_source(torch.full((1, 3), len(sv)))


@pytest.mark.parametrize("target", ["fr", "ko"])
def test_training_sets_the_backward_loss_plus_the_weighted_agreement(target):
    model, pairs, sv, tv = _tiny(target, agreement=0.7, backward_label_smoothing=0.1)
    src, tgt_in, tgt_out = collate(encode_pairs(pairs[:7], sv, tv))
    model.train()
    logits, attn_fwd = model(src, tgt_in, return_attention=True)
    model.eval()
    torch.testing.assert_close(logits, model.forward_model(src, tgt_in))  # no dropout: the same logits
    # the backward direction scored on the reversed pairs, batched by the loaders' own code
    b_src, b_in, b_out = collate(encode_pairs(ag.reverse_pairs(pairs[:7]), tv, sv))
    b_logits, attn_bwd = model.backward_model(b_src, b_in, return_attention=True)
    ce = masked_cross_entropy(b_logits, b_out, 0.1)
    agree = ag.agreement_loss(attn_fwd, attn_bwd, src != PAD, tgt_out != PAD)
    torch.testing.assert_close(model.last_terms["backward_loss"], ce.detach())
    torch.testing.assert_close(model.last_terms["agreement_loss"], agree.detach())
    model.train()
    model(src, tgt_in)
    torch.testing.assert_close(model.aux_loss, ce + 0.7 * agree)
    assert model.aux_loss.requires_grad and 0.0 < float(agree.detach()) < 1.0


def _grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_lambda_zero_trains_two_independent_models_and_lambda_couples_them():
    model, pairs, sv, tv = _tiny(agreement=0.0)
    with torch.no_grad():  # peaked attention: near-uniform maps give the trace almost no gradient
        for sub in (model.forward_model, model.backward_model):
            sub.score.v.weight.mul_(30.0)
            sub.score.W_h.weight.mul_(3.0)
    src, tgt_in, tgt_out = collate(encode_pairs(pairs[:8], sv, tv))
    model.train()
    joint = _grads(model, masked_cross_entropy(model(src, tgt_in), tgt_out) + model.aux_loss)
    alone = _grads(model, masked_cross_entropy(model.forward_model(src, tgt_in), tgt_out))
    fwd_keys = [k for k in joint if k.startswith("forward_model.")]
    assert fwd_keys and sorted(fwd_keys) == sorted(alone)
    for k in fwd_keys:
        torch.testing.assert_close(joint[k], alone[k], rtol=1e-5, atol=1e-7)  # nothing from the backward loss
    coupled, *_ = _tiny(agreement=1.0)
    coupled.load_state_dict(model.state_dict())
    coupled.train()
    both = _grads(coupled, masked_cross_entropy(coupled(src, tgt_in), tgt_out) + coupled.aux_loss)
    moved = max(float((both[k] - alone[k]).abs().max()) for k in fwd_keys)
    assert moved > 1e-6  # the agreement term reaches the forward model's attention
    score_keys = [k for k in both if k.startswith("backward_model.score.")]
    assert score_keys and any(not torch.allclose(both[k], joint[k]) for k in score_keys)


# --------------------------------------------------------------------------- reversed pairs and evaluation
def test_reverse_pairs_inverts_sure_and_possible_links():
    ko = Pair(
        src=("they", "are", "not", "fat", "under", "a", "mouse", "."),
        tgt=("그들", "이", "쥐", "아래", "에서", "안", "뚱뚱하다", "."),
        align=((0,), (), (6,), (4,), (), (2,), (3,), (7,)),
        content=(False, False, True, False, False, False, True, False),
        possible=((), (0,), (), (), (4,), (), (1,), ()),
    )
    (rev,) = ag.reverse_pairs([ko])
    assert rev.src == ko.tgt and rev.tgt == ko.src
    assert rev.align == ((0,), (), (5,), (6,), (3,), (), (2,), (7,))  # "a" has no Korean link
    assert rev.possible == ((1,), (6,), (), (), (4,), (), (), ())
    assert rev.content == (False, False, False, True, False, False, True, False)  # "fat", "mouse"
    pairs, _, _ = _corpus("ko")
    twice = ag.reverse_pairs(ag.reverse_pairs(pairs))
    assert [(p.src, p.tgt, p.align, p.possible) for p in twice] == [(p.src, p.tgt, p.align, p.possible) for p in pairs]
    fr = _corpus("fr")[0][:20]
    assert all(p.possible is None for p in ag.reverse_pairs(fr))
    bare = ag.reverse_pairs([Pair(src=("a", "."), tgt=("b", "."))])
    assert bare == [Pair(src=("b", "."), tgt=("a", "."))]
    with pytest.raises(ValueError, match=r"pairs\[1\] \(English of 2 tokens\): links\[0\] holds position 5, outside \[0, 2\)"):
        ag.reverse_pairs([fr[0], Pair(src=("a", "."), tgt=("b",), align=((5,),), content=(True,))])
    with pytest.raises(ValueError, match=r"pairs\[0\]\.content has 1 entries for 2 target tokens"):
        ag.reverse_pairs([Pair(src=("a", "."), tgt=("b", "."), align=((0,), (1,)), content=(True,))])
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a Pair, got tuple"):
        ag.reverse_pairs([("a", "b")])


@pytest.mark.parametrize("target", ["fr", "ko"])
def test_evaluate_backward_scores_the_backward_model_on_the_reversed_pairs(target):
    model, pairs, sv, tv = _tiny(target)
    model.eval()
    test = [p for p in pairs if len(p.tgt) <= 40][:40]  # evaluate_model buckets by source length (<= 40)
    got = ag.evaluate_backward(model, test, sv, tv, beam=2)
    want = evaluate_model(model.backward_model, ag.reverse_pairs(test), tv, sv, beam=2, target=target)
    keys = ("bleu", "chrf", "exact_match", "aer", "align_content", "align_all", "align_function")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys} and got["n_test"] == 40
    assert got["aer"] is not None
    assert evaluate.extra_metrics(model, test, sv, tv, beam=2)["backward"]["aer"] == got["aer"]
    with pytest.raises(TypeError, match="model must be an AgreementPair, got Seq2SeqRNN"):
        ag.evaluate_backward(model.forward_model, test, sv, tv)
    with pytest.raises(ValueError, match="pairs is empty"):
        ag.evaluate_backward(model, [], sv, tv)


# --------------------------------------------------------------------------- through experiments.run
def test_experiments_run_trains_both_directions_and_the_checkpoint_reloads(tmp_data_dir, monkeypatch):
    pairs, sv, tv = _corpus("fr")
    data = (Splits(train=pairs[:180], valid=pairs[180:200], test=pairs[200:]), sv, tv)
    base = experiments.preset("bahdanau", "cpu")
    model_fields = {**base.model, "agreement": 1.0, "backward_label_smoothing": base.label_smoothing}
    exp = dataclasses.replace(base, name="agreement_test", family="agreement", model=model_fields, steps=3)
    monkeypatch.setitem(experiments.EXPERIMENTS, "agreement_test", {"cpu": exp, "gpu": exp})

    model, res = experiments.run("agreement_test", progress=False, save=False, data=data)
    assert type(model) is ag.AgreementPair and res["train_steps"] == 3 and res["aer"] is not None
    assert res["params"] == sum(p.numel() for p in model.parameters())
    assert not results_written(tmp_data_dir)
    # the backward model trained too: AuxLoss added its loss (seeded: the same initial weights as the run's)
    from attnlab.training.train import set_seed

    set_seed(0)
    fresh = experiments.build_model(exp, sv, tv)
    for name, p in fresh.backward_model.named_parameters():
        if name.startswith("out."):
            assert not torch.equal(p, model.backward_model.get_parameter(name)), name

    model, res = experiments.run("agreement_test", progress=False, data=data)
    loaded, meta, source = experiments.load_trained("agreement_test")
    assert source == "live run" and meta["kind"] == "agreement" and loaded.config == model.config
    again, _ = load_checkpoint(tmp_data_dir / "runs" / "checkpoints" / "agreement_test")
    src, tgt_in, _ = collate(encode_pairs(pairs[200:210], sv, tv))
    model.eval()
    x_out, en_in = ag.outputs_from_inputs(tgt_in), ag.inputs_from_outputs(src)
    for other in (loaded, again):
        assert torch.equal(other(src, tgt_in), model(src, tgt_in))
        assert torch.equal(other.backward_model(x_out, en_in), model.backward_model(x_out, en_in))


def results_written(folder) -> bool:
    return any(folder.rglob("*.json"))
