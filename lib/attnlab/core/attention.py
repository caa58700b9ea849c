"""Scaled dot-product attention and multi-head attention, written to be read.

Both come with two paths behind one switch, ``need_weights``:

* ``need_weights=True`` (the *weights path*) computes the scores and the softmax explicitly
  and returns the attention weights, for teaching and for plots;
* ``need_weights=False`` (the *fast path*) calls the fused
  :func:`torch.nn.functional.scaled_dot_product_attention` and returns ``None`` for the weights.

Both paths follow the course's mask convention (see :mod:`attnlab.core.masks`): a boolean mask is
``True`` where a query may attend, a float mask is added to the scores, and a query whose
keys are all blocked ("fully masked row") gets all-zero weights and a zero output, with no NaN
in the outputs or the gradients. The fused kernel is not trusted with such rows (depending on
the PyTorch version and kernel it returns NaN or something else), so the fast path unblocks
them before the call and zeroes their outputs afterwards; the two paths agree everywhere.

Both paths also follow one NaN policy, *NaN in, NaN out* (:mod:`attnlab.core.masks`): a query row
with a NaN query, or scored against a NaN key it may attend to, gets a NaN output (and NaN
weights), fully masked or not; a NaN is never replaced by a number. (Whether a NaN *blocked*
key or value reaches a row depends on the fused kernel, which may skip blocked keys; the
weights path always lets it through.)

The masks of :class:`MultiHeadAttention` are called ``key_keep`` and ``attn_keep``, not
``key_padding_mask`` / ``attn_mask``: ``nn.MultiheadAttention`` gives those names boolean masks
with ``True`` = blocked, and passing them here raises a ``TypeError`` instead of silently
inverting the mask.

Shape legend
------------
B   batch size
H   number of heads (query heads)
Hkv number of key/value heads (``num_kv_heads``; ``H`` by default, 1 for multi-query attention)
G   query heads per key/value head, ``H // Hkv``
L   number of queries (target length)
S   number of keys / values (source length)
E   model width (``embed_dim``); also the query/key feature size in
    :func:`scaled_dot_product_attention`
Ev  value feature size in :func:`scaled_dot_product_attention`
D   width of one head, ``E // H``
Ek, Ev  widths of the key and value *inputs* of :class:`MultiHeadAttention` (``kdim``, ``vdim``)
... any number of leading batch dims (broadcast between q and k/v)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.checks import check_float_tensor, check_positive_int, check_probability, check_tensor
from attnlab.core.masks import causal_mask, check_mask, combine_masks, masked_softmax, refuse_torch_mask_names

__all__ = [
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "copy_weights_from_nn_mha",
]


# ----------------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------------


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Size:
    """Validate q, k, v for attention and return the shape of the scores, ``(..., L, S)``."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, t)
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dims (..., length, features), got {tuple(t.shape)}"
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size E (last dim): q has shape {tuple(q.shape)} "
            f"(E={q.shape[-1]}), k has shape {tuple(k.shape)} (E={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length S (dim -2): k has shape {tuple(k.shape)} "
            f"(S={k.shape[-2]}), v has shape {tuple(v.shape)} (S={v.shape[-2]})"
        )
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError as err:
        raise ValueError(
            f"the leading (batch) dims of q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} "
            "do not broadcast"
        ) from err
    return torch.Size((*batch, q.shape[-2], k.shape[-2]))


def _check_scale(scale, head_dim: int) -> float:
    """The score factor: ``scale`` checked (a finite real number), or ``1 / sqrt(head_dim)`` for ``None``."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number or None, got {type(scale).__name__} {scale!r}")
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    return float(scale)


def _dead_rows(mask: torch.Tensor) -> torch.Tensor:
    """``(..., L, 1)`` bool: True where a query row has no allowed key at all."""
    if mask.dtype == torch.bool:
        return ~mask.any(dim=-1, keepdim=True)  # (..., L, 1)
    return torch.isneginf(mask).all(dim=-1, keepdim=True)  # (..., L, 1)


# ----------------------------------------------------------------------------------------------
# scaled dot-product attention
# ----------------------------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""Attention :math:`\mathrm{softmax}(QK^\top \cdot \text{scale} + \text{mask})\,V`.

    Args:
        q: ``(..., L, E)`` queries.
        k: ``(..., S, E)`` keys.
        v: ``(..., S, Ev)`` values.
        mask: ``None``, a bool mask (``True`` = attend) or a float mask (added to the scores),
            broadcastable to ``(..., L, S)``.
        is_causal: also block keys in the future of each query, using
            :func:`attnlab.core.masks.causal_mask` (query ``i`` sees keys ``0 .. i + S - L``; aligned
            to the *end* so that it is right for a key/value cache). For ``L == S`` this is
            exactly PyTorch's ``is_causal``; for ``L < S`` PyTorch aligns to the start instead.
        scale: factor applied to the scores; default :math:`1/\sqrt{E}`.
        dropout_p: dropout probability on the weights, in ``[0, 1)`` (applied whenever ``> 0``;
            callers pass ``0.0`` in eval mode).
        need_weights: ``True`` computes the softmax explicitly and returns the weights;
            ``False`` calls the fused :func:`torch.nn.functional.scaled_dot_product_attention`
            and returns ``None`` for the weights. Same result either way (up to rounding, and
            except for the random dropout pattern).

    Returns:
        ``(out, weights)``: ``out`` is ``(..., L, Ev)``; ``weights`` is ``(..., L, S)`` (rows sum
        to 1, all zeros for a fully masked row) or ``None`` when ``need_weights`` is False.
        The weights are those *before* dropout. A query row with a NaN score is NaN on both
        paths (NaN policy, module docstring).

    Raises:
        TypeError: non-float inputs, mixed dtypes, a mask that is neither bool nor float, a
            ``dropout_p`` or ``scale`` that is not a number.
        ValueError: q/k feature sizes differ, k/v lengths differ, a mask that does not broadcast
            or holds ``+inf``/NaN, ``dropout_p`` outside ``[0, 1)``, a scale that is not finite.
    """
    scores_shape = _check_qkv(q, k, v)  # (..., L, S)
    dropout_p = check_probability("dropout_p", dropout_p)
    L, S = scores_shape[-2], scores_shape[-1]
    if mask is not None:
        check_mask(mask, scores_shape, name="mask")
        if mask.dtype != torch.bool:
            mask = mask.to(q.dtype)  # same shape; the fused kernel wants a float mask in q's dtype
    scale = _check_scale(scale, q.shape[-1])
    if is_causal and mask is None and L == S and not need_weights:
        # The fused kernel's own causal flag means the same thing when L == S and lets it skip
        # the blocked half of the scores instead of reading a mask.
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale
        )  # (..., L, Ev)
        return out, None
    if is_causal:
        mask = combine_masks(causal_mask(L, S, device=q.device), mask)  # (..., L, S)

    if need_weights:
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (..., L, S)
        if mask is None:
            weights = torch.softmax(scores, dim=-1)  # (..., L, S); no mask, no dead rows
        else:
            weights = masked_softmax(scores, mask)  # (..., L, S)
        dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights  # (..., L, S)
        out = torch.matmul(dropped, v)  # (..., L, Ev)
        return out, weights

    # Fast path. A fully masked row would reach the fused softmax as 0/0; give such rows one
    # harmless allowed pattern (everything), then zero their outputs, so they match the
    # weights path and no NaN can enter the backward pass either. Zeroing multiplies by 0
    # rather than overwriting: a row that is NaN (a NaN query, say) stays NaN, as it does on the
    # weights path (NaN policy).
    dead = None
    if mask is not None:
        dead = _dead_rows(mask)  # (..., L, 1)
        if bool(dead.any()):
            mask = mask | dead if mask.dtype == torch.bool else mask.masked_fill(dead, 0.0)  # (..., L, S)
        else:
            dead = None
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale
    )  # (..., L, Ev)
    if dead is not None:
        out = torch.where(dead, out * 0.0, out)  # (..., L, Ev)
    return out, None


# ----------------------------------------------------------------------------------------------
# heads
# ----------------------------------------------------------------------------------------------


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the feature dim into ``num_heads`` heads and move the head dim before the length.

    Args:
        x: ``(..., L, E)`` with ``E`` divisible by ``num_heads``.
        num_heads: ``H``.

    Returns:
        ``(..., H, L, D)`` with ``D = E // H`` (a view when possible; no data is copied).
    """
    check_tensor("x", x, dims=range(2, 64), shape_text="(..., L, E)")
    num_heads = check_positive_int("num_heads", num_heads)
    *lead, L, E = x.shape
    if E % num_heads:
        raise ValueError(f"feature size {E} of x {tuple(x.shape)} is not divisible by num_heads={num_heads}")
    x = x.reshape(*lead, L, num_heads, E // num_heads)  # (..., L, H, D)
    return x.transpose(-3, -2)  # (..., H, L, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: concatenate the heads' features again.

    Args:
        x: ``(..., H, L, D)``.

    Returns:
        ``(..., L, H * D)``.
    """
    check_tensor("x", x, dims=range(3, 64), shape_text="(..., H, L, D)")
    *lead, H, L, D = x.shape
    x = x.transpose(-3, -2)  # (..., L, H, D)
    return x.reshape(*lead, L, H * D)  # (..., L, E)


# ----------------------------------------------------------------------------------------------
# multi-head attention
# ----------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (Vaswani et al., 2017), batch-first, with the course's masks.

    :math:`\mathrm{MHA}(Q, K, V) = \mathrm{concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\,W_O`,
    :math:`\mathrm{head}_h = \mathrm{softmax}(Q W_Q^h (K W_K^h)^\top / \sqrt{D})\, V W_V^h`.

    The projections are separate ``nn.Linear`` layers (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``), so each matrix can be looked at; for self-attention the three input
    projections still run as one matrix product. Weights can be copied from
    :class:`torch.nn.MultiheadAttention` with :meth:`load_from_torch`.

    Args:
        embed_dim: ``E``, width of the queries and of the output.
        num_heads: ``H``; must divide ``E``.
        bias: add biases to all four projections.
        dropout: dropout on the attention weights (training mode only).
        kdim: width of the key input (default ``E``).
        vdim: width of the value input (default ``E``).
        batch_first: must be ``True`` (inputs are ``(B, L, E)``); present only so that code
            written for ``nn.MultiheadAttention`` reads the same.
        num_kv_heads: ``Hkv``, the number of key/value heads; must divide ``H``. ``None`` (the
            default) means ``H``: ordinary multi-head attention, with today's parameters. Fewer
            key/value heads is grouped-query attention (Ainslie et al., 2023): query head ``h``
            reads key/value head ``h // (H // Hkv)``, so ``k_proj`` and ``v_proj`` are ``Hkv * D``
            wide and a key/value cache holds ``Hkv`` heads; ``Hkv = 1`` is multi-query attention
            (Shazeer, 2019).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        bias: bool = True,
        dropout: float = 0.0,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = True,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        if not batch_first:
            raise ValueError("MultiHeadAttention is batch-first only: inputs are (B, L, E)")
        embed_dim = check_positive_int("embed_dim", embed_dim)
        num_heads = check_positive_int("num_heads", num_heads)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim={embed_dim} is not divisible by num_heads={num_heads} "
                f"(each head gets embed_dim // num_heads features)"
            )
        num_kv_heads = num_heads if num_kv_heads is None else check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads} "
                "(each key/value head serves num_heads // num_kv_heads query heads)"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = embed_dim // num_heads
        kv_width = num_kv_heads * self.head_dim
        self.kdim = embed_dim if kdim is None else check_positive_int("kdim", kdim)
        self.vdim = embed_dim if vdim is None else check_positive_int("vdim", vdim)
        self.dropout = check_probability("dropout", dropout)
        self.batch_first = True
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, kv_width, bias=bias)
        self.v_proj = nn.Linear(self.vdim, kv_width, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise like ``nn.MultiheadAttention``: Xavier-uniform inputs, zero biases."""
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
        self.out_proj.reset_parameters()
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, "
            f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}"
        )

    # -- weights from PyTorch ------------------------------------------------------------------

    @torch.no_grad()
    def load_from_torch(self, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` into this module.

        ``nn.MultiheadAttention`` keeps the three input projections packed in one
        ``in_proj_weight`` of shape ``(3E, E)`` (rows: queries, keys, values) unless
        ``kdim``/``vdim`` differ from ``E``; both layouts are handled.

        Returns:
            ``self``, so ``MultiHeadAttention(...).load_from_torch(mha)`` reads naturally.
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
        if self.num_kv_heads != self.num_heads:
            raise ValueError(
                f"nn.MultiheadAttention has one key/value head per query head; this module has "
                f"num_kv_heads={self.num_kv_heads} for num_heads={self.num_heads}"
            )
        if (mha.embed_dim, mha.num_heads, mha.kdim, mha.vdim) != (
            self.embed_dim,
            self.num_heads,
            self.kdim,
            self.vdim,
        ):
            raise ValueError(
                "shape mismatch: nn.MultiheadAttention has (embed_dim, num_heads, kdim, vdim) = "
                f"{(mha.embed_dim, mha.num_heads, mha.kdim, mha.vdim)}, this module has "
                f"{(self.embed_dim, self.num_heads, self.kdim, self.vdim)}"
            )
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("add_bias_kv / add_zero_attn are not supported by attnlab's MultiHeadAttention")
        theirs_bias = mha.in_proj_bias is not None
        if theirs_bias != (self.q_proj.bias is not None):
            raise ValueError(f"bias mismatch: nn.MultiheadAttention bias={theirs_bias}, ours is the opposite")
        if mha._qkv_same_embed_dim:
            w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)  # 3 x (E, E)
        else:
            w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight  # (E,E),(E,Ek),(E,Ev)
        self.q_proj.weight.copy_(w_q)
        self.k_proj.weight.copy_(w_k)
        self.v_proj.weight.copy_(w_v)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if theirs_bias:
            b_q, b_k, b_v = mha.in_proj_bias.chunk(3, dim=0)  # 3 x (E,)
            self.q_proj.bias.copy_(b_q)
            self.k_proj.bias.copy_(b_k)
            self.v_proj.bias.copy_(b_v)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        self.dropout = mha.dropout
        return self

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """A new module with the configuration and weights of ``mha`` (same dtype and device)."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
        ours = cls(
            mha.embed_dim,
            mha.num_heads,
            bias=mha.in_proj_bias is not None,
            dropout=mha.dropout,
            kdim=mha.kdim,
            vdim=mha.vdim,
        )
        ours = ours.to(device=mha.out_proj.weight.device, dtype=mha.out_proj.weight.dtype)
        return ours.load_from_torch(mha)

    # -- forward -------------------------------------------------------------------------------

    def _project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Input projections, split into heads; for self-attention one matrix product instead of three."""
        if query is key and key is value and self.kdim == self.vdim == self.embed_dim:
            w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # (3E, E)
            b = None
            if self.q_proj.bias is not None:
                b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])  # (3E,)
            kv_width = self.k_proj.out_features
            q, k, v = F.linear(query, w, b).split([self.embed_dim, kv_width, kv_width], dim=-1)  # (B, L, E|Hkv*D)
            H, Hkv = self.num_heads, self.num_kv_heads
            return split_heads(q, H), split_heads(k, Hkv), split_heads(v, Hkv)  # (B, H, L, D), 2 x (B, Hkv, L, D)
        k, v = self.project_kv(key, value)  # (B, Hkv, S, D) each
        return split_heads(self.q_proj(query), self.num_heads), k, v  # (B, H, L, D), (B, Hkv, S, D) x 2

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Project keys and values once, split into heads, for :meth:`forward`'s ``kv`` argument.

        Cross-attention attends to the same source at every decoding step; projecting it once
        and passing ``kv=`` then skips the two projections at each step.

        Args:
            key: ``(B, S, Ek)``.
            value: ``(B, S, Ev)``.

        Returns:
            ``(k, v)``, each ``(B, Hkv, S, D)`` (``Hkv = H`` unless ``num_kv_heads`` says fewer).
        """
        self._check_input("key", key, self.kdim)
        self._check_input("value", value, self.vdim)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same batch size B and length S: key has shape {tuple(key.shape)}, "
                f"value has shape {tuple(value.shape)}"
            )
        k = split_heads(self.k_proj(key), self.num_kv_heads)  # (B, Hkv, S, D)
        v = split_heads(self.v_proj(value), self.num_kv_heads)  # (B, Hkv, S, D)
        return k, v

    def expand_kv(self, t: torch.Tensor) -> torch.Tensor:
        """Repeat each of the ``Hkv`` key/value heads for its ``G = H // Hkv`` query heads.

        Query head ``h`` reads key/value head ``h // G`` (the grouping of
        ``F.scaled_dot_product_attention(..., enable_gqa=True)``). With ``Hkv = H`` the tensor is
        returned as it is.

        Args:
            t: ``(B, Hkv, S, D)`` keys or values.

        Returns:
            ``(B, H, S, D)``.
        """
        if self.num_kv_heads == self.num_heads:
            return t
        B, Hkv, S, D = t.shape
        G = self.num_heads // Hkv
        return t[:, :, None].expand(B, Hkv, G, S, D).reshape(B, Hkv * G, S, D)  # (B, H, S, D)

    @staticmethod
    def _check_input(name: str, t: torch.Tensor, width: int) -> None:
        check_float_tensor(name, t)
        if t.dim() != 3 or t.shape[-1] != width:
            raise ValueError(f"{name} must have shape (B, length, {width}), got {tuple(t.shape)}")

    def _check_heads(self, name: str, t: torch.Tensor, query: torch.Tensor) -> None:
        """``t`` must be ``(B, Hkv, S, D)`` keys or values in ``query``'s batch size, dtype and device."""
        B, H, D = query.shape[0], self.num_kv_heads, self.head_dim
        label = "H" if self.num_kv_heads == self.num_heads else "Hkv"
        check_float_tensor(name, t)
        if t.dim() != 4 or t.shape[0] != B or t.shape[1] != H or t.shape[3] != D:
            raise ValueError(
                f"{name} must be (B, {label}, S, D) = ({B}, {H}, S, {D}) to match the query {tuple(query.shape)}, "
                f"got {tuple(t.shape)}"
                + (" (a cache from another batch? start each batch with a fresh {})" if "cache" in name else "")
            )
        if t.dtype != query.dtype or t.device != query.device:
            raise ValueError(
                f"{name} is {t.dtype} on {t.device} but the query is {query.dtype} on {query.device}"
            )

    def _merge_masks(
        self,
        attn_keep: torch.Tensor | None,
        key_keep: torch.Tensor | None,
        B: int,
        L: int,
        S: int,
    ) -> torch.Tensor | None:
        """One mask broadcastable to ``(B, H, L, S)`` from ``attn_keep`` and ``key_keep``."""
        if attn_keep is not None:
            if isinstance(attn_keep, torch.Tensor) and attn_keep.dim() == 3:
                # nn.MultiheadAttention reads a 3-D mask as (B*H, L, S); plain broadcasting would
                # read it as (H, L, S). Refuse the ambiguity instead of guessing.
                raise ValueError(
                    f"attn_keep has shape {tuple(attn_keep.shape)}: 3-D masks are ambiguous; pass "
                    f"(L, S) = {(L, S)}, (B, 1, L, S) or (B, H, L, S) = {(B, self.num_heads, L, S)}"
                )
            check_mask(attn_keep, (B, self.num_heads, L, S), name="attn_keep")
        if key_keep is not None:
            if isinstance(key_keep, torch.Tensor) and tuple(key_keep.shape) != (B, S):
                raise ValueError(f"key_keep has shape {tuple(key_keep.shape)}, expected (B, S) = {(B, S)}")
            check_mask(key_keep, (B, S), name="key_keep")
            key_keep = key_keep[:, None, None, :]  # (B, 1, 1, S)
        return combine_masks(attn_keep, key_keep)  # broadcastable to (B, H, L, S)

    @refuse_torch_mask_names(key_padding_mask="key_keep", attn_mask="attn_keep")
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        key_keep: torch.Tensor | None = None,
        attn_keep: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = True,
        average_attn_weights: bool = True,
        cache: dict[str, torch.Tensor] | None = None,
        rotary: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value`` (or to keys/values projected before, ``kv``).

        Args:
            query: ``(B, L, E)``.
            key: ``(B, S, Ek)``; omit it when ``kv`` is given.
            value: ``(B, S, Ev)``; omit it when ``kv`` is given.
            kv: ``(k, v)``, each ``(B, Hkv, S, D)``, already projected and split into heads by
                :meth:`project_kv` (cross-attention to one source at every decoding step).
            key_keep: ``(B, S)`` key padding, bool ``True`` = real token (takes part), ``False`` =
                padding; or float (added). NOT ``nn.MultiheadAttention``'s ``key_padding_mask``,
                where ``True`` means padding: passing that name raises a ``TypeError``.
            attn_keep: course convention (bool ``True`` = may attend, or float added); ``(L, S)``,
                ``(B, 1, L, S)`` or ``(B, H, L, S)`` (anything broadcastable to ``(B, H, L, S)``
                except 3-D shapes, which are refused as ambiguous). Replaces PyTorch's
                ``attn_mask``, whose boolean ``True`` means blocked.
            is_causal: also apply :func:`attnlab.core.masks.causal_mask` ``(L, S)``.
            need_weights: the switch between the two paths: ``True`` computes the softmax
                explicitly and returns weights; ``False`` uses PyTorch's fused kernel.
            average_attn_weights: return weights averaged over heads ``(B, L, S)`` instead of
                per head ``(B, H, L, S)``.
            cache: optional dict for incremental decoding (self-attention of a decoder). The
                projected keys and values of this call are appended to ``cache["k"]`` and
                ``cache["v"]`` (``(B, H, S_past, D)``), and attention runs over all of them, so
                ``S`` in the masks means ``S_past + S_new``. Start with an empty dict for each
                batch; a cache of another batch size is refused. With ``num_kv_heads`` the cache
                holds ``Hkv`` heads, ``(B, Hkv, S_past, D)``.
            rotary: optional rotary position embedding (RoPE), a callable ``rotary(x, offset)``
                that rotates ``x (B, heads, n, D)`` as positions ``offset .. offset + n - 1``
                (:class:`attnlab.models.transformer.RotaryEmbedding`). New keys get positions
                ``S_past ..`` (so a cache holds rotated keys) and the queries the last ``L``
                positions, aligned to the end like the causal mask. Not with ``kv=``.

        Returns:
            ``(out, weights)``: ``out`` is ``(B, L, E)``; ``weights`` is ``(B, L, S)`` when averaged,
            ``(B, H, L, S)`` otherwise, or ``None`` when ``need_weights`` is False.

        Raises:
            TypeError: PyTorch's mask names, non-float inputs or masks of another dtype.
            ValueError: shapes that do not fit together (named in the message), a cache of
                another batch size, both ``kv`` and ``key``/``value`` (or neither).
        """
        self._check_input("query", query, self.embed_dim)
        B, L, _ = query.shape
        if kv is None:
            if key is None or value is None:
                raise ValueError("give key and value, or kv=(k, v) projected by project_kv()")
            self._check_input("key", key, self.kdim)
            self._check_input("value", value, self.vdim)
            if key.shape[0] != B or value.shape[0] != B:
                raise ValueError(
                    f"batch sizes differ: query {tuple(query.shape)}, key {tuple(key.shape)}, "
                    f"value {tuple(value.shape)}"
                )
            if key.shape[1] != value.shape[1]:
                raise ValueError(
                    f"key and value must have the same length S: key has shape {tuple(key.shape)}, "
                    f"value has shape {tuple(value.shape)}"
                )
            q, k, v = self._project(query, key, value)  # (B, H, L, D), (B, H, S, D), (B, H, S, D)
        else:
            if key is not None or value is not None:
                raise ValueError("give either key and value or kv=(k, v), not both")
            if cache is not None:
                raise ValueError(
                    "kv= (keys/values projected before) and cache= (keys/values appended) exclude each other"
                )
            if rotary is not None:
                raise ValueError("rotary= rotates keys as they are projected; it cannot be used with kv=")
            if not (isinstance(kv, (tuple, list)) and len(kv) == 2):
                raise TypeError(f"kv must be a pair (k, v) of (B, H, S, D) tensors, got {type(kv).__name__}")
            k, v = kv  # (B, Hkv, S, D) each
            self._check_heads("kv[0] (keys)", k, query)
            self._check_heads("kv[1] (values)", v, query)
            if k.shape[2] != v.shape[2]:
                raise ValueError(
                    f"kv keys and values must have the same length S, got {tuple(k.shape)} and {tuple(v.shape)}"
                )
            q = split_heads(self.q_proj(query), self.num_heads)  # (B, H, L, D)
        if cache is not None:
            if not isinstance(cache, dict):
                raise TypeError(f"cache must be a dict (start with {{}}), got {type(cache).__name__}")
            if ("k" in cache) != ("v" in cache):
                raise ValueError(f"cache must hold both 'k' and 'v' or neither, got keys {sorted(cache)}")
            if "k" in cache:
                self._check_heads("cache['k']", cache["k"], query)
                self._check_heads("cache['v']", cache["v"], query)
        past = cache["k"].shape[-2] if cache is not None and "k" in cache else 0
        if rotary is not None:
            if not callable(rotary):
                raise TypeError(f"rotary must be callable as rotary(x, offset), got {type(rotary).__name__}")
            q = rotary(q, past + k.shape[-2] - L)  # (B, H, L, D): the last L positions
            k = rotary(k, past)  # (B, Hkv, S, D)
        if cache is not None:
            if past:
                k = torch.cat([cache["k"], k], dim=-2)  # (B, Hkv, S_past + S, D)
                v = torch.cat([cache["v"], v], dim=-2)  # (B, Hkv, S_past + S, D)
            cache["k"], cache["v"] = k, v
        S = k.shape[-2]
        k, v = self.expand_kv(k), self.expand_kv(v)  # (B, H, S, D) each

        mask = self._merge_masks(attn_keep, key_keep, B, L, S)  # broadcastable to (B, H, L, S)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask, is_causal=is_causal, dropout_p=dropout_p, need_weights=need_weights
        )  # (B, H, L, D), (B, H, L, S) or None
        out = merge_heads(out)  # (B, L, E)
        out = self.out_proj(out)  # (B, L, E)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, L, S)
        return out, weights


def copy_weights_from_nn_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy ``theirs`` (``torch.nn.MultiheadAttention``) into ``ours``; returns ``ours``."""
    if not isinstance(ours, MultiHeadAttention):
        raise TypeError(f"ours must be an attnlab MultiHeadAttention, got {type(ours).__name__}")
    return ours.load_from_torch(theirs)
