"""Batched greedy decoding and beam search for any model that speaks the decoding protocol.

The protocol (implemented by :class:`attnlab.models.rnn.Seq2SeqRNN` and the Transformer):

* ``model.encode(src (B, S)) -> memory``: a dict of tensors whose first dim is ``B``;
* ``model.init_state(memory) -> state``: a tuple/dict of tensors, first dim ``B``;
* ``model.step(memory, state, y_prev (B,), t) -> (logits (B, V), state, attn (B, S) | None)``;
* optionally ``model.check_source(src)``, which raises unless ``encode`` accepts ``src``. Without it
  ``src`` must be ``(B, S)`` token ids; with it ``src`` is whatever the model reads (images
  ``(B, C, H, W)`` for :class:`attnlab.models.vision.Captioner`), batch-first.

Because memory and state are plain collections of batch-first tensors, beam search can expand
and reorder them generically (``index_select`` on dim 0), whatever the model.

There is one decoding loop, :func:`beam_steps`, a generator that yields what every step did;
:func:`beam_search` runs it to the end and picks the best hypothesis, :func:`greedy_decode` is
beam search with ``k = 1``, and the decoding stepper widget records the steps it yields.

The search rules:

* A hypothesis that has not emitted ``<eos>`` is *live*; it may emit any token except ``<pad>``
  and ``<bos>`` (these never appear inside a sentence). Their probability is not redistributed:
  a hypothesis' score stays the model's own log-probability of its tokens.
* A hypothesis that has emitted ``<eos>`` is *finished*: it may only be extended by ``<pad>`` at
  zero cost, so it keeps its score and keeps competing with the live ones for a place in the beam.
* The beam keeps the ``k`` best scores (plain sums of token log-probabilities) at every step.
* At the end, a finished hypothesis always beats one that was cut off at ``max_len`` without
  ``<eos>``, whatever their scores: a cut-off hypothesis is an unfinished sentence, returned only
  when no hypothesis in the final beam of that sentence finished (``Decoded.finished`` is then
  ``False``). Among the candidates kept by this rule the best ``score / length ** alpha`` wins
  (``alpha = 0``: the plain score; the length counts the ``<eos>``).

With ``k = 1`` this is exactly greedy decoding.

Shape legend
------------
B  batch size
k  beam width
S  source length
T  decoded length (incl. ``<eos>``)
V  target vocabulary size
"""

from __future__ import annotations

import collections
import math
import numbers
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._pytree import tree_map

from attnlab.core.checks import check_positive_int, check_token_ids, eval_mode
from attnlab.data.corpus.splits import Pair
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.vocab import BOS, EOS, PAD, Vocab

__all__ = ["Decoded", "BeamStep", "beam_steps", "greedy_decode", "beam_search", "sequence_logprob"]

#: Tokens a live hypothesis may never emit.
FORBIDDEN = (PAD, BOS)


@dataclass
class Decoded:
    """Result of decoding a batch.

    Attributes:
        tokens: ``(B, T)`` ids; a finished row is its tokens, ``<eos>``, then ``<pad>``; a row cut
            off at ``max_len`` has ``T`` tokens and no ``<eos>`` or ``<pad>``.
        lengths: ``(B,)`` number of tokens up to and including ``<eos>`` (``T`` for a row cut off).
        scores: ``(B,)`` sum of log-probabilities of the tokens counted in ``lengths``.
        attn: ``(B, T, S)`` attention weights per produced token (zero after ``<eos>``), or ``None``.
        finished: ``(B,)`` bool, False for a row cut off at ``max_len`` before ``<eos>``.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor
    attn: torch.Tensor | None
    finished: torch.Tensor


@dataclass(frozen=True)
class BeamStep:
    """What one step of :func:`beam_steps` did (``N = B * k`` hypotheses, sentence-major).

    Attributes:
        t: step index (0 for the first produced token).
        logp: ``(N, V)`` float32 log-probabilities of the next token for each hypothesis as it was
            *before* this step (row ``i`` is the parent row ``i`` of ``parent``); forbidden tokens
            are ``-inf``, and a finished parent has ``0`` at ``<pad>`` and ``-inf`` elsewhere.
        parent: ``(N,)`` row of ``logp`` (the previous step's hypothesis) each hypothesis grew from.
        tokens: ``(N, t + 1)`` the hypotheses after this step.
        scores: ``(B, k)`` their scores (sums of token log-probabilities).
        finished: ``(N,)`` bool, True once a hypothesis has emitted ``<eos>``.
        attn: ``(N, t + 1, S)`` attention weights of every produced token, or ``None``.
    """

    t: int
    logp: torch.Tensor
    parent: torch.Tensor
    tokens: torch.Tensor
    scores: torch.Tensor
    finished: torch.Tensor
    attn: torch.Tensor | None


def _index(tree, index: torch.Tensor):
    return tree_map(lambda x: x.index_select(0, index) if isinstance(x, torch.Tensor) else x, tree)


def beam_steps(model, src: torch.Tensor, beam: int = 5, max_len: int = 80) -> Iterator[BeamStep]:
    """Run batched beam search step by step, yielding a :class:`BeamStep` after every step.

    The arguments are checked at the call; the model runs in eval mode without gradients while
    the generator runs, and gets its previous mode back when the generator ends or is closed
    (run it to the end, or ``close()`` it, before training again). Stops after ``max_len`` steps
    or as soon as every hypothesis has finished.

    Args:
        model: a model implementing the decoding protocol.
        src: ``(B, S)`` integer source ids, right-padded (or what ``model.check_source`` accepts).
        beam: beam width ``k >= 1`` (1 = greedy).
        max_len: most tokens per hypothesis (``<eos>`` included), ``>= 1``.

    Returns:
        An iterator of :class:`BeamStep`, one per step.
    """
    check_source = getattr(model, "check_source", None)
    if check_source is None:
        check_token_ids("src", src)
    else:
        check_source(src)
    return _beam_steps(model, src, check_positive_int("beam", beam), check_positive_int("max_len", max_len))


@torch.no_grad()  # on a generator function, grad mode is switched only while the generator runs
def _beam_steps(model, src: torch.Tensor, k: int, max_len: int) -> Iterator[BeamStep]:
    with eval_mode(model):
        B = src.shape[0]
        device = src.device
        memory = model.encode(src)
        state = model.init_state(memory)
        expand = torch.arange(B, device=device).repeat_interleave(k)  # (B*k,)
        memory, state = _index(memory, expand), _index(state, expand)
        scores = torch.full((B, k), float("-inf"), device=device)  # (B, k)
        scores[:, 0] = 0.0  # only one live hypothesis at the start: the others are copies
        tokens = torch.full((B * k, 0), PAD, dtype=torch.long, device=device)  # (B*k, 0)
        finished = torch.zeros(B * k, dtype=torch.bool, device=device)  # (B*k,)
        row_offset = torch.arange(B, device=device).unsqueeze(1) * k  # (B, 1)
        attn_hist, pad_only = None, None
        y_prev = torch.full((B * k,), BOS, dtype=torch.long, device=device)  # (B*k,)
        for t in range(max_len):
            logits, state, attn = model.step(memory, state, y_prev, t)  # (B*k, V)
            logp = torch.log_softmax(logits.float(), dim=-1)  # (B*k, V)
            V = logp.size(-1)
            logp[:, list(FORBIDDEN)] = float("-inf")  # live hypotheses never emit <pad> or <bos>
            if pad_only is None:
                pad_only = torch.full_like(logp, float("-inf"))  # (B*k, V)
                pad_only[:, PAD] = 0.0
            logp = torch.where(finished.unsqueeze(1), pad_only, logp)  # (B*k, V) finished: <pad>, free
            cand = (scores.view(B * k, 1) + logp).view(B, k * V)  # (B, k*V)
            top, idx = cand.topk(k, dim=1)  # (B, k)
            parent = (idx // V + row_offset).view(-1)  # (B*k,) flat row of the parent
            y_prev = (idx % V).view(-1)  # (B*k,)
            scores = top  # (B, k)
            tokens = torch.cat([tokens.index_select(0, parent), y_prev.unsqueeze(1)], dim=1)  # (B*k, t+1)
            finished = finished.index_select(0, parent) | (y_prev == EOS)  # (B*k,)
            state = _index(state, parent)
            if attn is not None:
                step_attn = attn.index_select(0, parent).unsqueeze(1)  # (B*k, 1, S)
                step_attn = step_attn.masked_fill((y_prev == PAD).view(-1, 1, 1), 0.0)  # no attention after <eos>
                prev = attn_hist.index_select(0, parent) if attn_hist is not None else None
                attn_hist = step_attn if prev is None else torch.cat([prev, step_attn], dim=1)  # (B*k, t+1, S)
            yield BeamStep(t, logp, parent, tokens, scores, finished, attn_hist)
            if finished.all():
                break


def _lengths(tokens: torch.Tensor) -> torch.Tensor:
    """``(N,)`` tokens up to and including the first ``<eos>``, or ``T`` for a row without one."""
    is_eos = tokens == EOS  # (N, T)
    first = is_eos.int().argmax(1)  # (N,) first <eos> (0 when there is none)
    return torch.where(is_eos.any(1), first + 1, torch.full_like(first, tokens.size(1)))  # (N,)


def beam_search(model, src: torch.Tensor, beam: int = 5, max_len: int = 80, alpha: float = 0.0) -> Decoded:
    """Batched beam search returning the best hypothesis per sentence and its attention.

    See the module docstring for the rules (forbidden tokens, finished beats cut off, ``alpha``).

    Args:
        model: a model implementing the decoding protocol.
        src: ``(B, S)`` integer source ids, right-padded (or what ``model.check_source`` accepts).
        beam: beam width ``k >= 1`` (1 = greedy).
        max_len: most tokens per hypothesis (``<eos>`` included), ``>= 1``.
        alpha: length-normalisation exponent ``>= 0`` used to rank the final beam (0 = none).

    Returns:
        :class:`Decoded` with the best hypothesis of each sentence.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha must be a float >= 0, got {type(alpha).__name__} {alpha!r}")
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite float >= 0, got {alpha}")
    steps = beam_steps(model, src, beam=beam, max_len=max_len)
    (last,) = collections.deque(steps, maxlen=1)  # run to the end, keep the final step only
    B, k = last.scores.shape
    lengths = _lengths(last.tokens)  # (B*k,)
    rank = last.scores / lengths.view(B, k).float() ** alpha if alpha else last.scores.clone()  # (B, k)
    done = last.finished.view(B, k)  # (B, k)
    rank = rank.masked_fill(done.any(1, keepdim=True) & ~done, float("-inf"))  # (B, k) finished beats cut off
    best = rank.argmax(dim=1) + torch.arange(B, device=rank.device) * k  # (B,) flat index
    return Decoded(
        tokens=last.tokens.index_select(0, best),  # (B, T)
        lengths=lengths.index_select(0, best),  # (B,)
        scores=last.scores.view(-1).index_select(0, best),  # (B,)
        attn=last.attn.index_select(0, best) if last.attn is not None else None,  # (B, T, S)
        finished=last.finished.index_select(0, best),  # (B,)
    )


def greedy_decode(model, src: torch.Tensor, max_len: int = 80) -> Decoded:
    """Decode a batch by taking the most likely allowed token at every step (beam search, ``k = 1``).

    Args:
        model: a model implementing the decoding protocol.
        src: ``(B, S)`` integer source ids, right-padded (or what ``model.check_source`` accepts).
        max_len: most tokens to produce per sentence (``<eos>`` included).

    Returns:
        :class:`Decoded`.
    """
    return beam_search(model, src, beam=1, max_len=max_len)


def sequence_logprob(model, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """``log P(y | x)`` of given target sequences under the model (teacher forcing, eval mode).

    Args:
        model: a seq2seq model whose ``forward(src, tgt_in)`` returns ``(B, T, V)`` logits.
        src: ``(B, S)``; tgt_in: ``(B, T)`` (``<bos>`` + y); tgt_out: ``(B, T)`` (y + ``<eos>``).

    Returns:
        ``(B,)`` summed log-probabilities over non-pad target positions.
    """
    check_token_ids("tgt_out", tgt_out)
    check_token_ids("tgt_in", tgt_in)
    if tgt_out.shape != tgt_in.shape:
        raise ValueError(
            f"tgt_out must have the shape of tgt_in {tuple(tgt_in.shape)}, got shape {tuple(tgt_out.shape)}"
        )
    with eval_mode(model):
        logp = torch.log_softmax(model(src, tgt_in).float(), dim=-1)  # (B, T, V)
        check_token_ids("tgt_out", tgt_out, vocab_size=logp.size(-1), device=logp.device)
        picked = logp.gather(2, tgt_out.unsqueeze(2)).squeeze(2)  # (B, T)
        return picked.masked_fill(tgt_out == PAD, 0.0).sum(1)  # (B,)


def device_of(model) -> torch.device:
    """The device of ``model``'s (first) parameters."""
    return next(model.parameters()).device


def length_batches(n: int, lengths: Sequence[int], bs: int):
    """Indices ``0 .. n-1`` in batches of ``bs``, sorted by ``lengths`` (similar lengths together: less padding)."""
    order = sorted(range(n), key=lambda i: lengths[i])
    for i in range(0, n, bs):
        yield order[i : i + bs]


@torch.no_grad()
def translate(
    model,
    sources: Sequence[Sequence[str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam: int = 1,
    bs: int = 250,
    max_len: int | None = None,
) -> tuple[list[list[str]], list[np.ndarray | None], float]:
    """Translate tokenised sentences (batched, length-sorted).

    Args:
        model: a model implementing the decoding protocol (:mod:`attnlab.models.decoding`).
        sources: source token lists (without ``<eos>``; it is added).
        src_vocab, tgt_vocab: vocabularies.
        beam: beam width (1 = greedy).
        bs: sentences per batch.
        max_len: most target tokens; default ``2 * S + 10`` per batch.

    Returns:
        ``(hypotheses, attentions, seconds)``: token lists, per sentence a ``(T', S)`` array of
        attention weights (``None`` without attention; ``S`` counts the ``<eos>``), wall time.
    """
    device = device_of(model)
    ids = [torch.tensor(src_vocab.encode(s, eos=True), dtype=torch.long) for s in sources]
    hyps: list[list[str] | None] = [None] * len(ids)
    attns: list[np.ndarray | None] = [None] * len(ids)
    start = time.perf_counter()
    for idx in length_batches(len(ids), [len(x) for x in ids], bs):
        batch = [ids[i] for i in idx]
        src = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=PAD).to(device)  # (B, S)
        limit = max_len or 2 * src.size(1) + 10
        out = beam_search(model, src, beam=beam, max_len=limit)
        for row, i in enumerate(idx):
            n = int(out.lengths[row])
            toks = out.tokens[row, :n].tolist()
            if toks and toks[-1] == EOS:
                toks = toks[:-1]
            hyps[i] = tgt_vocab.decode(toks, strip=True)
            if out.attn is not None:
                attns[i] = out.attn[row, :n, : len(batch[row])].float().cpu().numpy()
    return hyps, attns, time.perf_counter() - start


def forced_attention(model, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, bs: int = 250):
    """Attention weights with the gold target fed in; ``None`` for a model without attention.

    Runs in eval mode without gradients and restores the model's mode afterwards.

    Returns:
        list of ``(T, S)`` arrays: ``T`` = target tokens (no ``<eos>``), ``S`` = source tokens
        (no ``<eos>``), in the order of ``pairs``.
    """
    device = device_of(model)
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    out: list[np.ndarray | None] = [None] * len(items)
    with eval_mode(model):
        for idx in length_batches(len(items), [len(it[0]) for it in items], bs):
            src, tgt_in, _ = collate([items[i] for i in idx])
            _, attn = model(src.to(device), tgt_in.to(device), return_attention=True)
            if attn is None:
                return None
            for row, i in enumerate(idx):
                out[i] = attn[row, : len(pairs[i].tgt), : len(pairs[i].src)].float().cpu().numpy()
    return out
