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
  decoding, with constant memory per step.

Shape legend
------------
...  leading batch dims (e.g. ``B, H``)
L    number of queries = number of keys (self-attention; causal)
D    query/key feature size, Dv value feature size
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_choice, check_float_tensor
from attnlab.core.masks import causal_mask

__all__ = ["FORMS", "elu_feature_map", "linear_attention"]

FORMS = ("quadratic", "parallel", "recurrent")


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
) -> torch.Tensor:
    """Linear attention with :func:`elu_feature_map`, in one of three equal forms.

    Args:
        q: ``(..., L, D)``; k: ``(..., L, D)``; v: ``(..., L, Dv)`` (one length: self-attention).
        causal: query ``i`` sees keys ``0 .. i`` only. ``"recurrent"`` is causal by nature and
            needs ``causal=True``.
        form: ``"quadratic"``, ``"parallel"`` or ``"recurrent"`` (module docstring).
        eps: added to the normaliser (it is positive, so only to guard against underflow).

    Returns:
        ``(..., L, Dv)``.
    """
    form = check_choice("form", form, FORMS)
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
