"""A decoder-only Transformer that translates as a prefix language model (lesson 11).

One causal stack replaces the encoder, the decoder and the cross-attention of
:class:`attnlab.models.transformer.Transformer`: the source and the target are one sequence,

    ``x_1 .. x_S <eos>  <bos> y_1 .. y_T``

where the target's ``<bos>`` is the separator ``<sep>`` between the two halves, and the model is
trained to predict the target tokens only (the loss never sees a source position). The source and
the target vocabularies are disjoint, so the model's one vocabulary is their union, stored as two
embedding tables; the output layer scores target tokens only.

Two masks (bool, ``True`` = may attend), chosen by ``DecoderOnlyConfig.mask``:

* ``"causal"`` (GPT): position ``i`` sees positions ``0 .. i``, source and target alike;
* ``"prefix"`` (the prefix LM of UniLM, Dong et al. 2019, and T5, Raffel et al. 2020): the source
  positions also see each other both ways (a bidirectional block over the prefix); the target
  stays causal. :func:`lm_mask` builds both.

The model is made of the course's own parts: the pre-LN layer of lesson 06 (an
:class:`attnlab.models.transformer.EncoderLayer` whose self-attention is given the mask and a
key/value cache), :class:`attnlab.core.attention.MultiHeadAttention`, the sinusoidal or learned
position table. Positions count real tokens only: with a right-padded batch of sources the padding
sits between source and target, and target token ``t`` still has position ``len(source) + t``
whatever the batch, so a sentence is translated the same alone or in a batch.

It speaks the course's decoding protocol (:mod:`attnlab.models.decoding`), so the course's greedy
decoding, beam search, training and evaluation take it unchanged: :meth:`DecoderOnly.encode` runs
the stack over the source once and keeps every layer's keys and values (the source is in the
cache once); :meth:`DecoderOnly.step` feeds one target token and appends its keys and values. The
``attn`` it returns is the last layer's attention from the new target token to the source
positions, averaged over heads (it does not sum to 1: the rest went to the target prefix).

Attention sinks (Xiao et al. 2023): :meth:`DecoderOnly.attention_window` restricts every query to
the last ``window`` positions, optionally keeping the first ``sinks`` positions in view.

Shape legend
------------
B   batch size
S   source length (incl. ``<eos>``, right-padded)
T   target length (decoder inputs: ``<bos>`` + target)
L   sequence length ``S + T`` (or ``S + t`` while decoding)
t   number of target tokens decoded so far
E   model width ``d_model``
H   number of heads
D   head width ``E // H``
N   number of layers
V   target vocabulary size
P   context length ``max_len`` (positions the table covers)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from attnlab.core.checks import check_choice, check_int, check_positive_int, check_token_ids, eval_mode
from attnlab.core.masks import causal_mask
from attnlab.data.vocab import PAD
from attnlab.models.transformer import (
    EncoderLayer,
    PositionalEncoding,
    _check_sizes,
    _check_states,
    init_token_embeddings,
)

__all__ = ["MASKS", "lm_mask", "window_mask", "DecoderOnlyLayer", "DecoderOnlyConfig", "DecoderOnly"]

MASKS = ("causal", "prefix")
_POSITIONS = ("sinusoidal", "learned")


def lm_mask(is_source: torch.Tensor, kind: str = "causal") -> torch.Tensor:
    """The self-attention mask of a ``source <sep> target`` sequence (bool, ``True`` = may attend).

    Args:
        is_source: ``(L,)`` or ``(B, L)`` bool, ``True`` at source positions (the first ones).
        kind: ``"causal"`` (query ``i`` sees keys ``0 .. i``) or ``"prefix"`` (that, plus every
            source query sees every source key: the prefix is read both ways).

    Returns:
        ``(L, L)`` or ``(B, L, L)`` bool, rows = queries, columns = keys.
    """
    check_choice("kind", kind, MASKS)
    if not isinstance(is_source, torch.Tensor) or is_source.dtype != torch.bool or is_source.dim() not in (1, 2):
        raise TypeError(f"is_source must be a (L,) or (B, L) bool tensor, got {is_source!r}")
    L = is_source.shape[-1]
    mask = causal_mask(L, device=is_source.device)  # (L, L)
    if kind == "prefix":
        mask = mask | (is_source.unsqueeze(-1) & is_source.unsqueeze(-2))  # (L, L) or (B, L, L)
    return mask


def window_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int, sinks: int = 0) -> torch.Tensor:
    """Sliding-window attention with optional sink tokens (Xiao et al. 2023), by positions.

    Args:
        q_pos: ``(B, Lq)`` positions of the queries; k_pos: ``(B, Lk)`` positions of the keys.
        window: a query at position ``p`` sees keys at ``p - window + 1 .. p`` (the causal or prefix
            mask is applied on top of this one).
        sinks: the keys at positions ``0 .. sinks - 1`` stay in view whatever the window.

    Returns:
        ``(B, Lq, Lk)`` bool.
    """
    window = check_positive_int("window", window)
    sinks = check_int("sinks", sinks, minimum=0)
    dist = q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)  # (B, Lq, Lk)
    return (dist < window) | (k_pos.unsqueeze(-2) < sinks)  # (B, Lq, Lk)


class DecoderOnlyLayer(EncoderLayer):
    """The course's pre-LN (or post-LN) layer with a mask and a key/value cache on its self-attention.

    The weights, their order and :meth:`load_from_torch` are :class:`EncoderLayer`'s; only the
    call differs: the mask ``keep`` ``(B, 1, L, t+L)`` decides who sees whom, and ``cache`` holds the
    keys/values of earlier positions (appended in place).
    """

    def forward(  # noqa: D417 (the arguments are documented below)
        self,
        x: torch.Tensor,
        *,
        keep: torch.Tensor | None = None,
        cache: dict[str, torch.Tensor] | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the layer.

        Args:
            x: ``(B, L, E)`` (the ``L`` newest positions when a cache is used).
            keep: bool ``(B, 1, L, t+L)`` or ``(L, t+L)``, ``True`` = may attend.
            cache: ``{"k", "v"}`` ``(B, H, t, D)`` of earlier positions, or ``{}``; updated in place.
            need_weights: also return the per-head weights.

        Returns:
            ``(x (B, L, E), weights (B, H, L, t+L) or None)``.
        """
        _check_states("x", x, self.self_attn.embed_dim, "(B, L, E)")

        def self_attention(h):
            return self.self_attn(
                h, h, h, attn_keep=keep, need_weights=need_weights, average_attn_weights=False, cache=cache
            )  # (B, L, E), (B, H, L, t+L) or None

        x, w = self._residual(x, self.norm1, self.dropout1, self_attention)  # (B, L, E)
        return self._feed_forward(x, self.norm2, self.dropout2), w  # (B, L, E)


@dataclass(frozen=True)
class DecoderOnlyConfig:
    """Configuration of :class:`DecoderOnly` (frozen).

    Attributes:
        src_vocab_size, tgt_vocab_size: the two halves of the one vocabulary.
        d_model: ``E``.
        num_heads: ``H``.
        num_layers: ``N``.
        dim_feedforward: ``F``.
        dropout: dropout on embeddings, attention weights, sublayer outputs and inside the FFN.
        norm_first: pre-LN (the course's default) or post-LN.
        positions: ``"sinusoidal"`` or ``"learned"``.
        max_len: ``P``, the context: the most positions (source + ``<eos>`` + ``<bos>`` + target) in
            one sequence; a longer one is refused.
        mask: ``"causal"`` (GPT) or ``"prefix"`` (the source read both ways).
        activation: ``"relu"`` or ``"gelu"``.
        layer_norm_eps: LayerNorm epsilon.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 3
    dim_feedforward: int = 128
    dropout: float = 0.0
    norm_first: bool = True
    positions: str = "sinusoidal"
    max_len: int = 160
    mask: str = "causal"
    activation: str = "relu"
    layer_norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("src_vocab_size", "tgt_vocab_size", "num_layers", "max_len"):
            check_positive_int(name, getattr(self, name))
        _check_sizes(self.d_model, self.num_heads, self.dim_feedforward, self.dropout, self.layer_norm_eps)
        check_choice("positions", self.positions, _POSITIONS)
        check_choice("mask", self.mask, MASKS)
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if not isinstance(self.norm_first, bool):
            raise TypeError(f"norm_first must be a bool, got {self.norm_first!r}")


class DecoderOnly(nn.Module):
    """Decoder-only Transformer over ``source <sep> target`` (see the module docstring).

    ``model.use_cache`` (default ``True``): decode with the key/value cache, or re-run the whole
    sequence at every step (the same tokens, slower).
    """

    def __init__(self, config: DecoderOnlyConfig):
        super().__init__()
        if not isinstance(config, DecoderOnlyConfig):
            raise TypeError(f"config must be a DecoderOnlyConfig, got {type(config).__name__}")
        self.config = c = config
        E = c.d_model
        self.src_emb = nn.Embedding(c.src_vocab_size, E, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, E, padding_idx=PAD)
        init_token_embeddings(self.src_emb, self.tgt_emb)
        self.pos = PositionalEncoding(c.positions, E, c.max_len)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(
                E,
                c.num_heads,
                c.dim_feedforward,
                c.dropout,
                norm_first=c.norm_first,
                activation=c.activation,
                layer_norm_eps=c.layer_norm_eps,
            )
            for _ in range(c.num_layers)
        )
        self.norm = nn.LayerNorm(E, eps=c.layer_norm_eps) if c.norm_first else nn.Identity()
        self.out = nn.Linear(E, c.tgt_vocab_size)
        self.use_cache = True
        self.window: int | None = None
        self.sinks = 0

    # ----------------------------------------------------------------- helpers
    def _device(self) -> torch.device:
        return self.src_emb.weight.device

    @contextlib.contextmanager
    def kv_cache(self, enabled: bool) -> Iterator[DecoderOnly]:
        """``with model.kv_cache(False): ...`` decodes without the cache inside the block."""
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be a bool, got {type(enabled).__name__} {enabled!r}")
        before, self.use_cache = self.use_cache, enabled
        try:
            yield self
        finally:
            self.use_cache = before

    @contextlib.contextmanager
    def attention_window(self, window: int | None, sinks: int = 0) -> Iterator[DecoderOnly]:
        """Inside the block every query sees only the last ``window`` positions, plus the first ``sinks``.

        ``window=None`` is full attention. The positions keep their original numbers (the course's
        positions are absolute); Xiao et al. renumber the positions inside a rolling cache, which
        matters for relative positions (RoPE), not for a table of absolute ones.
        """
        if window is not None:
            window = check_positive_int("window", window)
        sinks = check_int("sinks", sinks, minimum=0)
        before = self.window, self.sinks
        self.window, self.sinks = window, sinks
        try:
            yield self
        finally:
            self.window, self.sinks = before

    def _check_context(self, length: int, what: str) -> None:
        if length > self.config.max_len:
            raise ValueError(
                f"{what} needs {length} positions but the model's context is max_len={self.config.max_len}; "
                "use a shorter sequence or a model built with a larger max_len"
            )

    def _embed(self, emb: nn.Embedding, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``ids (B, L)`` at positions ``pos (B, L)`` -> ``(B, L, E)``."""
        x = emb(ids) * math.sqrt(self.config.d_model)  # (B, L, E)
        if self.pos.kind == "sinusoidal":
            x = x + self.pos.table[pos].to(x.dtype)  # (B, L, E)
        else:
            x = x + self.pos.table_emb(pos)  # (B, L, E)
        return self.drop(x)  # (B, L, E)

    def _mask(self, keep_k: torch.Tensor, src_k: torch.Tensor, pos_k: torch.Tensor, n_new: int) -> torch.Tensor:
        """The ``(B, 1, n_new, K)`` mask of the last ``n_new`` of ``K`` positions as queries."""
        K = keep_k.shape[1]
        src_q, pos_q = src_k[:, K - n_new :], pos_k[:, K - n_new :]  # (B, n_new)
        mask = causal_mask(n_new, K, device=keep_k.device).unsqueeze(0)  # (1, n_new, K)
        if self.config.mask == "prefix":
            mask = mask | (src_q.unsqueeze(-1) & src_k.unsqueeze(-2))  # (B, n_new, K)
        mask = mask & keep_k.unsqueeze(1)  # (B, n_new, K)
        if self.window is not None:
            mask = mask & window_mask(pos_q, pos_k, self.window, self.sinks)  # (B, n_new, K)
        return mask.unsqueeze(1)  # (B, 1, n_new, K)

    def _run(self, x, keep_k, src_k, pos_k, caches=None, need_weights: bool | str = False):
        """Run every layer on the newest ``x.shape[1]`` positions; returns ``(h (B, n, E), [weights])``."""
        mask = self._mask(keep_k, src_k, pos_k, x.shape[1])  # (B, 1, n, K)
        maps = []
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            want = need_weights is True or (need_weights == "last" and i == n - 1)
            x, w = layer(x, keep=mask, cache=None if caches is None else caches[i], need_weights=want)  # (B, n, E)
            if want:
                maps.append(w)
        return self.norm(x), maps  # (B, n, E)

    def _check_src(self, src: torch.Tensor) -> torch.Tensor:
        check_token_ids("src", src, vocab_size=self.config.src_vocab_size, device=self._device(), dims=2)
        keep = src != PAD  # (B, S)
        if not bool(keep.any(1).all()):
            raise ValueError("every source sentence needs at least one token (found an all-padding row)")
        return keep

    def _sequence(self, src: torch.Tensor, tgt_in: torch.Tensor):
        """Embedded ``source <sep> target`` and its bookkeeping: ``x, keep, is_source, positions`` (B, S+T)."""
        keep_s = self._check_src(src)  # (B, S)
        check_token_ids("tgt_in", tgt_in, vocab_size=self.config.tgt_vocab_size, device=self._device(), dims=2)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in must be (B={src.shape[0]}, T), got shape {tuple(tgt_in.shape)}")
        keep = torch.cat([keep_s, tgt_in != PAD], dim=1)  # (B, L)
        pos = (keep.long().cumsum(1) - 1).clamp(min=0)  # (B, L) real tokens only are counted
        self._check_context(int(pos.max()) + 1, f"the sequence source <sep> target (src {tuple(src.shape)}, "
                            f"tgt_in {tuple(tgt_in.shape)})")
        S = src.shape[1]
        is_src = torch.zeros_like(keep)  # (B, L)
        is_src[:, :S] = keep_s
        x = torch.cat(
            [self._embed(self.src_emb, src, pos[:, :S]), self._embed(self.tgt_emb, tgt_in, pos[:, S:])], dim=1
        )  # (B, L, E)
        return x, keep, is_src, pos

    # ----------------------------------------------------------------- training
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, *, return_attention: bool = False):
        """Score the target tokens of ``source <sep> target`` in parallel (teacher forcing).

        Args:
            src: ``(B, S)`` source ids (``<eos>`` last), right-padded.
            tgt_in: ``(B, T)`` ``<bos>`` (the separator) + target.
            return_attention: also return the last layer's attention from the target positions
                to the source positions, averaged over heads.

        Returns:
            ``logits (B, T, V)`` (one per target position: the loss is on the target only), or
            ``(logits, attn (B, T, S))``.
        """
        x, keep, is_src, pos = self._sequence(src, tgt_in)  # (B, L, E), (B, L) x3
        h, maps = self._run(x, keep, is_src, pos, need_weights="last" if return_attention else False)  # (B, L, E)
        S = src.shape[1]
        logits = self.out(h[:, S:])  # (B, T, V)
        if not return_attention:
            return logits
        return logits, maps[-1][:, :, S:, :S].mean(1)  # (B, T, V), (B, T, S)

    def attention_maps(self, src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every layer's and head's attention for a batch (gold target fed in).

        Returns:
            ``{"self": (B, N, H, L, L), "target_to_source": (B, N, H, T, S)}``; the second is the part
            of the first where target positions (queries) look at source positions (keys): where
            the encoder-decoder had its cross-attention.
        """
        with eval_mode(self), torch.no_grad():
            x, keep, is_src, pos = self._sequence(src, tgt_in)
            _, maps = self._run(x, keep, is_src, pos, need_weights=True)
        full = torch.stack(maps, dim=1)  # (B, N, H, L, L)
        S = src.shape[1]
        return {"self": full, "target_to_source": full[:, :, :, S:, :S]}

    # ----------------------------------------------------------------- decoding protocol
    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the stack over the source once; keep every layer's keys and values.

        Returns:
            memory dict (batch-first): ``src (B, S)``, ``mask (B, S)`` bool, ``src_len (B,)`` and per
            layer ``k{i}``, ``v{i}`` ``(B, H, S, D)`` (with ``use_cache = False`` only the first three).
        """
        keep = self._check_src(src)  # (B, S)
        src_len = keep.sum(1)  # (B,)
        memory = {"src": src, "mask": keep, "src_len": src_len}
        if not self.use_cache:
            return memory
        pos = (keep.long().cumsum(1) - 1).clamp(min=0)  # (B, S)
        self._check_context(int(src_len.max()) + 1, f"the source (shape {tuple(src.shape)}) and <sep>")
        caches = [{} for _ in self.layers]
        self._run(self._embed(self.src_emb, src, pos), keep, keep, pos, caches=caches)
        for i, cache in enumerate(caches):
            memory[f"k{i}"], memory[f"v{i}"] = cache["k"], cache["v"]  # (B, H, S, D) each
        return memory

    def _check_memory(self, memory) -> None:
        if not isinstance(memory, dict) or not isinstance(memory.get("src"), torch.Tensor):
            raise TypeError(f"memory must be the dict that encode() returns, got {type(memory).__name__}")

    def init_state(self, memory: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The cache holding the source: ``k{i}``, ``v{i}`` ``(B, H, S, D)`` and ``keep (B, S)``.

        With ``use_cache = False`` the state is the decoded prefix ``ys (B, 0)`` instead.
        """
        self._check_memory(memory)
        src = memory["src"]  # (B, S)
        if not self.use_cache:
            return {"ys": src.new_zeros(src.shape[0], 0)}  # (B, 0)
        if "k0" not in memory:
            raise ValueError("memory holds no key/value cache: it was encoded with use_cache = False")
        state = {"keep": memory["mask"]}  # (B, S)
        for i in range(len(self.layers)):
            state[f"k{i}"], state[f"v{i}"] = memory[f"k{i}"], memory[f"v{i}"]  # (B, H, S, D) each
        return state

    def step(
        self, memory: dict[str, torch.Tensor], state: dict[str, torch.Tensor], y_prev: torch.Tensor, t: int
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """Feed target token ``t`` (``<bos>``, the separator, at ``t = 0``); predict token ``t + 1``.

        Returns:
            ``(logits (B, V), new state, attn (B, S))``: ``attn`` is the last layer's attention of
            this token to the source positions, averaged over heads.
        """
        self._check_memory(memory)
        check_token_ids("y_prev", y_prev, vocab_size=self.config.tgt_vocab_size, device=self._device(), dims=1)
        src = memory["src"]  # (B, S)
        if y_prev.shape[0] != src.shape[0]:
            raise ValueError(f"y_prev has {y_prev.shape[0]} rows but the memory has {src.shape[0]}")
        t = check_int("t", t, minimum=0)
        if not isinstance(state, dict):
            raise TypeError(f"state must be the dict that init_state() or step() returns, got {type(state).__name__}")
        S = src.shape[1]
        if "ys" in state:  # no cache: the whole sequence again
            ys = torch.cat([state["ys"], y_prev.unsqueeze(1)], dim=1)  # (B, t+1)
            x, keep, is_src, pos = self._sequence(src, ys)
            h, maps = self._run(x, keep, is_src, pos, need_weights="last")  # (B, L, E)
            return self.out(h[:, -1]), {"ys": ys}, maps[-1][:, :, -1, :S].mean(1)  # (B, V), ..., (B, S)
        q_pos = (memory["src_len"] + t).unsqueeze(1)  # (B, 1)
        self._check_context(int(q_pos.max()) + 1, f"decoding step t={t}")
        if "keep" not in state or state["keep"].shape[1] != S + t:
            raise ValueError(f"state must hold the cache of the source and {t} target tokens (keep of length {S + t})")
        keep = torch.cat([state["keep"], torch.ones_like(y_prev, dtype=torch.bool).unsqueeze(1)], dim=1)  # (B, S+t+1)
        pos = (keep.long().cumsum(1) - 1).clamp(min=0)  # (B, S+t+1)
        is_src = torch.zeros_like(keep)  # (B, S+t+1)
        is_src[:, :S] = memory["mask"]
        caches = [{"k": state[f"k{i}"], "v": state[f"v{i}"]} for i in range(len(self.layers))]
        x = self._embed(self.tgt_emb, y_prev.unsqueeze(1), q_pos)  # (B, 1, E)
        h, maps = self._run(x, keep, is_src, pos, caches=caches, need_weights="last")  # (B, 1, E)
        new_state = {"keep": keep}
        for i, cache in enumerate(caches):
            new_state[f"k{i}"], new_state[f"v{i}"] = cache["k"], cache["v"]  # (B, H, S+t+1, D) each
        return self.out(h[:, 0]), new_state, maps[-1][:, :, 0, :S].mean(1)  # (B, V), ..., (B, S)
