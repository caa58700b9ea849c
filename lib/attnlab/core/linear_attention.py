r"""Linear attention (Katharopoulos et al., 2020): a feature map instead of the softmax.

Softmax attention weighs key ``j`` for query ``i`` by :math:`\exp(q_i \cdot k_j)`. Replacing that
kernel by :math:`\phi(q_i) \cdot \phi(k_j)` with a positive feature map, here
:math:`\phi(x) = \mathrm{elu}(x) + 1`, lets the sum over keys be taken first:

.. math::
    o_i = \frac{\phi(q_i)^\top \sum_{j \le i} \phi(k_j) v_j^\top}{\phi(q_i)^\top \sum_{j \le i} \phi(k_j)}

so the cost is linear in the length. :func:`linear_attention` computes it three ways behind one
switch, ``form``, which are equal up to rounding:

* ``"quadratic"``: the ``(L, S)`` matrix :math:`\phi(Q)\phi(K)^\top`, masked and row-normalised
  (the same shape of computation as softmax attention, for comparison);
* ``"parallel"``: cumulative sums over the sequence of :math:`\phi(k_j) v_j^\top` (``(D, Dv)`` per
  position) and of :math:`\phi(k_j)`; the causal form used in training;
* ``"recurrent"``: one position at a time with a ``(D, Dv)`` state, like an RNN; the form used in
  decoding, with constant memory per step;
* ``"chunked"``: blocks of ``chunk`` positions, the quadratic form inside a block and the ``(D, Dv)``
  state carried from block to block. The parallel form's ``(L, D, Dv)`` prefix sums hold more
  numbers than the ``L x L`` scores until ``L > D * Dv``; real implementations (e.g. the
  fast-weight and DeltaNet kernels, Schlag et al. 2021; Yang et al. 2024) are chunked like this.

Shape legend
------------
...  leading batch dims (e.g. ``B, H``)
L    number of queries = number of keys (self-attention; causal)
D    query/key feature size, Dv value feature size
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_choice, check_float_tensor, check_positive_int
from attnlab.core.masks import causal_mask

__all__ = ["FORMS", "elu_feature_map", "linear_attention"]

FORMS = ("quadratic", "parallel", "recurrent", "chunked")


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """:math:`\\phi(x) = \\mathrm{elu}(x) + 1`, positive everywhere (same shape as ``x``)."""
    check_float_tensor("x", x)
    return F.elu(x) + 1.0


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    form: str = "parallel",
    eps: float = 1e-6,
    chunk: int = 64,
) -> torch.Tensor:
    """Linear attention with :func:`elu_feature_map`, in one of three equal forms.

    Args:
        q: ``(..., L, D)``; k: ``(..., L, D)``; v: ``(..., L, Dv)`` (one length: self-attention).
        causal: query ``i`` sees keys ``0 .. i`` only. ``"recurrent"`` is causal by nature and
            needs ``causal=True``.
        form: ``"quadratic"``, ``"parallel"``, ``"recurrent"`` or ``"chunked"`` (module docstring).
        eps: added to the normaliser (it is positive, so only to guard against underflow).
        chunk: block length of ``form="chunked"``, a positive int.

    Returns:
        ``(..., L, Dv)``.
    """
    form = check_choice("form", form, FORMS)
    chunk = check_positive_int("chunk", chunk)
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, t)
        if t.dim() < 2:
            raise ValueError(f"{name} must be (..., L, features), got shape {tuple(t.shape)}")
    if q.shape[:-1] != k.shape[:-1] or q.shape[-1] != k.shape[-1] or k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"need q (..., L, D), k (..., L, D), v (..., L, Dv) with one batch shape and length; got q "
            f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if form == "recurrent" and not causal:
        raise ValueError("form='recurrent' is causal by nature; use causal=True or another form")
    fq, fk = elu_feature_map(q), elu_feature_map(k)  # (..., L, D) each
    L = q.shape[-2]
    if form == "quadratic":
        a = torch.matmul(fq, fk.transpose(-2, -1))  # (..., L, L)
        if causal:
            a = a * causal_mask(L, device=q.device)  # (..., L, L)
        return torch.matmul(a, v) / (a.sum(-1, keepdim=True) + eps)  # (..., L, Dv)
    if form == "parallel":
        kv = fk.unsqueeze(-1) * v.unsqueeze(-2)  # (..., L, D, Dv)
        z = fk  # (..., L, D)
        if causal:
            kv, z = kv.cumsum(dim=-3), z.cumsum(dim=-2)  # (..., L, D, Dv), (..., L, D)
        else:
            kv, z = kv.sum(-3, keepdim=True), z.sum(-2, keepdim=True)  # (..., 1, D, Dv), (..., 1, D)
        num = torch.einsum("...ld,...lde->...le", fq, kv)  # (..., L, Dv)
        den = (fq * z).sum(-1, keepdim=True)  # (..., L, 1)
        return num / (den + eps)  # (..., L, Dv)
    if form == "chunked":
        return _chunked(fq, fk, v, causal, eps, chunk)  # (..., L, Dv)
    state = fk.new_zeros((*fk.shape[:-2], fk.shape[-1], v.shape[-1]))  # (..., D, Dv)
    z = fk.new_zeros((*fk.shape[:-2], fk.shape[-1]))  # (..., D)
    outs = []
    for t in range(L):
        state = state + fk[..., t, :, None] * v[..., t, None, :]  # (..., D, Dv)
        z = z + fk[..., t, :]  # (..., D)
        num = torch.einsum("...d,...de->...e", fq[..., t, :], state)  # (..., Dv)
        den = (fq[..., t, :] * z).sum(-1, keepdim=True)  # (..., 1)
        outs.append(num / (den + eps))  # (..., Dv)
    if not outs:
        return v.new_zeros(v.shape)  # (..., 0, Dv)
    return torch.stack(outs, dim=-2)  # (..., L, Dv)


def _chunked(fq: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, causal: bool, eps: float, chunk: int) -> torch.Tensor:
    """The chunked form: quadratic inside blocks of ``chunk`` positions, a ``(D, Dv)`` state across them."""
    L = fq.shape[-2]
    state = fk.new_zeros((*fk.shape[:-2], fk.shape[-1], v.shape[-1]))  # (..., D, Dv)
    z = fk.new_zeros((*fk.shape[:-2], fk.shape[-1], 1))  # (..., D, 1)
    if not causal:  # every query sees every key: the whole state first
        state = torch.matmul(fk.transpose(-2, -1), v)  # (..., D, Dv)
        z = fk.sum(-2).unsqueeze(-1)  # (..., D, 1)
        return torch.matmul(fq, state) / (torch.matmul(fq, z) + eps)  # (..., L, Dv)
    out = v.new_empty(v.shape)  # (..., L, Dv)
    for c0 in range(0, L, chunk):
        c = slice(c0, min(c0 + chunk, L))
        qc, kc, vc = fq[..., c, :], fk[..., c, :], v[..., c, :]  # (..., C, D), (..., C, D), (..., C, Dv)
        a = torch.matmul(qc, kc.transpose(-2, -1)) * causal_mask(c.stop - c0, device=fq.device)  # (..., C, C)
        num = torch.matmul(a, vc) + torch.matmul(qc, state)  # (..., C, Dv)
        den = a.sum(-1, keepdim=True) + torch.matmul(qc, z)  # (..., C, 1)
        out[..., c, :] = num / (den + eps)
        state = state + torch.matmul(kc.transpose(-2, -1), vc)  # (..., D, Dv)
        z = z + kc.sum(-2).unsqueeze(-1)  # (..., D, 1)
    return out
