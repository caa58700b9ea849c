"""Building blocks of the attention variants of lesson 07 (the gold-link measurements they are judged by live in
:mod:`attnlab.data.gold` and :mod:`attnlab.data.metrics`, the explanation tests in :mod:`attnlab.training.explain`).

The RNN attention model (:class:`attnlab.models.rnn.Seq2SeqRNN`) switches each variant on with one field of
its config; the computations live here as plain functions on tensors, so that each can be tested
against a hand-written reference:

* :func:`coverage_loss` -- See et al. (2017): ``sum_t sum_i min(a_t,i, c_t,i)`` with the coverage
  ``c_t = sum_{t' < t} a_t'``, the attention a step pays for looking again at covered words;
* :func:`undertranslation_loss` -- the under-translation term ``sum_j (1 - sum_t a_t,j)^2``
  (Xu et al. 2015's doubly stochastic attention; Cohn et al. 2016's global fertility with every
  fertility 1): the attention a source word is *missing* (or has too much of) over the sentence;
* :func:`alignment_loss` -- supervised attention: cross-entropy between the attention and the
  gold links (Liu et al. 2016; Mi et al. 2016), ignoring padding and tokens without a link;
* :func:`monotonic_attention` -- Raffel et al. (2017): the expected alignment of hard monotonic
  attention, by its recurrence or by the same recurrence as a parallel prefix scan;
* :func:`hard_monotonic_attention` -- the test-time decision: from the previous position, stop at
  the first source position whose selection probability is at least 1/2;
* :func:`gumbel_straight_through` -- hard attention (Xu et al. 2015) trained with the
  straight-through Gumbel-softmax (Jang et al. 2017): one-hot forward, soft gradient backward;
* :func:`annealed_temperature` -- the exponential schedule that lowers the Gumbel-softmax
  temperature during training, ``tau = max(tau_final, tau_0 exp(-r step))`` (Jang et al. 2017);
* :func:`reinforce_sample`, :func:`next_tokens`, :func:`sentence_log_likelihood` and
  :func:`reinforce_surrogate` -- hard attention trained with REINFORCE (Williams 1992; Xu et al.
  2015): sample a position, keep its log-probability, and weight the sum of those by the
  sentence's reward minus a moving-average baseline;
* :func:`hard_attention_gradients` -- why hard attention is hard to train: samples of the gradient
  that REINFORCE (Williams 1992, with a moving-average baseline) and the straight-through
  Gumbel-softmax give for one attention step, beside the exact gradient of the expected loss and
  the deterministic gradient of soft attention (its mean-field stand-in).

Shape legend
------------
B  batch size
T  target steps
S  source length (incl. ``<eos>``)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_float, check_float_tensor, check_positive_int, check_token_ids
from attnlab.data.vocab import EOS, PAD

__all__ = [
    "coverage_loss",
    "undertranslation_loss",
    "alignment_loss",
    "monotonic_attention",
    "hard_monotonic_attention",
    "gumbel_straight_through",
    "annealed_temperature",
    "reinforce_sample",
    "next_tokens",
    "sentence_log_likelihood",
    "reinforce_surrogate",
    "GRADIENT_ESTIMATORS",
    "hard_attention_gradients",
]


def _check_attn_and_mask(attn: torch.Tensor, tgt_keep: torch.Tensor | None) -> torch.Tensor:
    check_float_tensor("attn", attn, dims=3, shape_text="(B, T, S)")
    if tgt_keep is None:
        return torch.ones(attn.shape[:2], dtype=torch.bool, device=attn.device)  # (B, T)
    if not isinstance(tgt_keep, torch.Tensor) or tgt_keep.dtype != torch.bool or tgt_keep.shape != attn.shape[:2]:
        got = (tgt_keep.dtype, tuple(tgt_keep.shape)) if isinstance(tgt_keep, torch.Tensor) else type(tgt_keep)
        raise ValueError(f"tgt_keep must be a bool (B, T) = {tuple(attn.shape[:2])} tensor, got {got}")
    return tgt_keep


def coverage_loss(attn: torch.Tensor, tgt_keep: torch.Tensor | None = None) -> torch.Tensor:
    """See et al.'s coverage loss, averaged over the real target steps.

    Args:
        attn: ``(B, T, S)`` attention weights of every step.
        tgt_keep: ``(B, T)`` bool, True at real (non-padding) target steps; default all.

    Returns:
        scalar: ``sum_{t, i} min(a_t,i, c_t,i) / #real steps`` with ``c_t = sum_{t' < t} a_t'``
        (0 when no step looks twice at any source word).

    Raises:
        TypeError, ValueError: ``attn`` not a float ``(B, T, S)`` tensor; ``tgt_keep`` not a bool
            ``(B, T)`` tensor.
    """
    keep = _check_attn_and_mask(attn, tgt_keep)
    attn = attn * keep.unsqueeze(-1)  # (B, T, S): padded steps add no coverage
    cov = torch.cumsum(attn, dim=1) - attn  # (B, T, S) exclusive running sum
    per_step = torch.minimum(attn, cov).sum(-1)  # (B, T)
    return per_step[keep].sum() / keep.sum().clamp_min(1)


def undertranslation_loss(
    attn: torch.Tensor, src_keep: torch.Tensor, tgt_keep: torch.Tensor | None = None
) -> torch.Tensor:
    """The under-translation term, summed over source words and divided by the real target steps.

    ``sum_b sum_j (1 - sum_t a_b,t,j)^2 / #real steps`` over the real source positions ``j``: 0 when
    every source word receives exactly one unit of attention over the sentence, ``1`` for each word
    never looked at. Where See et al.'s :func:`coverage_loss` charges only attention *beyond* the
    first look (repeats), this term also charges the attention a word never got (drops) -- and, as
    Xu et al. (2015) and Cohn et al. (2016) wrote it, any total other than 1.

    Args:
        attn: ``(B, T, S)`` attention weights of every step.
        src_keep: ``(B, S)`` bool, True at real source positions (the ones attention may use).
        tgt_keep: ``(B, T)`` bool, True at real target steps; default all.

    Returns:
        scalar, ``>= 0``.

    Raises:
        TypeError, ValueError: ``attn`` not a float ``(B, T, S)`` tensor; a mask that does not fit.
    """
    keep = _check_attn_and_mask(attn, tgt_keep)
    if not isinstance(src_keep, torch.Tensor) or src_keep.dtype != torch.bool or src_keep.shape != (
        attn.shape[0],
        attn.shape[2],
    ):
        got = (src_keep.dtype, tuple(src_keep.shape)) if isinstance(src_keep, torch.Tensor) else type(src_keep)
        raise ValueError(f"src_keep must be a bool (B, S) = {(attn.shape[0], attn.shape[2])} tensor, got {got}")
    received = (attn * keep.unsqueeze(-1)).sum(1)  # (B, S): attention each source word got
    missing = ((1 - received) ** 2) * src_keep  # (B, S)
    return missing.sum() / keep.sum().clamp_min(1)


def alignment_loss(attn: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Cross-entropy between the attention and a gold distribution, averaged over the linked steps.

    Steps whose gold row is all zero (padding, ``<eos>``, a target word with no sure link) are
    left out: nothing says where their attention should go.

    Args:
        attn: ``(B, T, S)`` attention weights.
        gold: ``(B, T, S)`` gold distribution, rows summing to 1 or 0 (see :func:`gold_attention`).

    Returns:
        scalar ``-sum gold * log attn / #linked steps`` (0 when no step has a link).

    Raises:
        TypeError, ValueError: either is not a float tensor of the same ``(B, T, S)`` shape.
    """
    check_float_tensor("attn", attn, dims=3, shape_text="(B, T, S)")
    check_float_tensor("gold", gold, dims=3, shape_text="(B, T, S)")
    if gold.shape != attn.shape:
        raise ValueError(
            f"gold must have the attention's shape (B, T, S) = {tuple(attn.shape)}, got {tuple(gold.shape)}"
        )
    linked = gold.sum(-1) > 0  # (B, T)
    # the clamp keeps log(0) finite where the gold row is 0 (masked source positions)
    ce = -(gold * attn.clamp_min(1e-9).log()).sum(-1)  # (B, T)
    return ce[linked].sum() / linked.sum().clamp_min(1)


def monotonic_attention(p: torch.Tensor, prev: torch.Tensor, *, parallel: bool = True) -> torch.Tensor:
    """Raffel et al.'s expected monotonic alignment for one step.

    With selection probabilities ``p_t,j`` and the previous alignment ``a_{t-1}``,
    ``a_t,j = p_t,j * sum_{k <= j} a_{t-1},k * prod_{l=k}^{j-1} (1 - p_t,l)``: the read head
    starts where it stopped, moves right past each position it does not select, and stops at
    ``j``. The recurrence form is ``q_j = (1 - p_{j-1}) q_{j-1} + a_{t-1},j``, ``a_t,j = p_j q_j``.
    The parallel form runs that recurrence as a parallel prefix scan (Hillis & Steele, 1986): each
    step ``q_j = r_j q_{j-1} + a_{t-1},j`` (``r_j = 1 - p_{j-1}``) is an affine map, and
    ``ceil(log2 S)`` rounds, each composing every position's map with the one ``d = 1, 2, 4, ...``
    positions before it, give all ``q_j`` at once. It only multiplies factors ``1 - p`` and adds,
    as the recurrence does, so exact 0s and 1s and products far below ``1e-10`` need no care.
    (Raffel et al.'s closed form ``p * cumprod_excl(1 - p) * cumsum(a_{t-1} / cumprod_excl(1 - p))``
    divides by a product that underflows its ``1e-10`` clamp once positions already passed have
    ``p`` near 1: with ``p = (.9999, .9999, .9999, .5, .3)`` and the head on position 3 it gives
    0.005 where the recurrence gives 0.5.) Both forms agree to rounding for every ``p`` in
    ``[0, 1]``, and so do their gradients.

    Args:
        p: ``(B, S)`` selection probabilities in ``[0, 1]`` (0 at padding).
        prev: ``(B, S)`` previous expected alignment (one-hot at position 0 before the first step).
        parallel: the scan (``ceil(log2 S)`` vectorised rounds) instead of the loop over ``S``.

    Returns:
        ``(B, S)`` alignment; its sum is at most 1 (the rest ran past the end of the source).

    Raises:
        TypeError, ValueError: not float ``(B, S)`` tensors of one shape.
    """
    check_float_tensor("p", p, dims=2, shape_text="(B, S)")
    check_float_tensor("prev", prev, dims=2, shape_text="(B, S)")
    if prev.shape != p.shape:
        raise ValueError(f"prev must have the shape of p (B, S) = {tuple(p.shape)}, got {tuple(prev.shape)}")
    if parallel:
        # Position j holds the map x -> r x + c from q_{j-d} to q_j (q_{-1} = 0); a map for j < d
        # reaches back before the start, where the identity (r = 1, c = 0) stands in.
        r = torch.cat([torch.ones_like(p[:, :1]), 1 - p[:, :-1]], dim=1)  # (B, S): r_j = 1 - p_{j-1}
        c = prev  # (B, S)
        d = 1
        while d < p.size(1):
            c = c + r * F.pad(c[:, :-d], (d, 0), value=0.0)  # (B, S): q_j from q_{j-2d}, offset part
            r = r * F.pad(r[:, :-d], (d, 0), value=1.0)  # (B, S): product of the 2d factors
            d *= 2
        return p * c  # (B, S): c_j = q_j
    q = prev[:, 0]  # (B,)
    out = [p[:, 0] * q]
    for j in range(1, p.size(1)):
        q = (1 - p[:, j - 1]) * q + prev[:, j]  # (B,)
        out.append(p[:, j] * q)
    return torch.stack(out, dim=1)  # (B, S)


def hard_monotonic_attention(p: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """Test-time monotonic attention: a one-hot at the first ``j >= `` previous position with ``p_j >= 1/2``.

    Args:
        p: ``(B, S)`` selection probabilities (0 at padding, so padding is never chosen).
        prev: ``(B, S)`` previous attention (one-hot, or all zero once a row has run off the end).

    Returns:
        ``(B, S)`` one-hot rows; an all-zero row where no position from the previous one on is
        selected (the head ran off the end: the context is then zero, as in Raffel et al.).
    """
    check_float_tensor("p", p, dims=2, shape_text="(B, S)")
    check_float_tensor("prev", prev, dims=2, shape_text="(B, S)")
    if prev.shape != p.shape:
        raise ValueError(f"prev must have the shape of p (B, S) = {tuple(p.shape)}, got {tuple(prev.shape)}")
    S = p.size(1)
    pos = torch.arange(S, device=p.device)  # (S,)
    start = prev.argmax(dim=1)  # (B,)
    alive = prev.sum(dim=1) > 0  # (B,)
    ok = (p >= 0.5) & (pos.unsqueeze(0) >= start.unsqueeze(1)) & alive.unsqueeze(1)  # (B, S)
    first = torch.where(ok, pos.unsqueeze(0), torch.full_like(pos, S).unsqueeze(0)).min(dim=1).values  # (B,)
    return F.one_hot(first.clamp_max(S - 1), S).to(p.dtype) * (first < S).unsqueeze(1).to(p.dtype)  # (B, S)


def gumbel_straight_through(
    scores: torch.Tensor, mask: torch.Tensor, temperature: float, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Sample one source position per row; forward one-hot, backward the Gumbel-softmax gradient.

    ``y = softmax((scores + g) / tau)`` with Gumbel noise ``g``; the forward value is
    ``one_hot(argmax y)``, the gradient that of ``y`` (``hard - y.detach() + y``).

    Args:
        scores: ``(B, S)`` raw scores.
        mask: ``(B, S)`` bool, True at real source positions (every row needs one).
        temperature: ``tau > 0``; lower is closer to the hard sample and noisier in its gradient.
        generator: optional random generator (tests).

    Returns:
        ``(B, S)`` one-hot rows carrying the soft sample's gradient.

    Raises:
        ValueError: ``temperature <= 0``; a mask that does not fit.
    """
    tau = check_float("temperature", temperature, strict=True)
    check_float_tensor("scores", scores, dims=2, shape_text="(B, S)")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != scores.shape:
        raise ValueError(f"mask must be a bool (B, S) = {tuple(scores.shape)} tensor")
    u = torch.rand(scores.shape, generator=generator, dtype=scores.dtype).to(scores.device)  # (B, S)
    g = -torch.log(-torch.log(u.clamp(1e-10, 1 - 1e-7)))  # (B, S) Gumbel(0, 1)
    y = torch.softmax(((scores + g) / tau).masked_fill(~mask, float("-inf")), dim=-1)  # (B, S)
    hard = F.one_hot(y.argmax(-1), scores.size(1)).to(y.dtype)  # (B, S)
    return hard - y.detach() + y  # (B, S)


def annealed_temperature(step: float, total: int, *, start: float, final: float) -> float:
    """The Gumbel-softmax temperature at training step ``step`` of ``total``, lowered exponentially.

    ``tau = max(final, start * exp(-r * step))`` with ``r = ln(start / final) / (total - 1)``: the
    first step trains at ``start``, the last (``step = total - 1``) at ``final``, the middle one at
    their geometric mean (Jang et al. 2017 anneal ``tau = max(tau_min, tau_0 exp(-r t))``; here
    ``r`` is chosen so the schedule ends at ``final`` when the budget does).

    Args:
        step: the number of optimiser steps done, ``>= 0`` (a float for a share of a time budget:
            ``annealed_temperature(share, 2, ...)``).
        total: the budget's steps, an int ``>= 1`` (with 1 the only step trains at ``start``).
        start: ``tau_0 > 0``.
        final: ``0 < final <= start``.

    Returns:
        The temperature, a float in ``[final, start]``.

    Raises:
        TypeError, ValueError: ``step < 0``, ``total < 1``, temperatures not ``0 < final <= start``.
    """
    step = check_float("step", step)
    total = check_positive_int("total", total)
    start = check_float("start", start, strict=True)
    final = check_float("final", final, strict=True)
    if final > start:
        raise ValueError(f"final must be <= start (the temperature falls), got final={final} > start={start}")
    rate = math.log(start / final) / max(total - 1, 1)
    return max(final, start * math.exp(-rate * step))


def reinforce_sample(
    scores: torch.Tensor, mask: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample one source position per row from the masked softmax of ``scores``, for REINFORCE.

    The weights are the sample's one-hot and carry no gradient: the scores learn only through the
    log-probability of the sample (:func:`reinforce_surrogate`), as in Xu et al.'s (2015) hard
    attention.

    Args:
        scores: ``(B, S)`` raw scores.
        mask: ``(B, S)`` bool, True at the positions that may be picked (every row needs one).
        generator: optional random generator (tests); on the scores' device.

    Returns:
        ``(weights (B, S) one-hot without gradient, log_prob (B,) of the picked position, entropy (B,)
        of the distribution)``; the last two carry the scores' gradient.

    Raises:
        TypeError, ValueError: ``scores`` not float ``(B, S)``; a mask that does not fit or has an
            empty row.
    """
    check_float_tensor("scores", scores, dims=2, shape_text="(B, S)")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != scores.shape:
        raise ValueError(f"mask must be a bool (B, S) = {tuple(scores.shape)} tensor")
    if not bool(mask.any(-1).all()):
        raise ValueError("mask has a row without True: there is no position to sample")
    log_p = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # (B, S), -inf off the mask
    p = log_p.exp()  # (B, S), exactly 0 off the mask
    picked = torch.multinomial(p.detach(), 1, generator=generator)  # (B, 1)
    log_prob = log_p.gather(1, picked).squeeze(1)  # (B,)
    # 0 log 0 = 0 off the mask; filling log p first keeps the backward pass free of 0 * inf = NaN
    entropy = -(p * log_p.masked_fill(~mask, 0.0)).sum(-1)  # (B,)
    weights = F.one_hot(picked.squeeze(1), scores.size(1)).to(scores.dtype)  # (B, S)
    return weights, log_prob, entropy


def next_tokens(tgt_in: torch.Tensor) -> torch.Tensor:
    """The next-token targets of decoder inputs ``tgt_in = <bos> + tokens``: ``tokens + <eos>``.

    Row ``b`` of ``tgt_in`` is ``<bos> y_1 ... y_n`` then padding; its targets are
    ``y_1 ... y_n <eos>`` then padding -- what :func:`attnlab.data.loaders.collate` pairs with it.

    Args:
        tgt_in: ``(B, T)`` integer ids, right-padded with ``PAD``.

    Returns:
        ``(B, T)`` int64 targets, ``PAD`` where ``tgt_in`` is.
    """
    check_token_ids("tgt_in", tgt_in)
    keep = tgt_in != PAD  # (B, T)
    shifted = torch.cat([tgt_in[:, 1:], torch.full_like(tgt_in[:, :1], PAD)], dim=1)  # (B, T)
    last = keep & (shifted == PAD)  # (B, T): the last input of each row predicts <eos>
    return torch.where(last, torch.full_like(shifted, EOS), shifted).masked_fill(~keep, PAD).long()  # (B, T)


def sentence_log_likelihood(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per sentence, the mean log-probability per token of ``targets`` under ``logits``.

    ``r_b = (1 / n_b) sum_t log p(y_bt)`` over the ``n_b`` non-pad targets of row ``b``: the
    sentence's log-likelihood divided by its length, so that sentences of every length give
    rewards on one scale (one moving-average baseline serves them all).

    Args:
        logits: ``(B, T, V)`` floats.
        targets: ``(B, T)`` ids in ``[0, V)``, ``PAD`` where there is no token (each row at least one).

    Returns:
        ``(B,)`` float32 (computed in float32 whatever the logits' dtype).

    Raises:
        TypeError, ValueError: shapes that do not fit, ids outside ``[0, V)``, a row without targets.
    """
    check_float_tensor("logits", logits, dims=3, shape_text="(B, T, V)")
    check_token_ids("targets", targets, vocab_size=logits.size(2), device=logits.device)
    if targets.shape != logits.shape[:2]:
        raise ValueError(f"targets must be (B, T) = {tuple(logits.shape[:2])}, got {tuple(targets.shape)}")
    keep = targets != PAD  # (B, T)
    if not bool(keep.any(1).all()):
        raise ValueError("targets has a row without a real token: its likelihood is undefined")
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (logp * keep).sum(1) / keep.sum(1)  # (B,)


def reinforce_surrogate(
    log_probs: torch.Tensor,
    keep: torch.Tensor,
    reward: torch.Tensor,
    baseline: torch.Tensor | float,
    *,
    entropy: torch.Tensor | None = None,
    entropy_bonus: float = 0.0,
) -> torch.Tensor:
    """The loss whose gradient is the REINFORCE estimate for sampled hard attention.

    ``L = -(1/B) sum_b (r_b - b) sum_t log p(a_bt) - lambda_e * mean_{real b,t} H_bt``: the
    advantage ``r_b - b`` is a constant (no gradient), so ``-dL`` is ``(r - b) d log p(a)``, the
    score-function estimate of the gradient of the expected reward (Williams 1992); the optional
    entropy term (Xu et al. 2015) keeps the attention from collapsing too early.

    Args:
        log_probs: ``(B, T)`` log-probability of the position sampled at each step.
        keep: ``(B, T)`` bool, True at real target steps (padding steps add nothing).
        reward: ``(B,)`` reward of each sentence (e.g. :func:`sentence_log_likelihood`); detached here.
        baseline: scalar baseline ``b`` (a float or a 0-d tensor); detached here.
        entropy: ``(B, T)`` entropy of each step's attention (needed when ``entropy_bonus > 0``).
        entropy_bonus: ``lambda_e >= 0``.

    Returns:
        Scalar loss.

    Raises:
        TypeError, ValueError: shapes that do not fit, a negative bonus, a bonus without ``entropy``.
    """
    check_float_tensor("log_probs", log_probs, dims=2, shape_text="(B, T)")
    B, T = log_probs.shape
    if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool or keep.shape != log_probs.shape:
        raise ValueError(f"keep must be a bool (B, T) = {(B, T)} tensor like log_probs")
    check_float_tensor("reward", reward, dims=1, shape_text="(B,)")
    if reward.shape != (B,):
        raise ValueError(f"reward must be (B={B},), got {tuple(reward.shape)}")
    bonus = check_float("entropy_bonus", entropy_bonus)
    advantage = (reward - baseline).detach()  # (B,)
    loss = -(advantage * (log_probs * keep).sum(1)).mean()
    if bonus > 0:
        if entropy is None:
            raise ValueError("entropy_bonus > 0 needs the (B, T) entropy of each step")
        check_float_tensor("entropy", entropy, dims=2, shape_text="(B, T)")
        if entropy.shape != log_probs.shape:
            raise ValueError(f"entropy must be (B, T) = {(B, T)} like log_probs, got {tuple(entropy.shape)}")
        loss = loss - bonus * (entropy * keep).sum() / keep.sum().clamp_min(1)
    return loss


GRADIENT_ESTIMATORS = ("exact", "soft", "reinforce", "gumbel")


def hard_attention_gradients(
    scores: torch.Tensor,
    values: torch.Tensor,
    target: torch.Tensor,
    *,
    estimator: str,
    samples: int = 1,
    temperature: float = 1.0,
    baseline_decay: float = 0.9,
    baseline: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Gradient estimates, with respect to the scores, of one hard-attention step's expected loss.

    Hard attention picks ``j ~ p = softmax(scores)`` and reads ``v_j``; with the loss
    ``L(c) = ||c - target||^2`` the quantity training wants to lower is ``E_j[L(v_j)] = sum_j p_j L(v_j)``.
    Its gradient can be computed exactly here (``S`` terms), so every estimator can be judged
    against it:

    * ``"exact"`` -- ``d/ds sum_j p_j L(v_j)``; the same for every sample;
    * ``"soft"`` -- ``d/ds L(sum_j p_j v_j)``: soft attention's gradient, deterministic but of another
      loss (the loss of the mean context, not the mean loss: soft attention as a mean-field stand-in);
    * ``"reinforce"`` -- ``(L(v_j) - b) d/ds log p_j`` for a sampled ``j``, with ``b`` a moving
      average of the losses of the *earlier* samples (``b <- decay b + (1 - decay) L`` after each
      draw, starting at 0), so that ``b`` does not depend on the current draw: unbiased, but noisy,
      since a single draw says nothing about the positions it did not pick;
    * ``"gumbel"`` -- the straight-through Gumbel-softmax of :func:`gumbel_straight_through`: one-hot
      forward, the relaxed sample's gradient backward; lower variance, biased.

    Args:
        scores: ``(B, S)`` attention scores (every position takes part).
        values: ``(B, S, D)`` the vectors attention reads.
        target: ``(B, D)`` what the read vector should be.
        estimator: one of :data:`GRADIENT_ESTIMATORS`.
        samples: how many estimates to draw (>= 1).
        temperature: Gumbel-softmax temperature (``"gumbel"`` only; > 0).
        baseline_decay: moving-average decay of the REINFORCE baseline, in ``[0, 1)``.
        baseline: ``False``: REINFORCE without a baseline (``b = 0``), to show what the baseline buys.
        generator: random generator for the samples.

    Returns:
        ``(samples, B, S)`` gradient estimates.

    Raises:
        ValueError: an unknown estimator, shapes that do not fit, ``samples < 1``, a bad decay or temperature.
    """
    if estimator not in GRADIENT_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r}; expected one of {GRADIENT_ESTIMATORS}")
    check_float_tensor("scores", scores, dims=2, shape_text="(B, S)")
    B, S = scores.shape
    check_float_tensor("values", values, dims=3, shape_text="(B, S, D)")
    if values.shape[:2] != (B, S):
        raise ValueError(f"values must be (B={B}, S={S}, D), got {tuple(values.shape)}")
    check_float_tensor("target", target, dims=2, shape_text="(B, D)")
    if target.shape != (B, values.size(2)):
        raise ValueError(f"target must be (B={B}, D={values.size(2)}), got {tuple(target.shape)}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an int >= 1, got {samples!r}")
    check_float("temperature", temperature, strict=True)
    decay = check_float("baseline_decay", baseline_decay)
    if decay >= 1:
        raise ValueError(f"baseline_decay must be in [0, 1), got {baseline_decay!r}")
    losses = ((values - target.unsqueeze(1)) ** 2).sum(-1)  # (B, S) L(v_j) for every position
    out = []
    if not isinstance(baseline, bool):
        raise TypeError(f"baseline must be a bool, got {type(baseline).__name__}")
    use_baseline = baseline
    baseline = scores.new_zeros(B)  # (B,)
    mask = torch.ones_like(scores, dtype=torch.bool)  # (B, S)
    for _ in range(samples):
        s = scores.detach().clone().requires_grad_(True)  # (B, S)
        p = torch.softmax(s, dim=-1)  # (B, S)
        if estimator == "exact":
            objective = (p * losses).sum()
        elif estimator == "soft":
            context = torch.einsum("bs,bsd->bd", p, values)  # (B, D)
            objective = ((context - target) ** 2).sum()
        elif estimator == "reinforce":
            j = torch.multinomial(p.detach(), 1, generator=generator).squeeze(1)  # (B,)
            picked = losses.gather(1, j.unsqueeze(1)).squeeze(1)  # (B,)
            log_p = torch.log_softmax(s, dim=-1).gather(1, j.unsqueeze(1)).squeeze(1)  # (B,)
            objective = ((picked - baseline).detach() * log_p).sum()
            if use_baseline:
                baseline = decay * baseline + (1 - decay) * picked.detach()  # (B,) for the next draw
        else:
            hard = gumbel_straight_through(s, mask, temperature, generator=generator)  # (B, S)
            context = torch.einsum("bs,bsd->bd", hard, values)  # (B, D)
            objective = ((context - target) ** 2).sum()
        (grad,) = torch.autograd.grad(objective, s)
        out.append(grad)
    return torch.stack(out)  # (samples, B, S)
