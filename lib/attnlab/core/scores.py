"""Attention score functions for RNN encoder-decoders, behind one switch.

Every score answers the same question: how well does the decoder's query ``q`` match each
encoder state ``h_j``?  The kinds (Bahdanau et al. 2014, Luong et al. 2015, Vaswani et al. 2017):

==============  ===============================  ==========================================
kind            score(q, h_j)                    parameters
==============  ===============================  ==========================================
``dot``         q . h_j                          none (needs Q == K)
``scaled_dot``  q . h_j / sqrt(K)                none (needs Q == K)
``general``     q^T W h_j                        W (Q x K)
``concat``      v^T tanh(W [q; h_j])             W (A x (Q+K)), v (A); alias ``additive``
``location``    (W q)_j                          W (max_len x Q): ignores h_j entirely
==============  ===============================  ==========================================

``concat`` is Bahdanau's additive score. ``W [q; h_j]`` is split as ``W_q q + W_h h_j`` so the
key half ``W_h h_j`` is computed once per sentence (:meth:`AttentionScore.prepare`), exactly the
``enc_att`` trick of the fastai NLP course notebook (7b-seq2seq-attention-translation).

Local attention (Luong et al. 2015) restricts the softmax to a window ``[p_t - D, p_t + D]``:
``local-m`` puts ``p_t = t``; ``local-p`` predicts ``p_t = S_x * sigmoid(v_p^T tanh(W_p h_t))``
and multiplies the weights by a Gaussian ``exp(-(j - p_t)^2 / (2 sigma^2))`` with ``sigma = D/2``.

Shape legend
------------
B  batch size
S  source length (keys)
Q  query (decoder state) size
K  key (encoder state) size
A  attention hidden size of the ``concat`` score
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlab.core.checks import check_float_tensor, check_int, check_positive_int, check_tensor
from attnlab.core.masks import masked_softmax

__all__ = ["SCORE_KINDS", "AttentionScore", "attend", "local_window_mask", "LocalPosition"]

SCORE_KINDS = ("dot", "scaled_dot", "general", "concat", "location")
_ALIASES = {"additive": "concat", "bilinear": "general", "mlp": "concat"}


class AttentionScore(nn.Module):
    """One module for every score kind; the kind is a constructor switch.

    Args:
        kind: one of :data:`SCORE_KINDS` (or the aliases ``additive``, ``bilinear``, ``mlp``).
        query_dim: Q, size of the decoder state used as the query.
        key_dim: K, size of the encoder states.
        attn_dim: A, hidden size of the ``concat`` score (``None``: ``key_dim``).
        max_len: longest source the ``location`` score can address.

    Raises:
        ValueError: an unknown kind, a size below 1, or ``query_dim != key_dim`` for a
            parameter-free score.
        TypeError: a size that is not an int.
    """

    def __init__(self, kind: str, query_dim: int, key_dim: int, attn_dim: int | None = None, max_len: int = 64):
        super().__init__()
        kind = _ALIASES.get(kind, kind)
        if kind not in SCORE_KINDS:
            raise ValueError(f"kind={kind!r} is not a score; expected one of {SCORE_KINDS} or {tuple(_ALIASES)}")
        query_dim = check_positive_int("query_dim", query_dim)
        key_dim = check_positive_int("key_dim", key_dim)
        max_len = check_positive_int("max_len", max_len)
        attn_dim = key_dim if attn_dim is None else check_positive_int("attn_dim", attn_dim)
        if kind in ("dot", "scaled_dot") and query_dim != key_dim:
            raise ValueError(
                f"the {kind!r} score needs query_dim == key_dim, got query_dim={query_dim}, key_dim={key_dim}"
            )
        self.kind, self.query_dim, self.key_dim, self.max_len = kind, query_dim, key_dim, max_len
        if kind == "general":
            self.W = nn.Linear(key_dim, query_dim, bias=False)  # h_j -> W h_j, (K) -> (Q)
        elif kind == "concat":
            self.W_q = nn.Linear(query_dim, attn_dim, bias=False)  # query half of W
            self.W_h = nn.Linear(key_dim, attn_dim, bias=True)  # key half of W (bias lives here)
            self.v = nn.Linear(attn_dim, 1, bias=False)
        elif kind == "location":
            self.W = nn.Linear(query_dim, max_len)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """Precompute the query-independent part of the score once per sentence.

        Args:
            keys: ``(B, S, K)`` encoder states.

        Returns:
            ``(B, S, *)`` tensor to pass back as ``prepared`` (``W_h h_j`` for concat,
            ``W h_j`` for general, the keys themselves otherwise).
        """
        check_float_tensor("keys", keys)
        if keys.dim() != 3 or keys.size(-1) != self.key_dim:
            raise ValueError(f"keys must be (B, S, K={self.key_dim}), got {tuple(keys.shape)}")
        if self.kind == "general":
            return self.W(keys)  # (B, S, Q)
        if self.kind == "concat":
            return self.W_h(keys)  # (B, S, A)
        return keys  # (B, S, K)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, prepared: torch.Tensor | None = None) -> torch.Tensor:
        """Score one query per batch row against every key.

        Args:
            query: ``(B, Q)`` decoder state.
            keys: ``(B, S, K)`` encoder states.
            prepared: optional output of :meth:`prepare` for these keys (saves work per step).

        Returns:
            ``(B, S)`` unnormalised scores.
        """
        check_float_tensor("query", query)
        check_float_tensor("keys", keys)
        if query.dim() != 2 or query.size(-1) != self.query_dim:
            raise ValueError(f"query must be (B, Q={self.query_dim}), got {tuple(query.shape)}")
        if keys.dim() != 3 or keys.size(-1) != self.key_dim or keys.size(0) != query.size(0):
            raise ValueError(
                f"keys must be (B={query.size(0)}, S, K={self.key_dim}) to match the query, got {tuple(keys.shape)}"
            )
        if prepared is None:
            prepared = self.prepare(keys)  # (B, S, *)
        else:
            check_float_tensor("prepared", prepared)
            if prepared.dim() != 3 or prepared.shape[:2] != keys.shape[:2]:
                raise ValueError(
                    f"prepared must be (B, S, *) = ({keys.size(0)}, {keys.size(1)}, *) from prepare(keys), "
                    f"got {tuple(prepared.shape)}"
                )
        if self.kind in ("dot", "general"):
            return torch.bmm(prepared, query.unsqueeze(2)).squeeze(2)  # (B, S)
        if self.kind == "scaled_dot":
            return torch.bmm(prepared, query.unsqueeze(2)).squeeze(2) / math.sqrt(self.key_dim)  # (B, S)
        if self.kind == "concat":
            hidden = torch.tanh(prepared + self.W_q(query).unsqueeze(1))  # (B, S, A)
            return self.v(hidden).squeeze(2)  # (B, S)
        S = keys.size(1)
        if S > self.max_len:
            raise ValueError(f"the location score was built for max_len={self.max_len}, got S={S} source positions")
        return self.W(query)[:, :S]  # (B, S)


def attend(
    scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None, *, scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax the scores over the allowed source positions and average the values.

    Args:
        scores: ``(B, S)`` raw scores (floating point).
        values: ``(B, S, K)`` encoder states, same dtype as ``scores``.
        mask: ``(B, S)`` bool, True at real (attendable) source positions (or a float mask, added).
        scale: optional ``(B, S)`` factors multiplied into the weights after the softmax and before
            the average (local-p's Gaussian); the weights then need not sum to 1.

    Returns:
        ``(context (B, K), weights (B, S))``; weights are exactly 0 on masked positions.

    Raises:
        TypeError: non-float scores or values, or values of another dtype than the scores.
        ValueError: values whose ``(B, S)`` differs from the scores', or a mask that does not fit.
    """
    check_float_tensor("scores", scores, dims=2, shape_text="(B, S)")
    check_float_tensor("values", values, dims=3, shape_text="(B, S, K)")
    if values.shape[:2] != scores.shape:
        raise ValueError(
            f"values must be (B, S, K) with the scores' (B, S) = {tuple(scores.shape)}, "
            f"got shape {tuple(values.shape)}"
        )
    if values.dtype != scores.dtype:
        raise TypeError(f"values ({values.dtype}) and scores ({scores.dtype}) must share one dtype")
    if scale is not None:
        check_float_tensor("scale", scale, dims=2, shape_text="(B, S)")
        if scale.shape != scores.shape:
            raise ValueError(f"scale must be (B, S) = {tuple(scores.shape)} like the scores, got {tuple(scale.shape)}")
    weights = masked_softmax(scores, mask)  # (B, S)
    if scale is not None:
        weights = weights * scale  # (B, S)
    context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, K)
    return context, weights


def local_window_mask(center: torch.Tensor, S: int, D: int) -> torch.Tensor:
    """Bool mask of the window ``[p - D, p + D]`` around each (possibly fractional) centre.

    Args:
        center: ``(B,)`` window centres ``p_t`` (source positions, may be fractional).
        S: source length.
        D: half window width (non-negative).

    Returns:
        ``(B, S)`` bool, True inside the window.
    """
    check_tensor("center", center, dims=1, shape_text="(B,)")
    S = check_int("S", S, minimum=0)
    D = check_int("D", D, minimum=0)
    positions = torch.arange(S, device=center.device, dtype=center.dtype if center.is_floating_point() else None)
    return (positions.unsqueeze(0) - center.unsqueeze(1)).abs() <= D  # (B, S)


class LocalPosition(nn.Module):
    """Luong's predicted aligned position (local-p): ``p_t = S_x * sigmoid(v_p^T tanh(W_p h_t))``.

    Args:
        query_dim: Q, decoder state size.
        hidden: size of ``W_p``'s output.
    """

    def __init__(self, query_dim: int, hidden: int):
        super().__init__()
        query_dim = check_positive_int("query_dim", query_dim)
        hidden = check_positive_int("hidden", hidden)
        self.W_p = nn.Linear(query_dim, hidden, bias=False)
        self.v_p = nn.Linear(hidden, 1, bias=False)

    def forward(self, query: torch.Tensor, src_lengths: torch.Tensor) -> torch.Tensor:
        """Return ``(B,)`` real-valued positions in ``[0, S_x - 1]`` for queries ``(B, Q)``.

        Args:
            query: ``(B, Q)`` decoder states.
            src_lengths: ``(B,)`` true source lengths ``S_x``.
        """
        check_float_tensor("query", query, dims=2, shape_text="(B, Q)")
        if query.size(1) != self.W_p.in_features:
            raise ValueError(f"query must be (B, Q={self.W_p.in_features}), got {tuple(query.shape)}")
        check_tensor("src_lengths", src_lengths, dims=1, shape_text="(B,)")
        if src_lengths.size(0) != query.size(0):
            raise ValueError(f"src_lengths must be (B={query.size(0)},) like the query, got {tuple(src_lengths.shape)}")
        frac = torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(1)  # (B,)
        # Luong scales by the source length S_x; we map onto the last real index (S_x - 1).
        return frac * (src_lengths.to(frac.dtype) - 1)  # (B,)
