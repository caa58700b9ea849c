"""Tests of "attention as explanation" for lesson 07, scored against the gold links.

* **Uniform attention and leave-one-out** -- two of Jain & Wallace's (2019) tests:
  :func:`uniform_attention` decodes with the weights replaced by a uniform distribution (through
  :func:`attention_hook`), :func:`leave_one_out_importance` measures each source word's importance by
  leaving it out.

* **Shift-Att** -- Chen, Liu, Chen, Jiang & Liu (2020), "Accurate Word Alignment Induction from
  Neural Machine Translation". A Transformer decoder predicts target token ``y_t`` at the step whose
  *input* is ``y_{t-1}``; its cross-attention is spent before the decoder has seen ``y_t``. Chen et
  al. read the alignment of ``y_t`` one step later instead, at the step whose input is ``y_t``
  itself (row ``t + 1`` of the ``(T + 1)``-row map that includes the ``<eos>`` step), and pick a
  middle decoder layer (the third of six in their paper). :func:`decoder_cross_attention` collects
  every layer and head with the reference fed in; :func:`induce_alignment_maps` turns them into
  ``(T, S)`` maps, naive (row ``t``) or shifted (row ``t + 1``); :func:`shift_att` does both in one
  call and :func:`shift_att_report` scores every layer and head before and after the shift.
* **Adversarial attention** -- Jain & Wallace (2019), "Attention is not Explanation": look for
  attention weights far from the model's own that leave the prediction (nearly) unchanged. For a
  seq2seq RNN, every decoding step gets its own free logits ``z_t`` and attends with
  ``softmax(z_t)``; the search maximises the Jensen-Shannon divergence from the model's attention
  (or the weight taken away from the gold links) while the output distribution of every step stays
  within total-variation distance ``epsilon`` of the original. :func:`replaced_attention` is the hook
  (a context manager, like :func:`attnlab.training.explain.uniform_attention`); :func:`adversarial_attention`
  runs the search; :func:`adversarial_summary` scores it against the gold links. Wiegreffe & Pinter
  (2019), "Attention is not not Explanation", point out that such per-example weights are not
  produced by any trained model; the lesson states that caveat beside the numbers.
* **Variance across seeds** -- Jain & Wallace's third question: do models that differ only in their
  random seed attend alike? :func:`seed_spread` compares the attention maps of several seeds of one
  preset on the same sentences: the Jensen-Shannon divergence between every two seeds' rows, how
  often all seeds put their peak on the same source word, and each seed's AER. Where the score can
  see the words, seeds agree; where it cannot (lesson 03's ``location`` score), what the data does
  not pin down varies from seed to seed.

The adversarial search optimises teacher-forced, all steps of a sentence at once: step ``t``'s output
depends on the replaced weights of steps ``<= t`` through the decoder state, so the constraint is
checked on the joint replacement, which is stricter than replacing one step at a time.

Shape legend
------------
B  batch size
N  decoder layers
H  attention heads
T  target tokens (without ``<eos>``); the decoder runs ``T + 1`` steps (the last one predicts ``<eos>``)
S  source tokens; the model's source has ``S + 1`` positions (with ``<eos>``)
V  target vocabulary size
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import kendalltau

from attnlab.core.checks import check_choice, check_float, check_float_tensor, check_int, check_positive_int, eval_mode
from attnlab.core.masks import masked_softmax
from attnlab.data.corpus import Pair
from attnlab.data.gold import gold_attention
from attnlab.data.loaders import collate, encode_pairs
from attnlab.data.metrics import alignment_agreement, alignment_error_rate
from attnlab.data.vocab import PAD
from attnlab.models.rnn import Seq2SeqRNN

__all__ = [
    "decoder_cross_attention",
    "induce_alignment_maps",
    "shift_att",
    "shift_att_report",
    "jensen_shannon",
    "total_variation",
    "replaced_attention",
    "ADVERSARY_TARGETS",
    "AdversarialAttention",
    "adversarial_attention",
    "adversarial_summary",
    "seed_spread",
    "check_plain_soft_attention",
    "attention_hook",
    "uniform_attention",
    "leave_one_out_importance",
    "transformed_attention",
    "permutation_effect",
    "gradient_importance",
    "rank_agreement",
    "gold_weight",
]


def _check_pairs(pairs: Sequence[Pair], what: str) -> None:
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise ValueError(f"{what} needs a non-empty sequence of Pair, got {type(pairs).__name__}")
    for k, p in enumerate(pairs):
        if not isinstance(p, Pair):
            raise TypeError(f"pairs[{k}] must be a Pair, got {type(p).__name__}")


# ----------------------------------------------------------------------------------------------
# Shift-Att
# ----------------------------------------------------------------------------------------------


def decoder_cross_attention(model, pairs: Sequence[Pair], src_vocab, tgt_vocab, *, bs: int = 250) -> list[np.ndarray]:
    """Every decoder layer's and head's cross-attention with the reference fed in (teacher forcing).

    Args:
        model: a :class:`attnlab.models.transformer.Transformer` (anything with its ``attention_maps``).
        pairs: the sentence pairs.
        src_vocab, tgt_vocab: the model's vocabularies.
        bs: sentences per batch.

    Returns:
        per pair a ``(N, H, T + 1, S)`` float array: row ``r`` is the decoder step whose input is
        ``<bos>`` (``r = 0``) or target token ``r - 1``; the ``<eos>`` column of the source is dropped
        (as :func:`attnlab.models.decoding.forced_attention` does), so rows sum to at most 1.

    Raises:
        TypeError: a model without ``attention_maps`` (an RNN: it has one attention, read it with
            :func:`attnlab.models.decoding.forced_attention`); pairs that are not :class:`Pair`.
        ValueError: no pairs; ``bs < 1``.
    """
    if not callable(getattr(model, "attention_maps", None)):
        raise TypeError(
            f"decoder_cross_attention needs a Transformer (a model with attention_maps), got {type(model).__name__}"
        )
    _check_pairs(pairs, "decoder_cross_attention")
    bs = check_positive_int("bs", bs)
    device = next(model.parameters()).device
    items = encode_pairs(pairs, src_vocab, tgt_vocab)
    out: list[np.ndarray] = []
    for start in range(0, len(items), bs):
        src, tgt_in, _ = collate(items[start : start + bs])  # (B, S+1), (B, T+1)
        cross = model.attention_maps(src.to(device), tgt_in.to(device))["cross"]  # (B, N, H, T+1, S+1)
        for row, pair in enumerate(pairs[start : start + bs]):
            steps, words = len(pair.tgt) + 1, len(pair.src)
            out.append(cross[row, :, :, :steps, :words].float().cpu().numpy())  # (N, H, T+1, S)
    return out


def induce_alignment_maps(
    stacks: Sequence[np.ndarray], *, layer: int | None = None, head: int | None = None, shift: bool = True
) -> list[np.ndarray]:
    """Alignment maps of one layer (one head or the mean of all), naive or shifted by one step.

    With ``T + 1`` rows per stack (row ``r`` = the step whose input is token ``r - 1``):

    * naive (``shift=False``): target token ``t`` takes row ``t``, the step that *predicts* it;
    * Shift-Att (``shift=True``): target token ``t`` takes row ``t + 1``, the step that *reads* it
      (for the last token, the ``<eos>`` step).

    Args:
        stacks: per pair a ``(N, H, T + 1, S)`` array from :func:`decoder_cross_attention`.
        layer: decoder layer in ``[0, N)``; ``None`` = the last (the one ``forward(return_attention=True)``
            reports).
        head: one head in ``[0, H)``; ``None`` = the mean over heads.
        shift: read one step later (Chen et al. 2020).

    Returns:
        per pair a ``(T, S)`` array, ready for :func:`attnlab.data.metrics.alignment_error_rate`.

    Raises:
        ValueError: a stack that is not 4-D with at least 2 rows; layers or heads that differ
            between stacks; ``layer`` or ``head`` out of range.
        TypeError: ``shift`` not a bool; ``layer``/``head`` not ints.
    """
    if not isinstance(shift, bool):
        raise TypeError(f"shift must be a bool, got {type(shift).__name__}")
    if isinstance(stacks, np.ndarray) or not isinstance(stacks, Sequence) or not stacks:
        raise ValueError("stacks must be a non-empty list of (N, H, T+1, S) arrays, one per pair")
    shape0 = np.shape(stacks[0])
    for k, a in enumerate(stacks):
        shape = np.shape(a)
        if len(shape) != 4 or shape[2] < 2:
            raise ValueError(f"stacks[{k}] must be (N, H, T+1 >= 2, S), got shape {shape}")
        if shape[:2] != shape0[:2]:
            raise ValueError(f"stacks[{k}] has (N, H) = {shape[:2]}, stacks[0] has {shape0[:2]}: one model per call")
    n_layers, n_heads = shape0[:2]
    layer = n_layers - 1 if layer is None else check_int("layer", layer, minimum=0)
    if layer >= n_layers:
        raise ValueError(f"layer must be in [0, {n_layers}) (the decoder has {n_layers} layers), got {layer}")
    if head is not None and check_int("head", head, minimum=0) >= n_heads:
        raise ValueError(f"head must be in [0, {n_heads}) or None (mean over heads), got {head}")
    first = 1 if shift else 0
    out = []
    for a in stacks:
        a = np.asarray(a)
        one = a[layer].mean(axis=0) if head is None else a[layer, head]  # (T+1, S)
        T = one.shape[0] - 1
        out.append(one[first : first + T])  # (T, S)
    return out


def shift_att(
    model,
    pairs: Sequence[Pair],
    src_vocab,
    tgt_vocab,
    *,
    layer: int | None = None,
    head: int | None = None,
    shift: bool = True,
) -> list[np.ndarray]:
    """Shift-Att alignment maps of a Transformer: cross-attention read at the step whose input is the token.

    Args:
        model, pairs, src_vocab, tgt_vocab: as :func:`decoder_cross_attention`.
        layer, head, shift: as :func:`induce_alignment_maps` (``shift=False`` gives the naive maps).

    Returns:
        per pair a ``(T, S)`` array.
    """
    stacks = decoder_cross_attention(model, pairs, src_vocab, tgt_vocab)
    return induce_alignment_maps(stacks, layer=layer, head=head, shift=shift)


def _scores(maps: list[np.ndarray], pairs: Sequence[Pair]) -> dict[str, float]:
    agree = alignment_agreement(maps, pairs)
    return {
        "aer": round(alignment_error_rate(maps, pairs), 4),
        "align_content": round(agree["align_content"], 4),
        "align_all": round(agree["align_all"], 4),
    }


def shift_att_report(model, pairs: Sequence[Pair], src_vocab, tgt_vocab) -> list[dict]:
    """AER and alignment agreement of every decoder layer, heads averaged and one by one, naive vs shifted.

    Args:
        model, pairs, src_vocab, tgt_vocab: as :func:`decoder_cross_attention` (pairs with gold links).

    Returns:
        one row per (layer, head): ``{"layer": i, "head": "mean" or j, "naive": {...}, "shift": {...}}``,
        each inner dict holding ``aer``, ``align_content`` and ``align_all`` (see :mod:`attnlab.training.evaluate`).
    """
    stacks = decoder_cross_attention(model, pairs, src_vocab, tgt_vocab)
    n_layers, n_heads = np.shape(stacks[0])[:2]
    rows = []
    for layer in range(n_layers):
        for head in (None, *range(n_heads)):
            row: dict = {"layer": layer, "head": "mean" if head is None else head}
            for name, shift in (("naive", False), ("shift", True)):
                maps = induce_alignment_maps(stacks, layer=layer, head=head, shift=shift)
                row[name] = _scores(maps, pairs)
            rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------
# adversarial attention
# ----------------------------------------------------------------------------------------------


def jensen_shannon(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (natural log, so at most ``ln 2``) between distributions along the last dim.

    ``JSD(p, q) = KL(p || m) / 2 + KL(q || m) / 2`` with ``m = (p + q) / 2``; zeros count as ``0 log 0 = 0``.

    Args:
        p, q: ``(..., K)`` non-negative tensors of one shape, rows summing to 1.

    Returns:
        ``(...)`` divergences.

    Raises:
        TypeError, ValueError: not float tensors of one shape.
    """
    check_float_tensor("p", p)
    check_float_tensor("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have one shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    m = (p + q) / 2  # (..., K)
    # clamped logs: where a weight is 0 its term is 0 * finite = 0, and so is its gradient
    log_m = m.clamp_min(1e-30).log()  # (..., K)
    kl_p = (p * (p.clamp_min(1e-30).log() - log_m)).sum(-1)  # (...)
    kl_q = (q * (q.clamp_min(1e-30).log() - log_m)).sum(-1)  # (...)
    return (kl_p + kl_q) / 2  # (...)


def total_variation(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total-variation distance ``sum |p - q| / 2`` along the last dim (in ``[0, 1]`` for distributions).

    Raises:
        TypeError, ValueError: not float tensors of one shape.
    """
    check_float_tensor("p", p)
    check_float_tensor("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have one shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    return (p - q).abs().sum(-1) / 2  # (...)


@contextlib.contextmanager
def replaced_attention(model, logits: torch.Tensor) -> Iterator:
    """Inside the block, decoding step ``t`` of the RNN attends with ``softmax(logits[:, t])`` over the real source.

    The model's own scores are not computed; everything else (decoder state, input feeding, output
    layer) runs as usual, so gradients flow from the outputs back into ``logits``. Like
    :func:`attnlab.training.explain.uniform_attention`, the hook is an instance attribute that shadows
    ``model._attend`` and is removed when the block ends, also when it raises.

    Args:
        model: a :class:`attnlab.models.rnn.Seq2SeqRNN` with plain global soft attention.
        logits: ``(B, T', S + 1)`` float logits, one row per decoding step (``T' >=`` the steps the
            block runs), over the source positions including ``<eos>``; padded positions are masked out.

    Raises:
        TypeError: not a Seq2SeqRNN; ``logits`` not a float tensor.
        ValueError: a model without attention or with a variant; ``logits`` not 3-D. Inside the
            block, a decode whose batch or source length differs from ``logits``, or that runs more
            steps than ``logits`` has rows.
    """
    check_plain_soft_attention(model, "replaced_attention")
    check_float_tensor("logits", logits, dims=3, shape_text="(B, T, S)")
    B, T, S = logits.shape

    def _replaced(memory, t):
        states, mask = memory["states"], memory["mask"]  # (B, S, H), (B, S)
        if tuple(mask.shape) != (B, S):
            raise ValueError(
                f"replaced_attention: logits are for (B, S) = {(B, S)}, but the model decodes a batch of "
                f"(B, S) = {tuple(mask.shape)}"
            )
        if t >= T:
            raise ValueError(f"replaced_attention: logits have {T} steps, but decoding reached step t={t}")
        return masked_softmax(logits[:, t].to(states.dtype), mask)  # (B, S)

    with attention_hook(model, _replaced):
        yield model


ADVERSARY_TARGETS = ("model", "gold")
_HINGE = 0.7  # the penalty starts at 0.7 epsilon, so that iterates stay inside the constraint more often
_PULLBACK = 0.5  # how far an infeasible sentence's logits go back towards its best feasible ones


@dataclass(frozen=True)
class AdversarialAttention:
    """What :func:`adversarial_attention` found, per pair (``T + 1`` decoding steps, ``S + 1`` source positions).

    Attributes:
        original: ``(T + 1, S + 1)`` the model's own attention.
        adversarial: ``(T + 1, S + 1)`` the replacement kept (the original where no feasible one was found).
        jsd: ``(T + 1,)`` Jensen-Shannon divergence of each step's replacement from the original.
        tvd: ``(T + 1,)`` total-variation distance of each step's output distribution from the original.
        moved: per pair, whether a feasible replacement other than the original was found.
        epsilon, away_from, steps: the search's settings.
    """

    original: list[np.ndarray]
    adversarial: list[np.ndarray]
    jsd: list[np.ndarray]
    tvd: list[np.ndarray]
    moved: list[bool]
    epsilon: float
    away_from: str
    steps: int


def _gain(attn: torch.Tensor, orig: torch.Tensor, gold: torch.Tensor, away_from: str) -> torch.Tensor:
    """``(B, T+1)`` what the adversary maximises per step: the JSD from the original, or minus the gold mass."""
    if away_from == "model":
        return jensen_shannon(attn, orig)  # (B, T+1)
    return -(attn * (gold > 0)).sum(-1)  # (B, T+1): weight left on the sure links, to be taken away


def adversarial_attention(
    model,
    pairs: Sequence[Pair],
    src_vocab,
    tgt_vocab,
    *,
    epsilon: float = 0.01,
    away_from: str = "model",
    steps: int = 100,
    lr: float = 0.3,
    penalty: float = 30.0,
    noise: float = 0.1,
    seed: int = 0,
    bs: int = 32,
) -> AdversarialAttention:
    """Jain & Wallace's adversarial attention for a seq2seq RNN: far from the model's, same outputs.

    For every sentence, free logits ``z (T + 1, S + 1)`` (one row per decoding step) replace the
    attention (:func:`replaced_attention`), all steps at once with the reference fed in. Starting
    from the model's own attention plus Gaussian noise (at ``z = log a`` the JSD's gradient is 0),
    ``steps`` Adam updates minimise ``-sum_t gain_t + penalty * sum_t max(0, TVD_t - 0.7 epsilon)``,
    where ``gain_t`` is the JSD from the original attention (``away_from="model"``) or minus the
    weight on the gold sure links (``away_from="gold"``) and ``TVD_t`` compares step ``t``'s output
    distribution with the original's. A penalty alone does not keep the constraint, so after every
    update each sentence keeps its best replacement among those whose steps *all* have
    ``TVD <= epsilon`` (the model's own attention is the fallback, so the result always satisfies
    it), and a sentence whose iterate broke the constraint is pulled halfway back towards that
    best point. The search gives a lower bound on how far the attention can move. The model is
    frozen: no parameter changes and no parameter gradients are accumulated.

    Args:
        model: a :class:`attnlab.models.rnn.Seq2SeqRNN` with plain global soft attention.
        pairs: sentence pairs (with gold links for ``away_from="gold"``).
        src_vocab, tgt_vocab: the model's vocabularies.
        epsilon: the largest total-variation distance allowed at any step, in ``(0, 1)``.
        away_from: ``"model"`` or ``"gold"`` (:data:`ADVERSARY_TARGETS`).
        steps: Adam updates (>= 1).
        lr: Adam learning rate (> 0).
        penalty: weight of the constraint's hinge (> 0).
        noise: standard deviation of the starting noise on the logits (> 0).
        seed: seed of that noise.
        bs: sentences optimised together (sentences do not interact: the batch only saves time).

    Returns:
        an :class:`AdversarialAttention`.

    Raises:
        TypeError, ValueError: a model this hook does not fit; bad settings; no pairs;
            ``away_from="gold"`` with pairs without gold links.
    """
    check_plain_soft_attention(model, "adversarial_attention")
    _check_pairs(pairs, "adversarial_attention")
    eps = check_float("epsilon", epsilon, strict=True)
    if eps >= 1:
        raise ValueError(f"epsilon must be in (0, 1) (a total-variation distance), got {epsilon}")
    check_choice("away_from", away_from, ADVERSARY_TARGETS)
    steps = check_positive_int("steps", steps)
    lr = check_float("lr", lr, strict=True)
    penalty = check_float("penalty", penalty, strict=True)
    noise = check_float("noise", noise, strict=True)
    check_int("seed", seed)
    bs = check_positive_int("bs", bs)
    if away_from == "gold" and any(p.align is None for p in pairs):
        raise ValueError("away_from='gold' needs pairs with gold links (a pair has align=None)")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    found: dict[str, list] = {"original": [], "adversarial": [], "jsd": [], "tvd": [], "moved": []}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(pairs), bs):
            chunk = pairs[start : start + bs]
            part = _search(model, chunk, src_vocab, tgt_vocab, eps, away_from, steps, lr, penalty, noise, gen, device)
            for key, values in part.items():
                found[key] += values
    finally:
        model.train(was_training)
    return AdversarialAttention(**found, epsilon=eps, away_from=away_from, steps=steps)


def _search(model, pairs, src_vocab, tgt_vocab, eps, away_from, steps, lr, penalty, noise, gen, device) -> dict:
    """One batch of :func:`adversarial_attention`; returns its per-pair lists."""
    src, tgt_in, tgt_out = (x.to(device) for x in collate(encode_pairs(pairs, src_vocab, tgt_vocab)))  # (B, *)
    B, S = src.shape
    T1 = tgt_in.shape[1]
    src_keep = (src != PAD).unsqueeze(1)  # (B, 1, S+1)
    step_keep = (tgt_out != PAD).float()  # (B, T+1)
    gold = torch.zeros(B, T1, S, device=device)  # (B, T+1, S+1)
    if away_from == "gold":
        for b, pair in enumerate(pairs):
            g = gold_attention(pair)  # (T_b+1, S_b+1)
            gold[b, : g.shape[0], : g.shape[1]] = g
    with torch.no_grad():
        memory = model.encode(src)
        logits0, orig = model.decode(memory, tgt_in, return_attention=True)  # (B, T+1, V), (B, T+1, S+1)
        p0 = torch.softmax(logits0.float(), -1)  # (B, T+1, V)

    def evaluate(z: torch.Tensor):
        with replaced_attention(model, z):
            logits, attn = model.decode(memory, tgt_in, return_attention=True)  # (B, T+1, V), (B, T+1, S+1)
        tvd = total_variation(torch.softmax(logits.float(), -1), p0) * step_keep  # (B, T+1)
        gain = _gain(attn.float(), orig.float(), gold, away_from) * step_keep  # (B, T+1)
        return attn, tvd, gain

    z_orig = orig.clamp_min(1e-30).log().masked_fill(~src_keep, 0.0)  # (B, T+1, S+1): softmax gives orig back
    best_z = z_orig.clone()  # (B, T+1, S+1)
    with torch.no_grad():
        _, tvd, gain = evaluate(z_orig)
    best = torch.where(tvd.amax(1) <= eps, gain.sum(1), torch.full_like(gain[:, 0], -math.inf))  # (B,)
    moved = torch.zeros(B, dtype=torch.bool, device=device)  # (B,)
    start = z_orig + noise * torch.randn(z_orig.shape, generator=gen).to(device)  # (B, T+1, S+1)
    z = start.masked_fill(~src_keep, 0.0).requires_grad_(True)  # (B, T+1, S+1)
    opt = torch.optim.Adam([z], lr=lr)
    for i in range(steps + 1):
        _, tvd, gain = evaluate(z)
        with torch.no_grad():
            score = gain.sum(1)  # (B,)
            feasible = tvd.amax(1) <= eps  # (B,)
            better = feasible & (score > best)  # (B,)
            best = torch.where(better, score, best)  # (B,)
            best_z[better] = z.detach()[better]
            moved |= better
        if i == steps:
            break
        loss = -gain.sum() + penalty * (torch.relu(tvd - _HINGE * eps) * step_keep).sum()
        (grad,) = torch.autograd.grad(loss, [z])  # only z: the frozen model accumulates no gradients
        z.grad = grad
        opt.step()
        with torch.no_grad():
            # a sentence that broke the constraint restarts halfway back towards its best feasible point
            z[~feasible] = best_z[~feasible] + _PULLBACK * (z[~feasible] - best_z[~feasible])
    with torch.no_grad():
        adv, tvd, _ = evaluate(best_z)  # (B, T+1, S+1), (B, T+1)
        jsd = jensen_shannon(adv.float(), orig.float())  # (B, T+1)
    out: dict[str, list] = {"original": [], "adversarial": [], "jsd": [], "tvd": [], "moved": []}
    for b, pair in enumerate(pairs):
        steps_b, pos_b = len(pair.tgt) + 1, len(pair.src) + 1
        out["original"].append(orig[b, :steps_b, :pos_b].float().cpu().numpy())  # (T+1, S+1)
        out["adversarial"].append(adv[b, :steps_b, :pos_b].float().cpu().numpy())  # (T+1, S+1)
        out["jsd"].append(jsd[b, :steps_b].cpu().numpy())  # (T+1,)
        out["tvd"].append(tvd[b, :steps_b].cpu().numpy())  # (T+1,)
        out["moved"].append(bool(moved[b]))
    return out


def _mean(xs) -> float:
    return round(float(np.mean(xs)), 4) if len(xs) else float("nan")


def adversarial_summary(found: AdversarialAttention, pairs: Sequence[Pair]) -> dict:
    """Score an adversarial search against the gold links (content tokens with a sure link).

    Argmaxes run over all ``S + 1`` positions: a weight moved onto ``<eos>`` has left the gold links.

    Args:
        found: from :func:`adversarial_attention` on these ``pairs``.
        pairs: the same pairs, with gold links and content flags.

    Returns:
        dict with ``sentences``, ``content_tokens``, ``moved_sentences`` (share with a replacement other
        than the original), ``mean_jsd`` (all target tokens) and ``mean_jsd_content``, ``max_tvd`` (every
        step, ``<eos>`` included), ``off_gold_original`` / ``off_gold_adversarial`` (share of content
        tokens whose argmax is not a sure link), ``left_gold`` (of the content tokens whose original
        argmax was on a sure link, the share whose adversarial argmax is not), ``gold_mass_original``
        / ``gold_mass_adversarial`` (mean weight on the sure links), ``aer_original`` /
        ``aer_adversarial`` (:func:`attnlab.data.metrics.alignment_error_rate` of the ``(T, S)`` maps),
        ``epsilon`` and ``away_from``.

    Raises:
        ValueError: pairs without gold links or content flags, or that do not match ``found``.
    """
    if not isinstance(found, AdversarialAttention):
        raise TypeError(f"found must be an AdversarialAttention, got {type(found).__name__}")
    _check_pairs(pairs, "adversarial_summary")
    if len(pairs) != len(found.original):
        raise ValueError(f"found holds {len(found.original)} sentences but {len(pairs)} pairs were given")
    jsd_all, jsd_content, off0, off1, left, mass0, mass1 = [], [], [], [], [], [], []
    for k, (pair, a0, a1, jsd) in enumerate(zip(pairs, found.original, found.adversarial, found.jsd, strict=True)):
        if pair.align is None or pair.content is None:
            raise ValueError(f"pairs[{k}] has no gold links or content flags")
        if a0.shape != (len(pair.tgt) + 1, len(pair.src) + 1):
            raise ValueError(f"found.original[{k}] has shape {a0.shape}, pairs[{k}] needs (T+1, S+1)")
        jsd_all += list(jsd[: len(pair.tgt)])
        for t, (links, is_content) in enumerate(zip(pair.align, pair.content, strict=True)):
            if not (is_content and links):
                continue
            on0, on1 = int(a0[t].argmax()) in links, int(a1[t].argmax()) in links
            jsd_content.append(jsd[t])
            off0.append(not on0)
            off1.append(not on1)
            if on0:
                left.append(not on1)
            mass0.append(float(a0[t, list(links)].sum()))
            mass1.append(float(a1[t, list(links)].sum()))
    words = [a[: len(p.tgt), : len(p.src)] for a, p in zip(found.original, pairs, strict=True)]
    words_adv = [a[: len(p.tgt), : len(p.src)] for a, p in zip(found.adversarial, pairs, strict=True)]
    return {
        "sentences": len(pairs),
        "content_tokens": len(off0),
        "moved_sentences": _mean(found.moved),
        "mean_jsd": _mean(jsd_all),
        "mean_jsd_content": _mean(jsd_content),
        "max_tvd": round(float(max(np.max(t) for t in found.tvd)), 5),
        "off_gold_original": _mean(off0),
        "off_gold_adversarial": _mean(off1),
        "left_gold": _mean(left),
        "gold_mass_original": _mean(mass0),
        "gold_mass_adversarial": _mean(mass1),
        "aer_original": round(alignment_error_rate(words, pairs), 4),
        "aer_adversarial": round(alignment_error_rate(words_adv, pairs), 4),
        "epsilon": found.epsilon,
        "away_from": found.away_from,
    }


# ----------------------------------------------------------------------------------------------
# variance across seeds
# ----------------------------------------------------------------------------------------------


def _row_distributions(a: np.ndarray) -> torch.Tensor:
    """``(T, S)`` weights -> rows renormalised over the source words (the ``<eos>`` column is gone)."""
    rows = torch.as_tensor(np.asarray(a, dtype=np.float64))  # (T, S)
    return rows / rows.sum(-1, keepdim=True).clamp_min(1e-30)  # (T, S)


def seed_spread(maps_by_seed: Sequence[Sequence[np.ndarray]], pairs: Sequence[Pair]) -> dict:
    """How much the attention of models that differ only in their seed differs, on the same sentences.

    Args:
        maps_by_seed: one list per seed (at least two), each holding per pair a ``(T, S)`` array
            (e.g. :func:`attnlab.models.decoding.forced_attention` of that seed's model on ``pairs``).
        pairs: the pairs, with gold alignments.

    Returns:
        ``{"seeds": K, "tokens": n, "mean_jsd": ..., "same_top": ..., "same_top_content": ...,
        "all_top_on_gold": ..., "aer": [per seed], "aer_spread": max - min}``: ``mean_jsd`` is the
        Jensen-Shannon divergence (at most ``ln 2``) between two seeds' rows, averaged over every
        target token and every pair of seeds; ``same_top`` is the share of target tokens whose most
        attended source word is the same for all seeds (``same_top_content``: content tokens with a
        gold link only); ``all_top_on_gold`` the share of those content tokens where every seed's
        peak is a gold link.

    Raises:
        ValueError: fewer than two seeds, lists of another length than ``pairs``, maps of the
            wrong shape, or pairs without gold alignments.
    """
    _check_pairs(pairs, "seed_spread")
    if isinstance(maps_by_seed, (str, bytes)) or len(maps_by_seed) < 2:
        raise ValueError(f"maps_by_seed needs the maps of at least two seeds, got {len(maps_by_seed)}")
    aers = [alignment_error_rate(maps, pairs) for maps in maps_by_seed]  # also checks shapes and gold
    jsd, same, same_content, on_gold = [], [], [], []
    K = len(maps_by_seed)
    for i, pair in enumerate(pairs):
        rows = torch.stack([_row_distributions(maps[i]) for maps in maps_by_seed])  # (K, T, S)
        for a in range(K):
            for b in range(a + 1, K):
                jsd.append(jensen_shannon(rows[a], rows[b]))  # (T,)
        tops = rows.argmax(-1)  # (K, T)
        agree = (tops == tops[0]).all(0)  # (T,)
        same.append(agree)
        for t, gold in enumerate(pair.align):
            if gold and pair.content[t]:
                same_content.append(bool(agree[t]))
                on_gold.append(all(int(k) in gold for k in tops[:, t]))
    mean = lambda xs: float(np.mean(xs)) if len(xs) else float("nan")
    return {
        "seeds": K,
        "tokens": int(sum(len(p.tgt) for p in pairs)),
        "mean_jsd": float(torch.cat(jsd).mean()),
        "same_top": float(torch.cat(same).float().mean()),
        "same_top_content": mean(same_content),
        "all_top_on_gold": mean(on_gold),
        "aer": [round(x, 4) for x in aers],
        "aer_spread": round(max(aers) - min(aers), 4),
    }


def check_plain_soft_attention(model, what: str) -> None:
    """Refuse a model whose attention :func:`attention_hook` cannot replace.

    Raises:
        TypeError: not a :class:`attnlab.models.rnn.Seq2SeqRNN`.
        ValueError: no attention, or a local window or a lesson-07 switch that keeps its own state.
    """

    if not isinstance(model, Seq2SeqRNN):
        raise TypeError(f"{what} needs a Seq2SeqRNN, got {type(model).__name__}")
    c = model.config
    if c.attention is None:
        raise ValueError(f"{what} needs a Seq2SeqRNN with attention (config.attention is None)")
    if c.local or c.coverage or c.prev_conv or c.monotonic or c.hard or c.sources > 1:
        raise ValueError(
            f"{what} is defined for plain global soft attention over one source; this model has a local "
            f"window, several sources or a lesson-07 switch (local={c.local!r}, coverage={c.coverage}, "
            f"prev_conv={c.prev_conv}, monotonic={c.monotonic}, hard={c.hard!r}, sources={c.sources})"
        )


@contextlib.contextmanager
def attention_hook(model, weights) -> Iterator:
    """Inside the block, the RNN's attention weights at step ``t`` are ``weights(memory, t)`` ``(B, S)``.

    Only the weights change: the context is still their average of the encoder states, and the
    decoder, input feeding and output layer run as usual. The hook is an instance attribute that
    shadows ``model._attend``; it is removed when the block ends, also when it raises, and a hook
    that was already in place (nested blocks) comes back. Check the model first with
    :func:`check_plain_soft_attention`.
    """

    def _hooked(query, memory, t, extras=()):
        attn = weights(memory, t)  # (B, S)
        context = torch.bmm(attn.unsqueeze(1), memory["states"]).squeeze(1)  # (B, H)
        return context, attn, ()

    before = vars(model).get("_attend")
    model._attend = _hooked  # an instance attribute shadows the method until it is deleted
    try:
        yield model
    finally:
        if before is None:
            del model._attend
        else:
            model._attend = before


@contextlib.contextmanager
def uniform_attention(model) -> Iterator:
    """Inside the block, the RNN model attends uniformly: every real source position gets ``1 / S_b``.

    Jain & Wallace's (2019) first test: if decoding with uniform weights gives (nearly) the same
    output, the learned weights cannot be what the prediction rests on. Only the weights change;
    the decoder still reads a context vector (the mean of the encoder states).

    Args:
        model: a :class:`attnlab.models.rnn.Seq2SeqRNN` with plain soft attention (no local window and no
            lesson-07 switch that keeps attention state).

    Raises:
        TypeError, ValueError: as :func:`check_plain_soft_attention`.
    """
    check_plain_soft_attention(model, "uniform_attention")

    def _uniform(memory, t):
        mask = memory["mask"].to(memory["states"].dtype)  # (B, S)
        return mask / mask.sum(-1, keepdim=True)  # (B, S)

    with attention_hook(model, _uniform):
        yield model


def leave_one_out_importance(model, pair: Pair, src_vocab, tgt_vocab) -> torch.Tensor:
    """How much each source word matters to each reference token: the log-probability lost without it.

    ``I[t, j] = log p(y_t | y_<t, x) - log p(y_t | y_<t, x without word j)``, with the reference
    fed in (teacher forcing), eval mode, no gradients. Large means the prediction needed word ``j``.

    Args:
        model: a model whose ``forward(src, tgt_in)`` gives ``(B, T, V)`` logits.
        pair: one sentence pair (at least two source words).
        src_vocab, tgt_vocab: the model's vocabularies.

    Returns:
        ``(T, S)`` float tensor: ``T`` reference tokens (no ``<eos>``), ``S`` source words (no ``<eos>``).

    Raises:
        ValueError: a source of fewer than two words.
    """

    S = len(pair.src)
    if S < 2:
        raise ValueError(f"leave_one_out_importance needs a source of at least 2 words, got {S}")
    variants_ = [pair] + [Pair(pair.src[:j] + pair.src[j + 1 :], pair.tgt) for j in range(S)]
    src, tgt_in, tgt_out = collate(encode_pairs(variants_, src_vocab, tgt_vocab))  # (S+1, *) each
    device = next(model.parameters()).device
    with eval_mode(model), torch.no_grad():
        logits = model(src.to(device), tgt_in.to(device))  # (S+1, T+1, V)
    logp = torch.log_softmax(logits.float(), -1).gather(-1, tgt_out.to(device).unsqueeze(-1)).squeeze(-1)  # (S+1, T+1)
    T = len(pair.tgt)
    return (logp[0] - logp[1:])[:, :T].T.cpu()  # (T, S)


# ----------------------------------------------------------------------------------------------
# Jain & Wallace's permutation test and rank correlations; Koehn & Knowles's peak offsets
# ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def transformed_attention(model, transform) -> Iterator:
    """Inside the block, the RNN attends with ``transform(attn, t)`` ``(B, S)`` of its own weights at step ``t``.

    The model's scores and softmax run as usual; the context is then the average of the encoder
    states under the transformed weights, so everything downstream (decoder state, input feeding,
    output layer) sees them. Used for Jain & Wallace's permutation test (:func:`permutation_effect`)
    and for cutting the gradient at the attention (:func:`gradient_importance`). Removed when the
    block ends, also when it raises.

    Raises:
        TypeError, ValueError: as :func:`check_plain_soft_attention`.
    """
    check_plain_soft_attention(model, "transformed_attention")
    own = Seq2SeqRNN._attend.__get__(model)

    def _hooked(query, memory, t, extras=()):
        _, attn, rest = own(query, memory, t, extras)  # (B, H), (B, S)
        new = transform(attn, t)  # (B, S)
        context = torch.bmm(new.unsqueeze(1), memory["states"]).squeeze(1)  # (B, H)
        return context, new, rest

    before = vars(model).get("_attend")
    model._attend = _hooked
    try:
        yield model
    finally:
        if before is None:
            del model._attend
        else:
            model._attend = before


def permutation_effect(
    model, pair: Pair, src_vocab, tgt_vocab, *, permutations: int = 100, seed: int = 0
) -> torch.Tensor:
    """Jain & Wallace's (2019) permutation test for one sentence, one decoding step at a time.

    For every reference token ``y_t`` (teacher forcing) and each of ``permutations`` random
    permutations ``pi``, the weights of step ``t`` alone are shuffled over the source positions
    (``<eos>`` included), ``alpha'_t = alpha_t[pi]``, every other step keeps its own, and the change of
    step ``t``'s output distribution is measured as the total variation distance
    ``TVD(p_t, p'_t) = 1/2 sum_v |p_t(v) - p'_t(v)|``. Jain & Wallace report the median change per
    instance; here an instance is a target token.

    Args:
        model: a :class:`attnlab.models.rnn.Seq2SeqRNN` with plain global soft attention.
        pair: one sentence pair (at least two source words).
        src_vocab, tgt_vocab: the model's vocabularies.
        permutations: permutations per token (Jain & Wallace use 100).
        seed: seed of the permutations.

    Returns:
        ``(T, permutations)`` float tensor of TVDs in ``[0, 1]``.

    Raises:
        TypeError, ValueError: a model :func:`check_plain_soft_attention` refuses; a source of fewer
            than two words; ``permutations < 1``.
    """
    check_plain_soft_attention(model, "permutation_effect")
    K = check_positive_int("permutations", permutations)
    if len(pair.src) < 2:
        raise ValueError(f"permutation_effect needs a source of at least 2 words, got {len(pair.src)}")
    T, S1 = len(pair.tgt), len(pair.src) + 1
    src, tgt_in, _ = collate(encode_pairs([pair], src_vocab, tgt_vocab))  # (1, S+1), (1, T+1)
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    perm = torch.argsort(torch.rand(T * K, S1, generator=gen), dim=-1).to(device)  # (T*K, S+1)
    row_step = torch.arange(T, device=device).repeat_interleave(K)  # (T*K,): row r permutes step r // K

    def _permute(attn, t):
        shuffled = attn.gather(1, perm)  # (T*K, S+1)
        return torch.where((row_step == t).unsqueeze(1), shuffled, attn)  # (T*K, S+1)

    with eval_mode(model), torch.no_grad():
        p0 = torch.softmax(model(src.to(device), tgt_in.to(device)).float(), -1)[0, :T]  # (T, V)
        with transformed_attention(model, _permute):
            src_r, tgt_r = src.to(device).expand(T * K, -1), tgt_in.to(device).expand(T * K, -1)  # (T*K, *)
            p1 = torch.softmax(model(src_r, tgt_r).float(), -1)  # (T*K, T+1, V)
    p1 = p1[torch.arange(T * K, device=device), row_step]  # (T*K, V): each row's own step
    return total_variation(p1, p0[row_step]).view(T, K).cpu()  # (T, K)


def gradient_importance(model, pair: Pair, src_vocab, tgt_vocab, *, detach_attention: bool = True) -> torch.Tensor:
    """Gradient importance of each source word for each reference token (Jain & Wallace 2019, Algorithm 1).

    ``g[t, j] = |grad_{e_j} log p(y_t | y_<t, x) . e_j|``: the derivative of the log-probability of
    the reference token with respect to the one-hot input of source word ``j``, taken at the word it
    holds (which is the gradient with respect to its embedding ``e_j`` dotted with ``e_j``). Jain &
    Wallace read the gradient of the predicted class; a translation step has a reference token, so
    its log-probability stands in. Like them (``detach_attention=True``) the gradient does not flow
    through the attention weights, only through the states they average.

    Args:
        model: a :class:`attnlab.models.rnn.Seq2SeqRNN` with plain global soft attention and a source
            embedding.
        pair: one sentence pair.
        src_vocab, tgt_vocab: the model's vocabularies.
        detach_attention: cut the gradient at the attention weights.

    Returns:
        ``(T, S)`` float tensor (no ``<eos>`` row or column), non-negative.

    Raises:
        TypeError, ValueError: a model :func:`check_plain_soft_attention` refuses.
    """
    check_plain_soft_attention(model, "gradient_importance")
    if not isinstance(detach_attention, bool):
        raise TypeError(f"detach_attention must be a bool, got {type(detach_attention).__name__}")
    T, S = len(pair.tgt), len(pair.src)
    src, tgt_in, tgt_out = collate(encode_pairs([pair], src_vocab, tgt_vocab))  # (1, S+1), (1, T+1)
    device = next(model.parameters()).device
    src, tgt_in, tgt_out = (x.to(device).expand(T, -1) for x in (src, tgt_in, tgt_out))  # (T, *): row t scores y_t
    captured: list[torch.Tensor] = []
    handle = model.src_emb.register_forward_hook(lambda mod, inp, out: captured.append(out))
    cut = contextlib.nullcontext() if not detach_attention else transformed_attention(model, lambda a, t: a.detach())
    try:
        with eval_mode(model), torch.enable_grad(), cut:
            logp = torch.log_softmax(model(src, tgt_in).float(), -1)  # (T, T+1, V)
            rows = torch.arange(T, device=device)
            picked = logp[rows, rows, tgt_out[rows, rows]]  # (T,): row t's log p(y_t)
            (grad,) = torch.autograd.grad(picked.sum(), [captured[0]])  # (T, S+1, E)
    finally:
        handle.remove()
    return (grad * captured[0].detach()).sum(-1).abs()[:, :S].cpu()  # (T, S)


def rank_agreement(attns: Sequence[np.ndarray], importances: Sequence[np.ndarray], pairs: Sequence[Pair]) -> dict:
    """How an attention row ranks the source words against an importance row, per content token with a gold link.

    Jain & Wallace (2019) report Kendall's tau between attention and gradient or leave-one-out
    importance (``scipy.stats.kendalltau``, tau-b: ties counted as ties); a token whose importance
    row is constant has no tau and is left out of ``kendall_tau``.

    Args:
        attns: per pair a ``(T, S)`` array of attention weights.
        importances: per pair a ``(T, S)`` array of importance (larger = more important).
        pairs: the pairs, with gold links and content flags.

    Returns:
        ``{"tokens", "kendall_tau" (mean), "tau_sd", "significant" (share with p < 0.05, of the tokens
        with a tau), "same_top" (the two argmaxes coincide), "attention_top_on_gold",
        "importance_top_on_gold"}``.

    Raises:
        ValueError: lists of different lengths, maps of the wrong shape, pairs without gold links.
    """
    _check_pairs(pairs, "rank_agreement")
    if not (len(attns) == len(importances) == len(pairs)):
        lengths = (len(attns), len(importances), len(pairs))
        raise ValueError(f"attns, importances and pairs differ in length: {lengths}")
    taus, ps, same, a_gold, i_gold = [], [], [], [], []
    for k, (a, imp, pair) in enumerate(zip(attns, importances, pairs, strict=True)):
        a, imp = np.asarray(a, dtype=np.float64), np.asarray(imp, dtype=np.float64)
        want = (len(pair.tgt), len(pair.src))
        if a.shape != want or imp.shape != want:
            raise ValueError(f"pairs[{k}] needs (T, S) = {want} maps, got {a.shape} and {imp.shape}")
        if pair.align is None or pair.content is None:
            raise ValueError(f"pairs[{k}] has no gold links or content flags")
        for t, (links, is_content) in enumerate(zip(pair.align, pair.content, strict=True)):
            if not (is_content and links):
                continue
            top_a, top_i = int(a[t].argmax()), int(imp[t].argmax())
            same.append(top_a == top_i)
            a_gold.append(top_a in links)
            i_gold.append(top_i in links)
            if np.ptp(imp[t]) > 0 and np.ptp(a[t]) > 0:
                res = kendalltau(a[t], imp[t])
                taus.append(float(res.statistic))
                ps.append(float(res.pvalue))
    return {
        "tokens": len(same),
        "kendall_tau": float(np.mean(taus)) if taus else float("nan"),
        "tau_sd": float(np.std(taus, ddof=1)) if len(taus) > 1 else float("nan"),
        "significant": float(np.mean(np.asarray(ps) < 0.05)) if ps else float("nan"),
        "same_top": float(np.mean(same)) if same else float("nan"),
        "attention_top_on_gold": float(np.mean(a_gold)) if a_gold else float("nan"),
        "importance_top_on_gold": float(np.mean(i_gold)) if i_gold else float("nan"),
    }


def gold_weight(attns: Sequence[np.ndarray], pairs: Sequence[Pair]) -> float:
    """Mean attention weight on the sure gold links, over the content tokens that have one.

    Koehn & Knowles (2017) call NMT attention *blurred*: weight spread beyond the aligned word. One
    minus this figure is the weight that went elsewhere. (Where the peak lands, on gold or one
    position off, is :func:`attnlab.course.lessons.peak_offsets`.)

    Raises:
        ValueError: lists of different lengths, maps of the wrong shape, pairs without gold links,
            or no content token with a gold link.
    """
    _check_pairs(pairs, "gold_weight")
    if len(attns) != len(pairs):
        raise ValueError(f"attns holds {len(attns)} maps but {len(pairs)} pairs were given")
    mass = []
    for k, (a, pair) in enumerate(zip(attns, pairs, strict=True)):
        a = np.asarray(a, dtype=np.float64)
        want = (len(pair.tgt), len(pair.src))
        if a.shape != want:
            raise ValueError(f"attns[{k}] has shape {a.shape}, pairs[{k}] needs (T, S) = {want}")
        if pair.align is None or pair.content is None:
            raise ValueError(f"pairs[{k}] has no gold links or content flags")
        mass += [float(a[t, list(links)].sum()) for t, (links, c) in enumerate(zip(pair.align, pair.content,
                                                                                  strict=True)) if c and links]
    if not mass:
        raise ValueError("no content token with a gold link in pairs")
    return float(np.mean(mass))
