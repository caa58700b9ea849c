"""Greedy and beam decoding on a trained toy model and on random models."""

import pytest
import torch

from attnlab.data import BOS, EOS, PAD
from attnlab.decoding import beam_search, greedy_decode, sequence_logprob
from attnlab.rnn import RNNConfig, Seq2SeqRNN


def random_model(attention="bahdanau"):
    torch.manual_seed(0)
    return Seq2SeqRNN(RNNConfig(15, 15, emb_dim=8, hid_dim=16, attention=attention)).eval()


def src_batch():
    torch.manual_seed(3)
    src = torch.randint(4, 15, (4, 6))
    src[1, 4:] = PAD
    src[:, -1] = torch.where(src[:, -1] == PAD, PAD, EOS)
    return src


def manual_greedy(model, src, max_len):
    memory = model.encode(src)
    state = model.init_state(memory)
    y = torch.full((src.size(0),), BOS)
    out = []
    for t in range(max_len):
        logits, state, _ = model.step(memory, state, y, t)
        y = logits.argmax(-1)
        out.append(y)
    return torch.stack(out, 1)


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong"])
def test_beam_width_one_is_greedy(attention):
    model = random_model(attention)
    src = src_batch()
    g = greedy_decode(model, src, max_len=9)
    b = beam_search(model, src, beam=1, max_len=9)
    assert torch.equal(g.tokens, b.tokens) and torch.equal(g.lengths, b.lengths)
    torch.testing.assert_close(g.scores, b.scores)
    ref = manual_greedy(model, src, 9)
    for row in range(src.size(0)):
        n = int(g.lengths[row])
        assert g.tokens[row, :n].tolist() == ref[row, :n].tolist()


def test_scores_are_sequence_logprobs_and_attention_shapes():
    model = random_model()
    src = src_batch()
    out = beam_search(model, src, beam=3, max_len=8)
    assert out.attn.shape[0] == 4 and out.attn.shape[2] == src.size(1)
    # rescoring the returned hypotheses with teacher forcing gives the reported scores
    tgt_out = out.tokens.clone()
    tgt_in = torch.cat([torch.full((4, 1), BOS), tgt_out[:, :-1]], 1)
    tgt_in[tgt_in == EOS] = PAD
    torch.testing.assert_close(sequence_logprob(model, src, tgt_in, tgt_out), out.scores, atol=1e-4, rtol=1e-4)


def test_beam_never_scores_below_greedy_on_trained_copy_model(copy_model):
    model, src = copy_model
    g = greedy_decode(model, src, max_len=12)
    for k in (2, 4):
        b = beam_search(model, src, beam=k, max_len=12)
        assert (b.scores >= g.scores - 1e-5).all()


def test_bad_arguments():
    model = random_model()
    with pytest.raises(ValueError, match="beam must be >= 1"):
        beam_search(model, src_batch(), beam=0)
    with pytest.raises(ValueError, match=r"src must be \(B, S\)"):
        greedy_decode(model, src_batch()[0])
