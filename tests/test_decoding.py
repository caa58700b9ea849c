"""Greedy and beam decoding: against a brute-force search over every sequence of a model with fixed
logits, the search rules (forbidden tokens, finished beats cut off, length penalty), and on RNNs."""

import itertools
import math

import pytest
import torch
from torch import nn

from attnlab.data.vocab import BOS, EOS, PAD
from attnlab.models.decoding import beam_search, beam_steps, greedy_decode, sequence_logprob
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

V = 6  # <pad>, <bos>, <eos>, <unk> and two words: 4 tokens a live hypothesis may emit
ALLOWED = [y for y in range(V) if y not in (PAD, BOS)]


class TableModel(nn.Module):
    """A decoding-protocol model whose next-token logits are read from a fixed table.

    ``table[b, t, y_prev]`` are the ``(V,)`` logits of sentence ``b`` at step ``t`` after token
    ``y_prev``; the attention of step ``t`` is one-hot on source position ``t % S``.
    """

    def __init__(self, table: torch.Tensor, S: int = 3):
        super().__init__()
        self.table, self.S = table, S  # (B, T, V, V)
        self.anchor = nn.Parameter(torch.zeros(()))  # so that the model has a train/eval flag and a device

    def encode(self, src):
        return {"row": torch.arange(src.shape[0])}  # (B,) which sentence each hypothesis decodes

    def init_state(self, memory):
        return {"row": memory["row"]}  # (B,)

    def step(self, memory, state, y_prev, t):
        assert not self.training, "decoding must run in eval mode"
        assert not torch.is_grad_enabled(), "decoding must run without gradients"
        logits = self.table[state["row"], t, y_prev]  # (N, V)
        attn = nn.functional.one_hot(torch.full_like(y_prev, t % self.S), self.S).float()  # (N, S)
        return logits, state, attn


def table_model(seed, B=2, T=4, eos_shift=0.0, word_shift=0.0, pad_bos_shift=0.0):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(B, T, V, V, generator=g) * 2  # (B, T, V, V)
    table[..., EOS] += eos_shift
    table[..., 4] += word_shift
    table[..., [PAD, BOS]] += pad_bos_shift
    return TableModel(table)


def seq_logprob(model, b, seq):
    """log P(seq) for sentence ``b`` under the table (log-softmax over all V tokens)."""
    total, prev = 0.0, BOS
    for t, y in enumerate(seq):
        total += torch.log_softmax(model.table[b, t, prev].double(), -1)[y].item()
        prev = y
    return total


def brute_force(model, b, max_len, alpha):
    """The best sequence by enumeration under the rules of attnlab.models.decoding: every sequence of allowed
    tokens that ends at its first <eos> (finished) or reaches max_len without one (cut off); a
    finished one always beats a cut-off one; among them the best score / length ** alpha."""
    words = [y for y in ALLOWED if y != EOS]
    finished = [(*body, EOS) for n in range(max_len) for body in itertools.product(words, repeat=n)]
    cut_off = list(itertools.product(words, repeat=max_len))
    pool = finished or cut_off  # <eos> is always allowed, so some sequence finishes
    return max(pool, key=lambda s: seq_logprob(model, b, s) / len(s) ** alpha)


SRC = torch.full((2, 3), 5)  # two sentences; TableModel ignores the ids


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 0.7, 2.0])
def test_exhaustive_beam_finds_the_brute_force_best(seed, alpha):
    """A beam as wide as the number of hypotheses never prunes, so it must find the best sequence."""
    max_len = 3
    k = 3**max_len + sum(3**i for i in range(max_len))  # live (3 words) + finished hypotheses at the end
    model = table_model(seed, eos_shift=1.0)
    out = beam_search(model, SRC, beam=k, max_len=max_len, alpha=alpha)
    for b in range(2):
        best = brute_force(model, b, max_len, alpha)
        n = int(out.lengths[b])
        assert tuple(out.tokens[b, :n].tolist()) == best, (b, out.tokens[b])
        assert n == len(best) and bool(out.finished[b]) == (best[-1] == EOS)
        assert out.scores[b].item() == pytest.approx(seq_logprob(model, b, best), abs=1e-5)


def test_length_penalty_changes_the_winner():
    """With a cheap <eos> the shortest sentence wins without normalisation; alpha = 2 prefers a longer one."""
    model = table_model(1, eos_shift=2.0)
    k, max_len = 40, 3
    plain = beam_search(model, SRC, beam=k, max_len=max_len, alpha=0.0)
    normed = beam_search(model, SRC, beam=k, max_len=max_len, alpha=2.0)
    assert any(plain.lengths[b] != normed.lengths[b] for b in range(2)), (plain.tokens, normed.tokens)
    for b in range(2):
        assert tuple(normed.tokens[b, : int(normed.lengths[b])].tolist()) == brute_force(model, b, max_len, 2.0)


def test_a_finished_hypothesis_beats_a_better_scoring_cut_off_one():
    """<eos> is very unlikely, so the best-scoring sequence is cut off at max_len; the rule says the
    best finished hypothesis is returned anyway, and a cut-off one only when none finished."""
    model = table_model(0, eos_shift=-8.0, word_shift=6.0)
    max_len = 3
    out = beam_search(model, SRC, beam=40, max_len=max_len)
    words = [y for y in ALLOWED if y != EOS]
    for b in range(2):
        assert bool(out.finished[b]) and out.tokens[b, int(out.lengths[b]) - 1] == EOS
        best_cut = max(itertools.product(words, repeat=max_len), key=lambda s: seq_logprob(model, b, s))
        assert out.scores[b].item() < seq_logprob(model, b, best_cut) - 1.0  # the rule, not the score, decided
    greedy = greedy_decode(model, SRC, max_len=max_len)  # one hypothesis, never finishes
    assert not greedy.finished.any()
    assert greedy.lengths.tolist() == [max_len, max_len] and greedy.tokens.shape == (2, max_len)
    assert not ((greedy.tokens == EOS) | (greedy.tokens == PAD)).any()


@pytest.mark.parametrize("beam", [1, 3])
def test_live_hypotheses_never_emit_pad_or_bos(beam):
    """<pad> and <bos> get the largest logits everywhere, and are still never produced; lengths is
    what its docstring says and the scores stay the model's log-probabilities (no renormalisation)."""
    model = table_model(2, T=6, pad_bos_shift=10.0)
    out = beam_search(model, SRC, beam=beam, max_len=6)
    for b in range(2):
        n = int(out.lengths[b])
        toks = out.tokens[b].tolist()
        assert PAD not in toks[:n] and BOS not in toks
        assert all(y == PAD for y in toks[n:])
        if out.finished[b]:
            assert toks.index(EOS) == n - 1
        else:
            assert n == len(toks) and EOS not in toks
        # the forbidden tokens keep their probability mass: the score is log P under the full softmax
        assert out.scores[b].item() == pytest.approx(seq_logprob(model, b, toks[:n]), abs=1e-4)


def test_attention_history_follows_the_chosen_hypothesis():
    model = table_model(3, eos_shift=1.0)
    out = beam_search(model, SRC, beam=5, max_len=4)
    for b in range(2):
        n = int(out.lengths[b])
        for t in range(out.tokens.shape[1]):
            expected = torch.zeros(3) if t >= n else nn.functional.one_hot(torch.tensor(t % 3), 3).float()
            torch.testing.assert_close(out.attn[b, t], expected)


def test_beam_steps_yields_every_step_consistently():
    model = table_model(0, eos_shift=0.5)
    steps = list(beam_steps(model, SRC, beam=3, max_len=4))
    assert [s.t for s in steps] == list(range(len(steps)))
    for prev, cur in zip(steps, steps[1:], strict=False):
        assert torch.equal(cur.tokens[:, :-1], prev.tokens.index_select(0, cur.parent))
        chosen = cur.logp[cur.parent, cur.tokens[:, -1]]  # (N,)
        torch.testing.assert_close(cur.scores.view(-1), prev.scores.view(-1)[cur.parent] + chosen)
    final = beam_search(model, SRC, beam=3, max_len=4)
    last = steps[-1].tokens.view(2, 3, -1)  # (B, k, T)
    for b in range(2):
        assert any(torch.equal(final.tokens[b], last[b, j]) for j in range(3))


def test_decoding_restores_the_mode_and_keeps_gradients_on_for_the_caller():
    model = table_model(0).train()
    for _ in beam_steps(model, SRC, beam=2, max_len=3):
        assert torch.is_grad_enabled()  # between steps the caller's grad mode is back
        assert not model.training
    assert model.training
    gen = beam_steps(model, SRC, beam=2, max_len=3)
    next(gen)
    gen.close()  # abandoned after one step
    assert model.training
    beam_search(model, SRC, beam=2, max_len=3)
    assert model.training


# ----------------------------------------------------------------------------------- RNN models
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
    """Greedy decoding written out: the most likely token other than <pad> and <bos>."""
    memory = model.encode(src)
    state = model.init_state(memory)
    y = torch.full((src.size(0),), BOS)
    out = []
    for t in range(max_len):
        logits, state, _ = model.step(memory, state, y, t)
        logits[:, [PAD, BOS]] = -math.inf
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
    with torch.no_grad():
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


def test_bad_arguments():
    model = random_model()
    src = src_batch()
    with pytest.raises(ValueError, match="beam must be >= 1, got 0"):
        beam_search(model, src, beam=0)
    with pytest.raises(ValueError, match="beam must be >= 1, got 0"):
        beam_steps(model, src, beam=0)  # checked at the call, not at the first step
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        greedy_decode(model, src, max_len=0)
    with pytest.raises(TypeError, match="beam must be an int, got float 2.0"):
        beam_search(model, src, beam=2.0)
    with pytest.raises(ValueError, match=r"src must be \(B, S\) token ids, got shape \(6,\)"):
        greedy_decode(model, src[0])
    with pytest.raises(TypeError, match="src must hold integer token ids, got dtype torch.float32"):
        greedy_decode(model, src.float())
    for alpha in (-0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="alpha must be a finite float >= 0"):
            beam_search(model, src, alpha=alpha)
    with pytest.raises(TypeError, match="alpha must be a float >= 0, got str"):
        beam_search(model, src, alpha="0.6")
    tgt = torch.full((4, 5), 5)
    with pytest.raises(ValueError, match=r"tgt_out must have the shape of tgt_in \(4, 5\), got shape \(4, 4\)"):
        sequence_logprob(model, src, tgt, tgt[:, :4])
    with pytest.raises(ValueError, match=r"tgt_out holds token id 15, outside the vocabulary \[0, 15\)"):
        sequence_logprob(model, src, tgt, torch.full((4, 5), 15))
