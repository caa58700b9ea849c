"""The Transformer (Vaswani et al., 2017), assembled from the course's own parts.

Self-attention alone has three barriers (lesson 04); each block below removes one:

* it is blind to word order -> :class:`PositionalEncoding` adds a position signal to the
  embeddings (fixed sinusoids, learned vectors, or ``"none"`` to see what breaks); or the
  positions act inside self-attention instead: :class:`RotaryEmbedding` rotates queries and keys
  (RoPE, Su et al. 2021), :func:`alibi_bias` adds a distance penalty to the scores (ALiBi, Press
  et al. 2022). Both make the scores depend on the offset ``i - j`` only; cross-attention gets no
  position signal of its own in either (source and target positions are not comparable);
* it is only a weighted average -> :class:`FeedForward`, a two-layer MLP applied to every position
  on its own, adds the nonlinearity;
* a decoder must not see the future -> decoder self-attention is causal.

An :class:`EncoderLayer` is self-attention + feed-forward; a :class:`DecoderLayer` is masked
self-attention + encoder-decoder attention (queries from the decoder, keys and values from the
encoder) + feed-forward. Every sublayer sits in a residual connection with a LayerNorm, placed
by ONE switch, ``norm_first``:

* ``norm_first=False`` (post-LN, the 2017 paper): ``x = LayerNorm(x + Sublayer(x))``;
* ``norm_first=True``  (pre-LN, the course's default): ``x = x + Sublayer(LayerNorm(x))``, plus one
  final LayerNorm after each stack. It keeps an un-normalised residual path from the input to the
  output, which trains stably at high learning rates with little warm-up.

With dropout 0 and copied weights, :class:`EncoderLayer` / :class:`DecoderLayer` compute exactly
what ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer`` (``batch_first=True``) compute,
in both placements (see :meth:`EncoderLayer.load_from_torch`). All attention is
:class:`attnlab.core.attention.MultiHeadAttention` with the course's mask convention (bool ``True`` =
may attend); remember that ``nn.*`` modules read boolean masks the other way round
(:func:`attnlab.core.masks.to_nn_mha_mask`). That is why the layers' padding masks are called
``src_keep`` / ``tgt_keep`` (``True`` = real token) and never ``src_mask`` / ``tgt_mask``: PyTorch's
names raise a ``TypeError`` here instead of silently meaning the opposite. Every residual branch
is written once (``_Layer._residual``) for both placements.

:class:`Transformer` speaks the course's decoding protocol (:mod:`attnlab.models.decoding`):
``encode(src) -> memory``, ``init_state(memory) -> state``,
``step(memory, state, y_prev, t) -> (logits, state, attn)``. Decoding is *incremental*: the state
holds a key/value cache per decoder layer, so step ``t`` projects only the newest token and
attends over the cached keys/values of tokens ``0..t``; the cross-attention keys/values depend on
the source only and are computed once, in :meth:`Transformer.encode`. All cached tensors are
batch-first, so beam search reorders them with ``index_select`` like any other state.
Set ``model.use_cache = False`` (or use :meth:`Transformer.kv_cache`) to decode the slow way,
re-running the decoder over the whole prefix at every step; the tokens are the same.

Shape legend
------------
B   batch size
S   source length (incl. ``<eos>``)
T   target length (decoder inputs: ``<bos>`` + target)
t   number of target tokens decoded so far (the cache length)
E   model width ``d_model``
H   number of heads
Hkv number of key/value heads (``num_kv_heads``; ``H`` by default)
D   width of one head, ``E // H``
F   hidden width of the feed-forward block ``dim_feedforward``
N   number of layers in a stack
V   target vocabulary size
P   length of the positional table ``max_len``
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.attention import MultiHeadAttention
from attnlab.core.checks import (
    check_float_tensor,
    check_int,
    check_positive_int,
    check_probability,
    check_token_ids,
    eval_mode,
)
from attnlab.core.masks import refuse_torch_mask_names
from attnlab.data.vocab import PAD

__all__ = [
    "POSITIONS",
    "sinusoid_frequencies",
    "sinusoidal_table",
    "sinusoid_shift_matrix",
    "PositionalEncoding",
    "RotaryEmbedding",
    "alibi_slopes",
    "alibi_bias",
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "TransformerConfig",
    "Transformer",
]

POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")
# The kinds that act inside self-attention and add nothing to the embeddings.
_IN_ATTENTION = ("rope", "alibi")
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


# ----------------------------------------------------------------------------------------------
# position representations
# ----------------------------------------------------------------------------------------------


def sinusoid_frequencies(d_model: int) -> torch.Tensor:
    r"""The angular speeds :math:`\omega_i = 10000^{-2i / d}` of the sinusoid pairs, ``i = 0 .. E/2 - 1``.

    The one definition both :func:`sinusoidal_table` and :func:`sinusoid_shift_matrix` use.

    Args:
        d_model: ``E``, even and positive.

    Returns:
        ``(E/2,)`` float64 frequencies, from 1 down to nearly ``1/10000``.
    """
    d_model = check_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"sinusoidal encodings need an even d_model (sin, cos pairs), got {d_model}")
    return torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))  # (E/2,)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    r"""The fixed sinusoidal position encodings of Vaswani et al.

    :math:`PE_{pos, 2i} = \sin(pos \cdot \omega_i)`, :math:`PE_{pos, 2i+1} = \cos(pos \cdot \omega_i)`
    with :math:`\omega_i = 10000^{-2i / d}`: every pair of dimensions is a clock turning at its own
    speed, from one turn every :math:`2\pi` positions down to one every :math:`10000 \cdot 2\pi`.

    Args:
        max_len: ``P``, number of positions.
        d_model: ``E``, even.

    Returns:
        ``(P, E)`` float32 table.
    """
    omega = sinusoid_frequencies(d_model)  # (E/2,)
    max_len = check_int("max_len", max_len, minimum=0)
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)  # (P, E)
    table[:, 0::2] = torch.sin(pos * omega)  # (P, E/2)
    table[:, 1::2] = torch.cos(pos * omega)  # (P, E/2)
    return table.float()  # (P, E)


def sinusoid_shift_matrix(k: int, d_model: int) -> torch.Tensor:
    r"""The matrix :math:`M_k` with :math:`PE_{pos + k} = M_k \, PE_{pos}` for every ``pos``.

    Each (sin, cos) pair is rotated by the angle :math:`k \omega_i`:
    :math:`\sin((p+k)\omega) = \sin(p\omega)\cos(k\omega) + \cos(p\omega)\sin(k\omega)` and
    :math:`\cos((p+k)\omega) = \cos(p\omega)\cos(k\omega) - \sin(p\omega)\sin(k\omega)`.
    ``M_k`` is block-diagonal with 2x2 rotations and does not depend on ``pos``: a fixed offset is
    a fixed linear map, which attention (itself built from linear maps) can learn to use.

    Args:
        k: the offset (any integer).
        d_model: ``E``, even.

    Returns:
        ``(E, E)`` float32 orthogonal matrix.
    """
    omega = sinusoid_frequencies(d_model)  # (E/2,)
    k = check_int("k", k)
    c, s = torch.cos(k * omega), torch.sin(k * omega)  # (E/2,), (E/2,)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)  # (E, E)
    i = torch.arange(0, d_model, 2)  # (E/2,) index of each sin row
    m[i, i], m[i, i + 1] = c, s  # new sin = sin cos(kw) + cos sin(kw)
    m[i + 1, i], m[i + 1, i + 1] = -s, c  # new cos = cos cos(kw) - sin sin(kw)
    return m.float()  # (E, E)


class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding, RoPE (Su et al., 2021): rotate each query and key by its position.

    The ``D`` features of a head form ``D/2`` pairs ``(x_{2i}, x_{2i+1})``; at position ``p`` pair ``i`` is
    rotated by the angle :math:`p\,\theta_i`, :math:`\theta_i = \text{base}^{-2i/D}`. A rotation by
    :math:`p\theta` of a query dotted with a rotation by :math:`s\theta` of a key is the dot product of
    the unrotated pair turned by :math:`(p - s)\theta`, so the score of query ``p`` and key ``s``
    depends on the offset ``p - s`` only, never on ``p`` itself. No parameters and no saved state.

    Args:
        head_dim: ``D``, even.
        base: the base of the angular speeds (10000 in the paper).
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        head_dim = check_positive_int("head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"RoPE rotates pairs of features: head_dim must be even, got {head_dim}")
        if isinstance(base, bool) or not isinstance(base, numbers.Real) or not base > 1:
            raise ValueError(f"base must be a number > 1, got {base!r}")
        self.head_dim, self.base = head_dim, float(base)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"

    def angles(self, length: int, offset: int = 0) -> torch.Tensor:
        r"""``(length, D/2)`` float64 angles :math:`p\,\theta_i` of positions ``offset .. offset+length-1``."""
        length = check_int("length", length, minimum=0)
        offset = check_int("offset", offset, minimum=0)
        theta = self.base ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)  # (D/2,)
        pos = torch.arange(offset, offset + length, dtype=torch.float64)  # (length,)
        return pos[:, None] * theta[None, :]  # (length, D/2)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate ``x (..., n, D)`` as positions ``offset .. offset+n-1``; same shape and dtype."""
        check_float_tensor("x", x)
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"x must be (..., n, D) with D={self.head_dim}, got shape {tuple(x.shape)}")
        ang = self.angles(x.shape[-2], offset).to(device=x.device)  # (n, D/2)
        cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)  # (n, D/2) each
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., n, D/2) each
        out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., n, D/2, 2)
        return out.flatten(-2)  # (..., n, D)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    r"""The head-specific slopes of ALiBi (Press et al., 2022).

    For ``H`` a power of two, head ``h = 1 .. H`` gets :math:`m_h = 2^{-8h/H}` (for ``H = 8``:
    1/2, 1/4, ..., 1/256): a few heads look far, a few look near. For other ``H`` the paper takes the
    slopes of the nearest smaller power of two ``P`` and fills the rest with every other slope of ``2P``.

    Args:
        num_heads: ``H``.

    Returns:
        ``(H,)`` float64 slopes, all in ``(0, 1)``.
    """
    num_heads = check_positive_int("num_heads", num_heads)

    def powers_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    p = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = powers_of_two(p) + powers_of_two(2 * p)[0::2][: num_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)  # (H,)


def alibi_bias(num_heads: int, L: int, S: int | None = None, *, device=None, dtype=torch.float32) -> torch.Tensor:
    r"""ALiBi's additive score bias :math:`-m_h \, |i - j|` for query ``i`` and key ``j``.

    Queries are aligned to the end of the keys, like :func:`attnlab.core.masks.causal_mask`: query row
    ``r`` has position ``S - L + r`` (for a key/value cache, where the ``L`` new queries are the last
    ``L`` positions). With a causal mask only ``j <= i`` is left, where this is the paper's
    :math:`-m_h (i - j)`; without one (the encoder) the penalty is symmetric, and then it cannot
    tell left from right: a reversed sentence keeps every distance (the source's final ``<eos>``
    is what breaks the symmetry in the course's encoder).

    Args:
        num_heads: ``H``.
        L: number of queries.
        S: number of keys (default ``L``), ``S >= L``.
        device, dtype: of the result.

    Returns:
        ``(H, L, S)`` float bias, 0 on the diagonal and negative elsewhere; pass it as a float mask
        (it is added to the scores).
    """
    L = check_int("L", L, minimum=0)
    S = L if S is None else check_int("S", S, minimum=0)
    if S < L:
        raise ValueError(f"alibi_bias aligns the L queries to the end of the S keys: need S >= L, got L={L}, S={S}")
    qpos = torch.arange(S - L, S, dtype=torch.float64)  # (L,)
    kpos = torch.arange(S, dtype=torch.float64)  # (S,)
    dist = (qpos[:, None] - kpos[None, :]).abs()  # (L, S)
    bias = -alibi_slopes(num_heads)[:, None, None] * dist  # (H, L, S)
    return bias.to(device=device, dtype=dtype)  # (H, L, S)


class PositionalEncoding(nn.Module):
    """Add a position signal to a sequence of embeddings.

    Args:
        kind: ``"sinusoidal"`` (fixed table, no parameters), ``"learned"`` (one trained vector per
            position, an ``nn.Embedding``) or ``"none"`` (adds nothing: the model is blind to order);
            ``"rope"`` and ``"alibi"`` add nothing here either: those positions act inside
            self-attention (:class:`RotaryEmbedding`, :func:`alibi_bias`), and the table's
            ``max_len`` still bounds the accepted lengths.
        d_model: ``E`` (even for ``"sinusoidal"``).
        max_len: ``P >= 1``, the number of positions the table covers (longer inputs are refused).
    """

    def __init__(self, kind: str, d_model: int, max_len: int) -> None:
        super().__init__()
        if kind not in POSITIONS:
            raise ValueError(f"positions={kind!r}; expected one of {POSITIONS}")
        d_model = check_positive_int("d_model", d_model)
        max_len = check_positive_int("max_len", max_len)
        self.kind, self.d_model, self.max_len = kind, d_model, max_len
        if kind == "sinusoidal":
            # Not a parameter and not saved: it is rebuilt from (max_len, d_model).
            self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)  # (P, E)
        elif kind == "learned":
            self.table_emb = nn.Embedding(max_len, d_model)
            nn.init.normal_(self.table_emb.weight, std=d_model**-0.5)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, d_model={self.d_model}, max_len={self.max_len}"

    def check_length(self, length: int, what: str = "sequence") -> None:
        """Raise a clear error when positions ``0 .. length-1`` are beyond the table."""
        if self.kind != "none" and length > self.max_len:
            raise ValueError(
                f"{what} has {length} positions but the positional table has only max_len={self.max_len}; "
                "use shorter inputs or a model built with a larger max_len"
            )

    def encodings(self, length: int, offset: int = 0) -> torch.Tensor | None:
        """``(length, E)`` encodings of positions ``offset .. offset+length-1`` (``None`` when nothing is added)."""
        length = check_int("length", length, minimum=0)
        offset = check_int("offset", offset, minimum=0)
        if self.kind == "none":
            return None
        if self.kind in _IN_ATTENTION:
            self.check_length(offset + length)
            return None
        self.check_length(offset + length)
        if self.kind == "sinusoidal":
            return self.table[offset : offset + length]  # (length, E)
        return self.table_emb.weight[offset : offset + length]  # (length, E)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x (B, L, E)`` plus the encodings of positions ``offset .. offset+L-1``; same shape."""
        _check_states("x", x, self.d_model, "(B, L, E)")
        pe = self.encodings(x.shape[1], offset)  # (L, E) or None
        return x if pe is None else x + pe.to(x.dtype)  # (B, L, E)


# ----------------------------------------------------------------------------------------------
# blocks
# ----------------------------------------------------------------------------------------------


def _check_states(name: str, x: torch.Tensor, width: int, shape_text: str) -> None:
    """``x`` must be a float ``(B, L, width)`` tensor (a sequence of model states)."""
    check_float_tensor(name, x, dims=3, shape_text=shape_text)
    if x.shape[-1] != width:
        raise ValueError(f"{name} must be {shape_text} with E={width} features, got shape {tuple(x.shape)}")


def _check_sizes(d_model, num_heads, dim_feedforward, dropout, layer_norm_eps, num_kv_heads=None) -> None:
    """The size arguments shared by the layers and the stacks, each checked under its own name."""
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    if num_kv_heads is not None and num_heads % check_positive_int("num_kv_heads", num_kv_heads):
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    check_positive_int("dim_feedforward", dim_feedforward)
    check_probability("dropout", dropout)
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if isinstance(layer_norm_eps, bool) or not isinstance(layer_norm_eps, numbers.Real) or not layer_norm_eps > 0:
        raise ValueError(f"layer_norm_eps must be a positive number, got {layer_norm_eps!r}")


class FeedForward(nn.Module):
    r"""Position-wise feed-forward block :math:`\mathrm{FFN}(x) = W_2\, \mathrm{act}(W_1 x + b_1) + b_2`.

    The same two-layer MLP is applied to every position independently (``E -> F -> E``, with
    ``F = 4E`` in the paper): self-attention mixes positions, this block transforms each one.

    Args:
        d_model: ``E``.
        dim_feedforward: ``F``.
        dropout: dropout on the hidden activations, in ``[0, 1)``.
        activation: ``"relu"`` or ``"gelu"``.
    """

    def __init__(self, d_model: int, dim_feedforward: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}; expected one of {sorted(ACTIVATIONS)}")
        d_model = check_positive_int("d_model", d_model)
        dim_feedforward = check_positive_int("dim_feedforward", dim_feedforward)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., E) -> (..., E)``."""
        check_float_tensor("x", x)
        if x.dim() == 0 or x.shape[-1] != self.linear1.in_features:
            raise ValueError(f"x must be (..., E) with E={self.linear1.in_features}, got shape {tuple(x.shape)}")
        h = ACTIVATIONS[self.activation](self.linear1(x))  # (..., F)
        return self.linear2(self.dropout(h))  # (..., E)


def _check_activation_matches(theirs: nn.Module, ours: str) -> None:
    act = theirs.activation
    name = getattr(act, "__name__", type(act).__name__).lower()
    if ours not in name:
        raise ValueError(f"activation mismatch: PyTorch layer uses {name!r}, this layer uses {ours!r}")


class _Layer(nn.Module):
    """What both layers are made of: attention sublayer(s) and a feed-forward, each in a residual branch.

    One LayerNorm and one dropout per sublayer (``norm1``, ``dropout1``, ...), placed by
    ``norm_first``; :meth:`_residual` is the only place where the placement is written down.
    The class attribute ``cross_attention`` adds the encoder-decoder attention of a decoder layer.
    The constructor's arguments are documented in :class:`EncoderLayer`.
    """

    cross_attention: bool

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(d_model, num_heads, dim_feedforward, dropout, layer_norm_eps, num_kv_heads)
        if not isinstance(norm_first, bool):
            raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__} {norm_first!r}")
        self.norm_first = norm_first
        # Creation order = initialisation order of the random weights (and the printed order).
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, num_kv_heads=num_kv_heads)
        if self.cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, num_kv_heads=num_kv_heads)
        self.ff = FeedForward(d_model, dim_feedforward, dropout, activation)
        n = 3 if self.cross_attention else 2
        for i in range(1, n + 1):
            self.add_module(f"norm{i}", nn.LayerNorm(d_model, eps=layer_norm_eps))
        for i in range(1, n + 1):
            self.add_module(f"dropout{i}", nn.Dropout(dropout))

    def _residual(
        self,
        x: torch.Tensor,
        norm: nn.LayerNorm,
        dropout: nn.Dropout,
        sublayer: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One residual branch: pre-LN ``x + drop(f(LN(x)))`` or post-LN ``LN(x + drop(f(x)))``.

        Args:
            x: ``(B, L, E)``.
            norm, dropout: this branch's LayerNorm and dropout.
            sublayer: ``f``, returning ``(out (B, L, E), attention weights or None)``.

        Returns:
            ``(x (B, L, E), the sublayer's weights or None)``.
        """
        if self.norm_first:
            out, w = sublayer(norm(x))  # (B, L, E)
            return x + dropout(out), w  # (B, L, E)
        out, w = sublayer(x)  # (B, L, E)
        return norm(x + dropout(out)), w  # (B, L, E)

    def _feed_forward(self, x: torch.Tensor, norm: nn.LayerNorm, dropout: nn.Dropout) -> torch.Tensor:
        return self._residual(x, norm, dropout, lambda h: (self.ff(h), None))[0]  # (B, L, E)

    @torch.no_grad()
    def _load_from_torch(self, theirs: nn.Module, attention: dict[str, nn.MultiheadAttention]) -> None:
        """Copy a PyTorch layer's weights: ``attention`` (our name -> theirs), ``linear1/2``, ``norm1..n``.

        What can disagree is checked before the first weight is copied, so a refused layer is
        left as it was.
        """
        if theirs.norm_first != self.norm_first:
            raise ValueError(f"norm_first mismatch: PyTorch layer {theirs.norm_first}, this layer {self.norm_first}")
        _check_activation_matches(theirs, self.ff.activation)
        for name in ("linear1", "linear2"):
            src, dst = getattr(theirs, name), getattr(self.ff, name)
            if src.weight.shape != dst.weight.shape:
                theirs_shape, ours_shape = tuple(src.weight.shape), tuple(dst.weight.shape)
                raise ValueError(f"{name} shape mismatch: PyTorch {theirs_shape}, ours {ours_shape}")
        # Each attention checks itself before copying; both have the same sizes, so the first
        # one refuses anything the second would.
        for ours_name, mha in attention.items():
            getattr(self, ours_name).load_from_torch(mha)
        for name in ("linear1", "linear2"):
            src, dst = getattr(theirs, name), getattr(self.ff, name)
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
        for i in range(1, 4 if self.cross_attention else 3):
            src, dst = getattr(theirs, f"norm{i}"), getattr(self, f"norm{i}")
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
            dst.eps = src.eps


class EncoderLayer(_Layer):
    """One encoder layer: self-attention and feed-forward, each in a residual + LayerNorm.

    Args:
        d_model: ``E``.
        num_heads: ``H`` (divides ``E``).
        dim_feedforward: ``F``.
        dropout: dropout on attention weights, sublayer outputs and inside the feed-forward, in ``[0, 1)``.
        norm_first: LayerNorm before the sublayer (pre-LN) instead of after the residual sum.
        activation: ``"relu"`` or ``"gelu"``.
        layer_norm_eps: LayerNorm epsilon.
        num_kv_heads: ``Hkv`` key/value heads of every attention (default ``H``; see
            :class:`attnlab.core.attention.MultiHeadAttention`).
    """

    cross_attention = False

    @refuse_torch_mask_names(src_mask="src_keep", src_key_padding_mask="src_keep")
    def forward(
        self,
        x: torch.Tensor,
        *,
        src_keep: torch.Tensor | None = None,
        need_weights: bool = False,
        rotary: RotaryEmbedding | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the layer.

        Args:
            x: ``(B, S, E)``.
            src_keep: ``(B, S)`` bool, ``True`` at real tokens (course convention), or ``None``.
                Not PyTorch's ``src_mask`` / ``src_key_padding_mask`` (``True`` = blocked there).
            need_weights: also return the per-head attention weights (explicit-softmax path).
            rotary: RoPE applied to the self-attention's queries and keys, or ``None``.
            self_bias: float ``(1, H, S, S)`` added to the self-attention scores (ALiBi), or ``None``.

        Returns:
            ``(x (B, S, E), weights (B, H, S, S) or None)``.
        """
        _check_states("x", x, self.self_attn.embed_dim, "(B, S, E)")

        def self_attention(h):
            return self.self_attn(
                h,
                h,
                h,
                key_keep=src_keep,
                attn_keep=self_bias,
                rotary=rotary,
                need_weights=need_weights,
                average_attn_weights=False,
            )  # (B, S, E), (B, H, S, S) or None

        x, w = self._residual(x, self.norm1, self.dropout1, self_attention)  # (B, S, E)
        return self._feed_forward(x, self.norm2, self.dropout2), w  # (B, S, E)

    def load_from_torch(self, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy the weights of an ``nn.TransformerEncoderLayer`` (same sizes and placement); returns self."""
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be an nn.TransformerEncoderLayer, got {type(layer).__name__}")
        self._load_from_torch(layer, {"self_attn": layer.self_attn})
        return self


class DecoderLayer(_Layer):
    """One decoder layer: masked self-attention, encoder-decoder attention, feed-forward.

    Each sublayer sits in a residual connection with a LayerNorm (placement: ``norm_first``). The
    self-attention is causal: target position ``i`` sees target positions ``0..i`` only. The
    encoder-decoder ("cross") attention takes its queries from the decoder and its keys and values
    from the encoder output ``memory``.

    Args: as :class:`EncoderLayer`.
    """

    cross_attention = True

    @refuse_torch_mask_names(
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask="tgt_keep",
        memory_key_padding_mask="src_keep",
        src_mask="src_keep",
    )
    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        src_keep: torch.Tensor | None = None,
        tgt_keep: torch.Tensor | None = None,
        self_cache: dict[str, torch.Tensor] | None = None,
        cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        need_weights: bool = False,
        rotary: RotaryEmbedding | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Run the layer.

        Args:
            y: ``(B, T, E)`` decoder input (the ``T`` newest positions when a cache is used).
            memory: ``(B, S, E)`` encoder output; may be ``None`` when ``cross_kv`` is given.
            src_keep: ``(B, S)`` bool, ``True`` at real source tokens, or ``None`` (PyTorch calls
                its opposite ``memory_key_padding_mask``).
            tgt_keep: ``(B, t+T)`` bool key padding of the target, ``True`` at real tokens, or ``None``.
                With right padding and the causal mask, real queries never see padding, so
                :class:`Transformer` leaves it ``None``. The causal mask is built in: there is no
                argument for it (PyTorch's ``tgt_mask``).
            self_cache: ``{"k", "v"}`` ``(B, H, t, D)`` of earlier target positions; updated in place.
            cross_kv: ``(k, v)``, each ``(B, H, S, D)``, precomputed from ``memory`` by
                :meth:`cross_kv`; then ``memory`` itself is not projected again.
            need_weights: also return the per-head weights of both attentions.
            rotary: RoPE applied to the self-attention's queries and keys (positions ``t ..``), or ``None``.
            self_bias: float ``(1, H, T, t+T)`` added to the self-attention scores (ALiBi), or ``None``.

        Returns:
            ``(y (B, T, E), self weights (B, H, T, t+T) or None, cross weights (B, H, T, S) or None)``.
        """
        _check_states("y", y, self.self_attn.embed_dim, "(B, T, E)")
        if memory is None and cross_kv is None:
            raise ValueError("give memory (B, S, E), or its projected keys/values as cross_kv")

        def self_attention(h):
            # Causal whenever there is more than one query. With a cache the L new queries are the
            # last L of all keys, and causal_mask aligns to the end; a single query may see every key.
            return self.self_attn(
                h,
                h,
                h,
                key_keep=tgt_keep,
                attn_keep=self_bias,
                rotary=rotary,
                is_causal=h.shape[1] > 1,
                need_weights=need_weights,
                average_attn_weights=False,
                cache=self_cache,
            )  # (B, T, E), (B, H, T, t+T) or None

        def cross_attention(h):
            kv = dict(kv=cross_kv) if cross_kv is not None else dict(key=memory, value=memory)
            return self.cross_attn(
                h, **kv, key_keep=src_keep, need_weights=need_weights, average_attn_weights=False
            )  # (B, T, E), (B, H, T, S) or None

        y, w_self = self._residual(y, self.norm1, self.dropout1, self_attention)  # (B, T, E)
        y, w_cross = self._residual(y, self.norm2, self.dropout2, cross_attention)  # (B, T, E)
        return self._feed_forward(y, self.norm3, self.dropout3), w_self, w_cross  # (B, T, E)

    def cross_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Project the encoder output once into this layer's cross-attention keys and values.

        Args:
            memory: ``(B, S, E)`` encoder output.

        Returns:
            ``(k, v)``, each ``(B, Hkv, S, D)``, as :class:`MultiHeadAttention` keeps them in a cache.
        """
        _check_states("memory", memory, self.cross_attn.embed_dim, "(B, S, E)")
        return self.cross_attn.project_kv(memory, memory)  # (B, H, S, D) each

    def load_from_torch(self, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy the weights of an ``nn.TransformerDecoderLayer`` (same sizes and placement); returns self."""
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(f"layer must be an nn.TransformerDecoderLayer, got {type(layer).__name__}")
        self._load_from_torch(layer, {"self_attn": layer.self_attn, "cross_attn": layer.multihead_attn})
        return self


# ----------------------------------------------------------------------------------------------
# stacks
# ----------------------------------------------------------------------------------------------


class _Stack(nn.Module):
    """``N`` copies of ``layer_cls`` (and, for pre-LN, a final LayerNorm); shared by both stacks."""

    layer_cls: type[_Layer]

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        dim_feedforward: int,
        dropout: float = 0.0,
        *,
        norm_first: bool = True,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        num_layers = check_positive_int("num_layers", num_layers)
        _check_sizes(d_model, num_heads, dim_feedforward, dropout, layer_norm_eps, num_kv_heads)
        kw = dict(
            norm_first=norm_first, activation=activation, layer_norm_eps=layer_norm_eps, num_kv_heads=num_kv_heads
        )
        self.layers = nn.ModuleList(
            self.layer_cls(d_model, num_heads, dim_feedforward, dropout, **kw) for _ in range(num_layers)
        )
        # Pre-LN leaves the residual stream un-normalised; one LayerNorm at the end fixes its scale.
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()


class Encoder(_Stack):
    """``N`` encoder layers (and, for pre-LN, a final LayerNorm)."""

    layer_cls = EncoderLayer

    @refuse_torch_mask_names(mask=None, src_mask="src_keep", src_key_padding_mask="src_keep")
    def forward(
        self,
        x: torch.Tensor,
        *,
        src_keep: torch.Tensor | None = None,
        need_weights: bool = False,
        rotary: RotaryEmbedding | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``x (B, S, E)`` -> ``(states (B, S, E), per-layer weights [(B, H, S, S)] if need_weights)``.

        ``src_keep``: ``(B, S)`` bool, ``True`` at real tokens, or ``None``; ``rotary`` / ``self_bias``:
        see :meth:`EncoderLayer.forward` (the same for every layer).
        """
        _check_states("x", x, self.layers[0].self_attn.embed_dim, "(B, S, E)")
        maps = []
        for layer in self.layers:
            x, w = layer(
                x, src_keep=src_keep, need_weights=need_weights, rotary=rotary, self_bias=self_bias
            )  # (B, S, E)
            if w is not None:
                maps.append(w)
        return self.norm(x), maps  # (B, S, E)


class Decoder(_Stack):
    """``N`` decoder layers (and, for pre-LN, a final LayerNorm)."""

    layer_cls = DecoderLayer

    @refuse_torch_mask_names(
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask="src_keep",
        src_mask="src_keep",
    )
    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        *,
        src_keep: torch.Tensor | None = None,
        caches: list[tuple[dict, tuple[torch.Tensor, torch.Tensor]]] | None = None,
        need_weights: str | bool = False,
        rotary: RotaryEmbedding | None = None,
        self_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Run all layers.

        Args:
            y: ``(B, T, E)`` embedded decoder input.
            memory: ``(B, S, E)``.
            src_keep: ``(B, S)`` bool, ``True`` at real source tokens, or ``None``.
            caches: per layer ``(self_cache, cross_kv)`` for incremental decoding (see
                :meth:`DecoderLayer.forward`).
            need_weights: ``True`` = weights of every layer; ``"last"`` = of the last layer only (all
                other layers stay on the fused fast path); ``False`` = none.
            rotary, self_bias: see :meth:`DecoderLayer.forward` (the same for every layer).

        Returns:
            ``(y (B, T, E), self weights [(B, H, T, t+T)], cross weights [(B, H, T, S)])``.
        """
        if need_weights not in (True, False, "last"):
            raise ValueError(f"need_weights must be True, False or 'last', got {need_weights!r}")
        n = len(self.layers)
        if caches is not None and (not isinstance(caches, (list, tuple)) or len(caches) != n):
            raise ValueError(f"caches must be a list of {n} (self_cache, cross_kv) pairs, one per layer")
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.layers):
            want = need_weights is True or (need_weights == "last" and i == n - 1)
            self_cache, cross_kv = caches[i] if caches is not None else (None, None)
            y, w_self, w_cross = layer(
                y,
                memory,
                src_keep=src_keep,
                self_cache=self_cache,
                cross_kv=cross_kv,
                need_weights=want,
                rotary=rotary,
                self_bias=self_bias,
            )  # (B, T, E)
            if want:
                self_maps.append(w_self)
                cross_maps.append(w_cross)
        return self.norm(y), self_maps, cross_maps  # (B, T, E)


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformerConfig:
    """Configuration of :class:`Transformer` (frozen: a config is a value, saved beside checkpoints).

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes.
        d_model: ``E``, width of every layer (even, divisible by ``num_heads``).
        num_heads: ``H``.
        num_encoder_layers, num_decoder_layers: ``N`` of each stack.
        dim_feedforward: ``F``.
        dropout: dropout on embeddings, attention weights, sublayer outputs and inside the FFN.
        norm_first: pre-LN (``True``, the course's default) or post-LN (``False``, the 2017 paper).
        positions: ``"sinusoidal"`` (added to the embeddings; the default), ``"learned"``, ``"rope"``
            (rotary, in self-attention), ``"alibi"`` (distance bias on the self-attention scores) or
            ``"none"``. Checkpoints saved before ``"rope"``/``"alibi"`` existed load unchanged.
        max_len: ``P``: longest source, and most target positions (decoding steps), the model accepts.
        activation: ``"relu"`` (the paper) or ``"gelu"``.
        tie_embeddings: share the target embedding matrix with the output projection (as the paper).
        layer_norm_eps: LayerNorm epsilon.
        num_kv_heads: ``Hkv`` key/value heads of every attention; ``None`` (default) means
            ``num_heads`` (plain multi-head attention, as every checkpoint saved before this field);
            1 is multi-query attention.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    dim_feedforward: int = 256
    dropout: float = 0.0
    norm_first: bool = True
    positions: str = "sinusoidal"
    max_len: int = 128
    activation: str = "relu"
    tie_embeddings: bool = False
    layer_norm_eps: float = 1e-5
    num_kv_heads: int | None = None

    def __post_init__(self):
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "num_encoder_layers",
            "num_decoder_layers",
            "max_len",
        ):
            check_positive_int(name, getattr(self, name))
        _check_sizes(
            self.d_model, self.num_heads, self.dim_feedforward, self.dropout, self.layer_norm_eps, self.num_kv_heads
        )
        if self.positions not in POSITIONS:
            raise ValueError(f"positions={self.positions!r}; expected one of {POSITIONS}")
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.positions == "rope" and (self.d_model // self.num_heads) % 2:
            raise ValueError(
                f"rope positions need an even head dim d_model // num_heads, got {self.d_model}"
                f" // {self.num_heads} = {self.d_model // self.num_heads}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        for name in ("norm_first", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")


def init_token_embeddings(*embeddings: nn.Embedding) -> None:
    """N(0, 1/E) weights and a zero padding row, in the order given (the Transformers of lessons 06 and 11).

    Scaled by sqrt(E) in use, so the embeddings start at unit size, like the sinusoids.
    """
    for emb in embeddings:
        nn.init.normal_(emb.weight, std=emb.embedding_dim**-0.5)
        with torch.no_grad():
            emb.weight[PAD].zero_()


class Transformer(nn.Module):
    """Encoder-decoder Transformer speaking the course's decoding protocol (see module docstring).

    ``model.use_cache`` (default ``True``) chooses how :meth:`step` decodes: with the key/value
    cache, or by re-running the decoder over the whole prefix at every step.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        E = c.d_model
        self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, E, padding_idx=PAD)
        init_token_embeddings(self.src_emb, self.tgt_emb)
        self.src_pos = PositionalEncoding(c.positions, E, c.max_len)
        self.tgt_pos = PositionalEncoding(c.positions, E, c.max_len)
        self.drop = nn.Dropout(c.dropout)
        kw = dict(
            norm_first=c.norm_first,
            activation=c.activation,
            layer_norm_eps=c.layer_norm_eps,
            num_kv_heads=c.num_kv_heads,
        )
        self.encoder = Encoder(c.num_encoder_layers, E, c.num_heads, c.dim_feedforward, c.dropout, **kw)
        self.decoder = Decoder(c.num_decoder_layers, E, c.num_heads, c.dim_feedforward, c.dropout, **kw)
        if c.tie_embeddings:
            # A bias of its own; the weight is tgt_emb.weight (one tensor, saved once).
            self.out_bias = nn.Parameter(torch.zeros(c.tgt_vocab_size))
        else:
            self.out = nn.Linear(E, c.tgt_vocab_size)
        # No parameters and nothing saved: the state_dict is the same for every kind of positions.
        self.rotary = RotaryEmbedding(E // c.num_heads) if c.positions == "rope" else None
        self.use_cache = True

    # ----------------------------------------------------------------- checks and helpers
    def _device(self) -> torch.device:
        return self.src_emb.weight.device

    def _check_ids(self, name: str, x: torch.Tensor, dims: int) -> None:
        vocab = self.config.src_vocab_size if name == "src" else self.config.tgt_vocab_size
        check_token_ids(name, x, vocab_size=vocab, device=self._device(), dims=dims)

    def _check_memory(self, memory) -> None:
        if not isinstance(memory, dict) or not isinstance(memory.get("states"), torch.Tensor):
            raise TypeError(f"memory must be the dict that encode() returns, got {type(memory).__name__}")

    def _embed(self, emb: nn.Embedding, pos: PositionalEncoding, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = emb(ids) * math.sqrt(self.config.d_model)  # (B, L, E)
        return self.drop(pos(x, offset))  # (B, L, E)

    def _self_positions(self, L: int, S: int, device) -> dict:
        """The position arguments of the self-attention of ``L`` queries over ``S`` keys (both stacks)."""
        c = self.config
        bias = None
        if c.positions == "alibi":
            bias = alibi_bias(c.num_heads, L, S, device=device, dtype=self.src_emb.weight.dtype)[None]  # (1, H, L, S)
        return dict(rotary=self.rotary, self_bias=bias)

    def _logits(self, y: torch.Tensor) -> torch.Tensor:
        if self.config.tie_embeddings:
            return F.linear(y, self.tgt_emb.weight, self.out_bias)  # (..., V)
        return self.out(y)  # (..., V)

    @contextlib.contextmanager
    def kv_cache(self, enabled: bool) -> Iterator[Transformer]:
        """``with model.kv_cache(False): ...`` decodes without the cache inside the block."""
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {type(enabled).__name__} {enabled!r}")
        before, self.use_cache = self.use_cache, enabled
        try:
            yield self
        finally:
            self.use_cache = before

    # ----------------------------------------------------------------- encoder
    def _encode(self, src: torch.Tensor, need_weights: bool = False):
        self._check_ids("src", src, 2)
        self.src_pos.check_length(src.shape[1], f"the source (shape {tuple(src.shape)})")
        keep = src != PAD  # (B, S)
        if not bool(keep.any(1).all()):
            raise ValueError("every source sentence needs at least one token (found an all-padding row)")
        x = self._embed(self.src_emb, self.src_pos, src)  # (B, S, E)
        S = src.shape[1]
        states, maps = self.encoder(
            x, src_keep=keep, need_weights=need_weights, **self._self_positions(S, S, src.device)
        )  # (B, S, E)
        return states, keep, maps

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the encoder and prepare everything the decoder reuses at every step.

        Args:
            src: ``(B, S)`` source ids, padded with ``PAD`` on the right.

        Returns:
            memory dict of batch-first tensors: ``states (B, S, E)``, ``mask (B, S)`` bool and, per
            decoder layer ``i``, the cross-attention keys/values ``cross_k{i}``, ``cross_v{i}``
            ``(B, H, S, D)``, projected once here instead of at every step.
        """
        states, mask, _ = self._encode(src)
        memory = {"states": states, "mask": mask}
        for i, layer in enumerate(self.decoder.layers):
            memory[f"cross_k{i}"], memory[f"cross_v{i}"] = layer.cross_kv(states)  # (B, H, S, D) each
        return memory

    # ----------------------------------------------------------------- decoding protocol
    def init_state(self, memory: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Empty decoder state: per layer a key/value cache ``self_k{i}``, ``self_v{i}`` ``(B, Hkv, 0, D)``.

        With ``use_cache = False`` the state is the decoded prefix ``ys (B, 0)`` instead.
        """
        self._check_memory(memory)
        states = memory["states"]  # (B, S, E)
        B = states.shape[0]
        if not self.use_cache:
            return {"ys": torch.zeros(B, 0, dtype=torch.long, device=states.device)}  # (B, 0)
        c = self.config
        D = c.d_model // c.num_heads
        Hkv = c.num_heads if c.num_kv_heads is None else c.num_kv_heads
        empty = states.new_zeros(B, Hkv, 0, D)  # (B, Hkv, 0, D)
        state = {}
        for i in range(c.num_decoder_layers):
            state[f"self_k{i}"], state[f"self_v{i}"] = empty, empty
        return state

    def step(
        self, memory: dict[str, torch.Tensor], state: dict[str, torch.Tensor], y_prev: torch.Tensor, t: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """One decoding step.

        Args:
            memory: output of :meth:`encode`.
            state: from :meth:`init_state` or the previous step (not modified).
            y_prev: ``(B,)`` previous target token ids (``BOS`` at ``t = 0``).
            t: step index = position of ``y_prev`` in the target.

        Returns:
            ``(logits (B, V), new state, attn (B, S))``; ``attn`` is the last decoder layer's
            cross-attention for this step, averaged over heads.
        """
        self._check_memory(memory)
        self._check_ids("y_prev", y_prev, 1)
        if y_prev.shape[0] != memory["states"].shape[0]:
            raise ValueError(f"y_prev has {y_prev.shape[0]} rows but the memory has {memory['states'].shape[0]}")
        t = check_int("t", t, minimum=0)
        self.tgt_pos.check_length(t + 1, f"the target (decoding step t={t})")
        if not isinstance(state, dict):
            raise TypeError(f"state must be the dict that init_state() or step() returns, got {type(state).__name__}")
        if "ys" in state:  # no cache: re-run the decoder over the whole prefix
            ys = torch.cat([state["ys"], y_prev.unsqueeze(1)], dim=1)  # (B, t+1)
            y = self._embed(self.tgt_emb, self.tgt_pos, ys)  # (B, t+1, E)
            y, _, cross = self.decoder(
                y,
                memory["states"],
                src_keep=memory["mask"],
                need_weights="last",
                **self._self_positions(t + 1, t + 1, ys.device),
            )  # (B, t+1, E)
            logits = self._logits(y[:, -1])  # (B, V)
            return logits, {"ys": ys}, cross[-1][:, :, -1].mean(1)  # (B, V), ..., (B, S)
        caches, new_state = [], {}
        for i in range(self.config.num_decoder_layers):
            if f"self_k{i}" not in state or f"self_v{i}" not in state:
                raise ValueError(f"state has no key/value cache for decoder layer {i} (self_k{i}, self_v{i})")
            self_cache = {"k": state[f"self_k{i}"], "v": state[f"self_v{i}"]}  # (B, Hkv, t, D) each
            caches.append((self_cache, (memory[f"cross_k{i}"], memory[f"cross_v{i}"])))  # (B, Hkv, S, D) each
        y = self._embed(self.tgt_emb, self.tgt_pos, y_prev.unsqueeze(1), offset=t)  # (B, 1, E)
        y, _, cross = self.decoder(
            y,
            memory["states"],
            src_keep=memory["mask"],
            caches=caches,
            need_weights="last",
            **self._self_positions(1, t + 1, y_prev.device),
        )  # (B, 1, E)
        for i, (self_cache, _) in enumerate(caches):
            new_state[f"self_k{i}"], new_state[f"self_v{i}"] = self_cache["k"], self_cache["v"]  # (B, Hkv, t+1, D)
        logits = self._logits(y[:, 0])  # (B, V)
        return logits, new_state, cross[-1][:, :, 0].mean(1)  # (B, V), ..., (B, S)

    # ----------------------------------------------------------------- training
    def _check_pair(self, src: torch.Tensor, tgt_in: torch.Tensor) -> None:
        self._check_ids("src", src, 2)
        self._check_ids("tgt_in", tgt_in, 2)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in must be (B={src.shape[0]}, T), got shape {tuple(tgt_in.shape)}")
        self.tgt_pos.check_length(tgt_in.shape[1], f"the target (tgt_in of shape {tuple(tgt_in.shape)})")

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, *, return_attention: bool = False):
        """Score a batch of target sequences, all positions in parallel (teacher forcing).

        Args:
            src: ``(B, S)`` source ids.
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + target), ``T >= 1``.
            return_attention: also return the last decoder layer's cross-attention, averaged over
                heads (as the RNN models return theirs, for alignment agreement and plots).

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn (B, T, S))`` when ``return_attention``.
        """
        self._check_pair(src, tgt_in)
        states, keep, _ = self._encode(src)  # (B, S, E), (B, S)
        y = self._embed(self.tgt_emb, self.tgt_pos, tgt_in)  # (B, T, E)
        T = tgt_in.shape[1]
        y, _, cross = self.decoder(
            y,
            states,
            src_keep=keep,
            need_weights="last" if return_attention else False,
            **self._self_positions(T, T, tgt_in.device),
        )  # (B, T, E)
        logits = self._logits(y)  # (B, T, V)
        if not return_attention:
            return logits
        return logits, cross[-1].mean(1)  # (B, T, V), (B, T, S)

    def attention_maps(self, src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every attention map of the model for a batch (gold target prefix fed in).

        Args:
            src: ``(B, S)``; tgt_in: ``(B, T)``.

        Returns:
            ``{"encoder": (B, N_enc, H, S, S), "decoder": (B, N_dec, H, T, T), "cross": (B, N_dec, H, T, S)}``;
            ``maps["cross"][b]`` is the ``(layers, heads, T, S)`` stack the head viewer takes.
        """
        with eval_mode(self):
            self._check_pair(src, tgt_in)
            states, keep, enc_maps = self._encode(src, need_weights=True)  # (B, S, E)
            y = self._embed(self.tgt_emb, self.tgt_pos, tgt_in)  # (B, T, E)
            T = tgt_in.shape[1]
            _, self_maps, cross_maps = self.decoder(
                y, states, src_keep=keep, need_weights=True, **self._self_positions(T, T, tgt_in.device)
            )
        return {
            "encoder": torch.stack(enc_maps, dim=1),  # (B, N, H, S, S)
            "decoder": torch.stack(self_maps, dim=1),  # (B, N, H, T, T)
            "cross": torch.stack(cross_maps, dim=1),  # (B, N, H, T, S)
        }
