"""Batched greedy decoding and beam search for any model that speaks the decoding protocol.

The protocol (implemented by :class:`attnlab.rnn.Seq2SeqRNN` and the Transformer):

* ``model.encode(src (B, S)) -> memory``: a dict of tensors whose first dim is ``B``;
* ``model.init_state(memory) -> state``: a tuple/dict of tensors, first dim ``B``;
* ``model.step(memory, state, y_prev (B,), t) -> (logits (B, V), state, attn (B, S) | None)``.

Because memory and state are plain collections of batch-first tensors, beam search can expand
and reorder them generically (``index_select`` on dim 0), whatever the model.

Beam search keeps ``k`` hypotheses per sentence. A hypothesis that has emitted ``<eos>`` is
*finished*: it may only be extended by ``<pad>`` at zero cost, so it keeps its score and keeps
competing with the live ones. The score is the plain sum of token log-probabilities (optionally
divided by ``length ** alpha``, GNMT-style, only when ranking finished hypotheses). With
``k = 1`` this is exactly greedy decoding.

Shape legend
------------
B  batch size
k  beam width
S  source length
T  decoded length (incl. ``<eos>``)
V  target vocabulary size
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_map

from .data import BOS, EOS, PAD

__all__ = ["Decoded", "greedy_decode", "beam_search", "sequence_logprob"]


@dataclass
class Decoded:
    """Result of decoding a batch.

    Attributes:
        tokens: ``(B, T)`` ids, each row ending with ``<eos>`` then ``<pad>``.
        lengths: ``(B,)`` number of tokens up to and including ``<eos>`` (or ``T`` if none).
        scores: ``(B,)`` sum of log-probabilities of the tokens counted in ``lengths``.
        attn: ``(B, T, S)`` attention weights per produced token, or ``None``.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor
    attn: torch.Tensor | None


def _index(tree, index: torch.Tensor):
    return tree_map(lambda x: x.index_select(0, index) if isinstance(x, torch.Tensor) else x, tree)


def _check_src(src: torch.Tensor, max_len: int) -> None:
    if src.dim() != 2:
        raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, max_len: int = 80) -> Decoded:
    """Decode a batch by taking the most likely token at every step.

    Args:
        model: a model implementing the decoding protocol.
        src: ``(B, S)`` padded source ids.
        max_len: most tokens to produce per sentence (``<eos>`` included).

    Returns:
        :class:`Decoded`.
    """
    return beam_search(model, src, beam=1, max_len=max_len)


@torch.no_grad()
def beam_search(model, src: torch.Tensor, beam: int = 5, max_len: int = 80, alpha: float = 0.0) -> Decoded:
    """Batched beam search returning the best hypothesis per sentence and its attention.

    Args:
        model: a model implementing the decoding protocol.
        src: ``(B, S)`` padded source ids.
        beam: beam width ``k`` (1 = greedy).
        max_len: most tokens per hypothesis (``<eos>`` included).
        alpha: length-normalisation exponent used to rank finished hypotheses (0 = none).

    Returns:
        :class:`Decoded` with the best hypothesis of each sentence.
    """
    _check_src(src, max_len)
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    was_training = model.training
    model.eval()
    try:
        B, S = src.shape
        k = beam
        device = src.device
        memory = model.encode(src)
        state = model.init_state(memory)
        expand = torch.arange(B, device=device).repeat_interleave(k)  # (B*k,)
        memory, state = _index(memory, expand), _index(state, expand)
        scores = torch.full((B, k), float("-inf"), device=device)  # (B, k)
        scores[:, 0] = 0.0  # only one live hypothesis at the start: the others are copies
        tokens = torch.full((B * k, 0), PAD, dtype=torch.long, device=device)  # (B*k, 0)
        finished = torch.zeros(B * k, dtype=torch.bool, device=device)  # (B*k,)
        attn_hist = None
        y_prev = torch.full((B * k,), BOS, dtype=torch.long, device=device)  # (B*k,)
        for t in range(max_len):
            logits, state, attn = model.step(memory, state, y_prev, t)  # (B*k, V)
            logp = torch.log_softmax(logits.float(), dim=-1)  # (B*k, V)
            V = logp.size(-1)
            # Finished hypotheses may only continue with <pad>, at no cost.
            pad_only = torch.full_like(logp, float("-inf"))  # (B*k, V)
            pad_only[:, PAD] = 0.0
            logp = torch.where(finished.unsqueeze(1), pad_only, logp)  # (B*k, V)
            cand = (scores.view(B * k, 1) + logp).view(B, k * V)  # (B, k*V)
            top, idx = cand.topk(k, dim=1)  # (B, k)
            origin = idx // V + torch.arange(B, device=device).unsqueeze(1) * k  # (B, k) flat parent
            origin = origin.view(-1)  # (B*k,)
            y_prev = (idx % V).view(-1)  # (B*k,)
            scores = top  # (B, k)
            tokens = torch.cat([tokens.index_select(0, origin), y_prev.unsqueeze(1)], dim=1)  # (B*k, t+1)
            finished = finished.index_select(0, origin) | (y_prev == EOS)  # (B*k,)
            state = _index(state, origin)
            if attn is not None:
                step_attn = attn.index_select(0, origin).unsqueeze(1)  # (B*k, 1, S)
                step_attn = step_attn.masked_fill((y_prev == PAD).view(-1, 1, 1), 0.0)  # no attention after <eos>
                prev = attn_hist.index_select(0, origin) if attn_hist is not None else None
                attn_hist = step_attn if prev is None else torch.cat([prev, step_attn], dim=1)  # (B*k, t+1, S)
            if finished.all():
                break
        lengths = ((tokens != PAD) & (tokens != EOS)).sum(1) + (tokens == EOS).any(1).long()  # (B*k,)
        rank = scores.clone()  # (B, k)
        if alpha:
            rank = rank / lengths.view(B, k).clamp(min=1).float() ** alpha
        # Prefer finished hypotheses over ones cut off at max_len.
        done = finished.view(B, k)  # (B, k)
        rank = rank.masked_fill(done.any(1, keepdim=True) & ~done, float("-inf"))  # (B, k)
        best = rank.argmax(dim=1) + torch.arange(B, device=device) * k  # (B,) flat index
        return Decoded(
            tokens=tokens.index_select(0, best),  # (B, T)
            lengths=lengths.index_select(0, best),  # (B,)
            scores=scores.view(-1).index_select(0, best),  # (B,)
            attn=attn_hist.index_select(0, best) if attn_hist is not None else None,  # (B, T, S)
        )
    finally:
        model.train(was_training)


@torch.no_grad()
def sequence_logprob(model, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """``log P(y | x)`` of given target sequences under the model (teacher forcing).

    Args:
        model: a seq2seq model whose ``forward(src, tgt_in)`` returns ``(B, T, V)`` logits.
        src: ``(B, S)``; tgt_in: ``(B, T)`` (``<bos>`` + y); tgt_out: ``(B, T)`` (y + ``<eos>``).

    Returns:
        ``(B,)`` summed log-probabilities over non-pad target positions.
    """
    was_training = model.training
    model.eval()
    try:
        logp = torch.log_softmax(model(src, tgt_in).float(), dim=-1)  # (B, T, V)
        picked = logp.gather(2, tgt_out.unsqueeze(2)).squeeze(2)  # (B, T)
        return picked.masked_fill(tgt_out == PAD, 0.0).sum(1)  # (B,)
    finally:
        model.train(was_training)
