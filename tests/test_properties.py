"""Property-based invariants of the attention core, checked with hypothesis over random shapes, dtypes and masks.

Each property is a plain function ``check_<name>(case)`` that raises ``AssertionError`` when the
invariant fails; ``case`` is a small dict drawn by a hypothesis strategy (shapes, dtype, a seed for
the tensors' values, masks, block sizes) and is what hypothesis prints as a counterexample. Two
tests use each check:

* ``test_<name>`` runs it with ``@given`` on the library as it is;
* ``test_<name>_catches_<bug>`` plants a bug (a monkeypatched function, or a mutant compiled from
  the library's own source with one expression changed), lets :func:`hypothesis.find` search for a
  case on which the check fails, asserts that one is found, that it has the features the bug needs
  to show (e.g. two heads and two positions for a head split that forgets to transpose) and that
  the unbroken library passes that very case. A property that cannot fail is no test.

Determinism: every run is derandomized (the same examples on every machine and in CI) and no
example database is written. What must hold exactly (zero weight on padding, zero rows) is compared
with ``==`` in both dtypes; two computations of one quantity agree within ``TOL``: tight for float64,
measured for float32.

Invariants
----------
a. self-attention without positions is permutation-equivariant (also a stack of encoder layers);
b. a causal model's output at position t does not change when later inputs change;
c. padding gets exactly zero weight, and padded keys/values do not reach the output;
d. a fully masked row gives zero weights and a zero output, never NaN (also in the gradients);
e. grouped-query attention equals multi-head attention with each key/value head repeated for its
   group (with as many key/value heads as heads: plain multi-head attention);
f. tiled attention equals naive attention for every block size, causal flag and mask;
g. the parallel and recurrent forms of monotonic attention agree (values and gradients), also for
   selection probabilities of exactly 0 or 1 or close to 1;
h. incremental decoding with a key/value cache computes what the full forward computes
   (MultiHeadAttention's cache, the Transformer's decoding steps, the rolling cache of
   sliding-window attention).
"""

from __future__ import annotations

import inspect
import sys
import textwrap

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from attnlab.core import attention, masks, scale
from attnlab.core.attention import MultiHeadAttention
from attnlab.models import transformer, variants
from attnlab.models.transformer import DecoderLayer, RotaryEmbedding, Transformer, TransformerConfig

F64, F32 = torch.float64, torch.float32
DTYPES = st.sampled_from([F32, F64])

_COMMON = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
PROPS = settings(max_examples=30, **_COMMON)  # each property on the library as it is
FIND = settings(max_examples=300, **_COMMON)  # the search for a counterexample to a planted bug

# Two computations of the same quantity in another order (tiles, cache chunks, permuted sums, the
# fused kernel) differ by rounding only. Measured worst case of |got - want| / (1 + |want|) over 400
# examples of every property (100 for the Transformer ones), under ATEN_CPU_CAPABILITY=avx512, avx2
# and default: float64 1.4e-15, float32 6.8e-7 (step-by-step logits; everything else <= 4e-7).
# The tolerances leave a margin of about 700 and 15. Comparisons that must hold exactly (weights on
# padding, fully masked rows) use ==.
TOL = {F64: dict(atol=1e-12, rtol=1e-12), F32: dict(atol=1e-5, rtol=1e-5)}


def close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """``assert_close`` that raises AssertionError (hypothesis's failure) with the dtype's tolerance."""
    torch.testing.assert_close(got, want, **TOL[want.dtype], msg=lambda m: f"{what}: {m}")


def randn(g: torch.Generator, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def seeded(seed: int, build):
    """``build()`` under the global RNG seeded with ``seed`` (modules initialise from it), leaving it as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def counterexample(strategy, check):
    """The (shrunk) case on which ``check`` raises AssertionError, found by hypothesis; fails the test if none."""

    def fails(case) -> bool:
        try:
            check(case)
        except AssertionError:
            return True
        return False

    case = find(strategy, fails, settings=FIND)
    print(f"\n{check.__name__} counterexample: {case}")
    return case


def mutant(fn, *edits: tuple[str, str]):
    """A copy of the library function (or method) ``fn`` compiled from its source with each ``(old, new)`` edit made.

    The copy runs in a copy of its module's namespace, so it calls the same helpers. Raises when
    an ``old`` is not found exactly once (the library changed: update the planted bug).
    """
    src = textwrap.dedent(inspect.getsource(fn))
    for old, new in edits:
        assert src.count(old) == 1, f"planted bug: {old!r} occurs {src.count(old)} times in {fn.__qualname__}"
        src = src.replace(old, new)
    raw = inspect.unwrap(fn)
    ns = dict(vars(sys.modules[raw.__module__]))
    # compiled as its module was: with `from __future__ import annotations` where the module has it
    flags = getattr(ns.get("annotations"), "compiler_flag", 0)
    exec(compile(src, f"<mutant of {fn.__qualname__}>", "exec", flags=flags, dont_inherit=True), ns)
    return ns[raw.__name__]


def bools(n: int):
    return st.lists(st.booleans(), min_size=n, max_size=n)


# ----------------------------------------------------------------------------------------------
# a. permutation equivariance of self-attention without positions
# ----------------------------------------------------------------------------------------------


@st.composite
def permutation_cases(draw):
    B, L = draw(st.integers(1, 2)), draw(st.integers(1, 5))
    H, D = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return dict(
        B=B,
        L=L,
        H=H,
        D=D,
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
        keep=draw(st.none() | bools(B * L)),
        perm=draw(st.permutations(range(L))),
        need_weights=draw(st.booleans()),
        layers=draw(st.integers(1, 2)),
    )


def check_permutation_equivariance(c):
    B, L, H, D, dtype = c["B"], c["L"], c["H"], c["D"], c["dtype"]
    E, perm = H * D, torch.tensor(c["perm"], dtype=torch.long)
    mha = seeded(c["seed"], lambda: MultiHeadAttention(E, H).to(dtype).eval())
    g = torch.Generator().manual_seed(c["seed"])
    x = randn(g, dtype, B, L, E)
    keep = None if c["keep"] is None else torch.tensor(c["keep"]).view(B, L)
    with torch.no_grad():
        out, w = mha(x, x, x, key_keep=keep, need_weights=c["need_weights"])  # (B, L, E), (B, L, L)
        xp = x[:, perm]
        out_p, w_p = mha(xp, xp, xp, key_keep=None if keep is None else keep[:, perm], need_weights=c["need_weights"])
    close(out_p, out[:, perm], "MultiHeadAttention(x[perm]) vs MultiHeadAttention(x)[perm]")
    if c["need_weights"]:
        close(w_p, w[:, perm][:, :, perm], "weights of the permuted input")
    # a stack of encoder layers (self-attention, feed-forward, residuals, LayerNorms): still no positions
    encoder = seeded(c["seed"], lambda: transformer.Encoder(c["layers"], E, H, 2 * E).to(dtype).eval())
    with torch.no_grad():
        states, _ = encoder(x, src_keep=keep)
        states_p, _ = encoder(xp, src_keep=None if keep is None else keep[:, perm])
    close(states_p, states[:, perm], "Encoder(x[perm]) vs Encoder(x)[perm]")
    # the functional form: permuting queries permutes the output rows, permuting keys and values
    # together (and the mask's columns) changes nothing
    q, k, v = randn(g, dtype, B, H, L, D), randn(g, dtype, B, H, L + 1, D), randn(g, dtype, B, H, L + 1, D)
    kperm = torch.randperm(L + 1, generator=g)
    mask = torch.rand(L, L + 1, generator=g) < 0.7  # (L, S)
    for need_weights in (True, False):
        ref, _ = attention.scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
        got, _ = attention.scaled_dot_product_attention(
            q[..., perm, :], k[..., kperm, :], v[..., kperm, :], mask[perm][:, kperm], need_weights=need_weights
        )
        close(got, ref[..., perm, :], f"attention with permuted inputs (need_weights={need_weights})")


@PROPS
@given(permutation_cases())
def test_self_attention_without_positions_is_permutation_equivariant(case):
    check_permutation_equivariance(case)


def test_permutation_property_catches_a_head_split_without_transpose(monkeypatch):
    def split_heads_no_transpose(x, num_heads):  # (..., L, E) -> (..., H, L, D) by reshape alone: mixes positions
        *lead, L, E = x.shape
        return x.reshape(*lead, num_heads, L, E // num_heads)

    monkeypatch.setattr(attention, "split_heads", split_heads_no_transpose)
    case = counterexample(permutation_cases(), check_permutation_equivariance)
    assert case["H"] >= 2 and case["L"] >= 2  # one head, or one position, hides the bug
    monkeypatch.undo()
    check_permutation_equivariance(case)


# ----------------------------------------------------------------------------------------------
# b. causality: the output at position t does not depend on later inputs
# ----------------------------------------------------------------------------------------------


@st.composite
def causal_cases(draw):
    L = draw(st.integers(1, 5))
    B = draw(st.integers(1, 2))
    S = draw(st.integers(max(1, L - 2), L + 3))
    return dict(
        B=B,
        H=draw(st.integers(1, 2)),
        L=L,
        S=S,
        D=draw(st.integers(1, 3)),
        t=draw(st.integers(0, L - 1)),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
        key_keep=draw(st.none() | bools(B * S)),
        need_weights=draw(st.booleans()),
    )


def check_causal_attention(c):
    """Query i sees keys 0 .. i + S - L (aligned to the end); changing anything later leaves rows 0..t alone."""
    B, H, L, S, D, t, dtype = c["B"], c["H"], c["L"], c["S"], c["D"], c["t"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    q, k, v = randn(g, dtype, B, H, L, D), randn(g, dtype, B, H, S, D), randn(g, dtype, B, H, S, D)
    mask = None if c["key_keep"] is None else torch.tensor(c["key_keep"]).view(B, 1, 1, S)
    first_hidden = max(0, t + 1 + S - L)  # the first key that rows 0..t may not see
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    q2[..., t + 1 :, :] = randn(g, dtype, B, H, L - t - 1, D)
    k2[..., first_hidden:, :] = randn(g, dtype, B, H, S - first_hidden, D)
    v2[..., first_hidden:, :] = randn(g, dtype, B, H, S - first_hidden, D)
    sdpa = attention.scaled_dot_product_attention
    out, w = sdpa(q, k, v, mask, is_causal=True, need_weights=c["need_weights"])
    out2, _ = sdpa(q2, k2, v2, mask, is_causal=True, need_weights=c["need_weights"])
    close(out2[..., : t + 1, :], out[..., : t + 1, :], f"causal attention rows 0..{t} after changing later inputs")
    if c["need_weights"]:
        hidden = w[..., : t + 1, first_hidden:]
        assert bool((hidden == 0).all()), f"rows 0..{t} give weight to keys from {first_hidden} on: {hidden}"


@PROPS
@given(causal_cases())
def test_causal_attention_ignores_later_inputs(case):
    check_causal_attention(case)


def test_causal_property_catches_a_causal_mask_shifted_by_one(monkeypatch):
    def causal_mask_off_by_one(L, S=None, *, device=None):  # query i also sees key i + 1
        S = L if S is None else S
        return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L + 1)

    monkeypatch.setattr(attention, "causal_mask", causal_mask_off_by_one)
    case = counterexample(causal_cases(), check_causal_attention)
    assert case["L"] >= 2  # the one extra key the last query gets lies beyond the end
    # the fused kernel's own causal flag (no mask, L == S, no weights) does not use causal_mask
    assert case["key_keep"] is not None or case["need_weights"] or case["L"] != case["S"]
    monkeypatch.undo()
    check_causal_attention(case)


VOCAB = 7  # ids 4..6 are words, 1 is <bos>; no <pad> in the tests' sources


@st.composite
def transformer_cases(draw):
    H = draw(st.sampled_from([1, 2]))
    return dict(
        B=draw(st.integers(1, 2)),
        S=draw(st.integers(1, 4)),
        T=draw(st.integers(1, 5)),
        H=H,
        D=draw(st.sampled_from([2, 4])),
        Hkv=draw(st.sampled_from([1, H])),
        layers=draw(st.integers(1, 2)),
        positions=draw(st.sampled_from(transformer.POSITIONS)),
        norm_first=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def tiny_transformer(c) -> tuple[Transformer, torch.Tensor, torch.Tensor]:
    """A random tiny Transformer in ``c["dtype"]`` and a random ``(src (B, S), tgt_in (B, T))`` batch."""
    config = TransformerConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        d_model=c["H"] * c["D"],
        num_heads=c["H"],
        num_kv_heads=c["Hkv"],
        num_encoder_layers=c["layers"],
        num_decoder_layers=c["layers"],
        dim_feedforward=8,
        positions=c["positions"],
        norm_first=c["norm_first"],
        max_len=8,
    )
    model = seeded(c["seed"], lambda: Transformer(config).to(c["dtype"]).eval())
    g = torch.Generator().manual_seed(c["seed"])
    src = torch.randint(1, VOCAB, (c["B"], c["S"]), generator=g)
    tgt_in = torch.randint(1, VOCAB, (c["B"], c["T"]), generator=g)
    return model, src, tgt_in


def check_causal_decoder(c):
    """The decoder's logits at position t are those of the prefix 0..t, whatever tokens follow."""
    model, src, tgt_in = tiny_transformer(c)
    g = torch.Generator().manual_seed(c["seed"] + 1)
    with torch.no_grad():
        for return_attention in (False, True):  # the fused path, and the weights path of the last layer
            logits = model(src, tgt_in, return_attention=return_attention)
            logits = logits[0] if return_attention else logits  # (B, T, V)
            for t in range(c["T"] - 1):
                other = tgt_in.clone()  # another word (ids 4..6) at every position after t
                shift = torch.randint(1, 3, other[:, t + 1 :].shape, generator=g)
                other[:, t + 1 :] = (tgt_in[:, t + 1 :] - 4 + shift) % 3 + 4
                got = model(src, other, return_attention=return_attention)
                got = got[0] if return_attention else got
                close(got[:, : t + 1], logits[:, : t + 1], f"decoder logits 0..{t} with other tokens after {t}")


@PROPS
@given(transformer_cases())
def test_transformer_decoder_ignores_later_tokens(case):
    check_causal_decoder(case)


def test_decoder_property_catches_a_decoder_self_attention_without_its_causal_mask(monkeypatch):
    forward = mutant(DecoderLayer.forward, ("is_causal=h.shape[1] > 1,", "is_causal=False,"))
    monkeypatch.setattr(DecoderLayer, "forward", forward)
    case = counterexample(transformer_cases(), check_causal_decoder)
    assert case["T"] >= 2
    monkeypatch.undo()
    check_causal_decoder(case)


# ----------------------------------------------------------------------------------------------
# c. padding gets exactly zero weight
# ----------------------------------------------------------------------------------------------


@st.composite
def padding_cases(draw):
    B, S = draw(st.integers(1, 2)), draw(st.integers(1, 5))
    return dict(
        B=B,
        H=draw(st.integers(1, 2)),
        L=draw(st.integers(1, 4)),
        S=S,
        D=draw(st.integers(1, 3)),
        keep=draw(bools(B * S)),
        float_mask=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def check_padding_gets_zero_weight(c):
    B, H, L, S, D, dtype = c["B"], c["H"], c["L"], c["S"], c["D"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    keep = torch.tensor(c["keep"]).view(B, S)
    blocked = ~keep[:, None, None, :].expand(B, H, L, S)  # (B, H, L, S)
    mask = keep[:, None, None, :]  # (B, 1, 1, S)
    if c["float_mask"]:  # a bias on real keys, -inf on padding
        mask = randn(g, dtype, B, 1, 1, S).masked_fill(~mask, float("-inf"))
    scores = randn(g, dtype, B, H, L, S) * 3
    w = masks.masked_softmax(scores, mask)
    assert bool((w[blocked] == 0).all()), f"masked_softmax puts weight on padding: {w[blocked]}"
    alive = keep.any(-1)  # (B,): rows with at least one real key sum to 1
    close(w.sum(-1)[alive], torch.ones_like(w.sum(-1)[alive]), "masked_softmax rows over real keys")
    # attention: no weight on padding, and padded keys/values do not reach the output
    q, k, v = randn(g, dtype, B, H, L, D), randn(g, dtype, B, H, S, D), randn(g, dtype, B, H, S, D)
    k2, v2 = k.clone(), v.clone()
    pad = ~keep[:, None, :, None].expand(B, H, S, D)
    k2[pad], v2[pad] = randn(g, dtype, int(pad.sum())) * 10, randn(g, dtype, int(pad.sum())) * 10
    for need_weights in (True, False):
        out, w = attention.scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
        out2, _ = attention.scaled_dot_product_attention(q, k2, v2, mask, need_weights=need_weights)
        close(out2, out, f"attention output after changing padded keys/values (need_weights={need_weights})")
        if need_weights:
            assert bool((w[blocked] == 0).all()), f"attention weights on padding: {w[blocked]}"
    # MultiHeadAttention's key_keep (cross-attention: queries apart from the padded memory)
    E = H * D
    mha = seeded(c["seed"], lambda: MultiHeadAttention(E, H).to(dtype).eval())
    x, mem = randn(g, dtype, B, L, E), randn(g, dtype, B, S, E)
    mem2 = mem.clone()
    mem2[~keep] = randn(g, dtype, int((~keep).sum()), E) * 10
    with torch.no_grad():
        out, w = mha(x, mem, mem, key_keep=keep, need_weights=True, average_attn_weights=False)
        assert bool((w[blocked] == 0).all()), f"MultiHeadAttention weights on padding: {w[blocked]}"
        for need_weights in (True, False):
            out2, _ = mha(x, mem2, mem2, key_keep=keep, need_weights=need_weights)
            close(out2, out, f"MultiHeadAttention after changing padded memory (need_weights={need_weights})")


@PROPS
@given(padding_cases())
def test_padding_gets_exactly_zero_weight(case):
    check_padding_gets_zero_weight(case)


def test_padding_property_catches_a_masked_softmax_that_forgets_the_mask(monkeypatch):
    def forgets_the_mask(scores, mask=None, dim=-1):
        return torch.softmax(scores, dim=dim)

    monkeypatch.setattr(masks, "masked_softmax", forgets_the_mask)
    monkeypatch.setattr(attention, "masked_softmax", forgets_the_mask)
    case = counterexample(padding_cases(), check_padding_gets_zero_weight)
    assert not all(case["keep"])  # no padding, no bug to see
    monkeypatch.undo()
    check_padding_gets_zero_weight(case)


# ----------------------------------------------------------------------------------------------
# d. fully masked rows: zeros, never NaN
# ----------------------------------------------------------------------------------------------


@st.composite
def dead_row_cases(draw):
    L, S = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    return dict(
        B=draw(st.integers(1, 2)),
        H=draw(st.integers(1, 2)),
        L=L,
        S=S,
        D=draw(st.integers(1, 3)),
        keep=draw(bools(L * S)),
        dead=draw(st.integers(0, L - 1)),  # this row is blocked everywhere, whatever keep says
        float_mask=draw(st.booleans()),
        block_size=draw(st.integers(1, 4)),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def _dead_mask(c, g):
    keep = torch.tensor(c["keep"]).view(c["L"], c["S"])
    keep[c["dead"]] = False
    dead = ~keep.any(-1)  # (L,), at least row c["dead"]
    if c["float_mask"]:
        return randn(g, c["dtype"], c["L"], c["S"]).masked_fill(~keep, float("-inf")), dead
    return keep, dead


def check_fully_masked_rows(c):
    B, H, L, S, D, dtype = c["B"], c["H"], c["L"], c["S"], c["D"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    mask, dead = _dead_mask(c, g)  # (L, S), (L,)
    scores = randn(g, dtype, B, H, L, S).requires_grad_()
    w = masks.masked_softmax(scores, mask)
    assert not bool(w.isnan().any()), f"masked_softmax gives NaN: {w}"
    assert bool((w[..., dead, :] == 0).all()), f"fully masked rows of masked_softmax are not zero: {w[..., dead, :]}"
    w.mul(randn(g, dtype, B, H, L, S)).sum().backward()
    assert bool(scores.grad.isfinite().all()), f"masked_softmax's gradient is not finite: {scores.grad}"

    def inputs():
        return [randn(g, dtype, B, H, n, D).requires_grad_() for n in (L, S, S)]

    runs = {
        "scaled_dot_product_attention (weights path)": lambda q, k, v: attention.scaled_dot_product_attention(
            q, k, v, mask, need_weights=True
        )[0],
        "scaled_dot_product_attention (fused path)": lambda q, k, v: attention.scaled_dot_product_attention(
            q, k, v, mask, need_weights=False
        )[0],
        "tiled_attention": lambda q, k, v: scale.tiled_attention(q, k, v, mask, block_size=c["block_size"]),
    }
    for name, run in runs.items():
        q, k, v = inputs()
        out = run(q, k, v)  # (B, H, L, D)
        assert not bool(out.isnan().any()), f"{name} gives NaN: {out}"
        assert bool((out[..., dead, :] == 0).all()), f"{name}: fully masked rows are not zero: {out[..., dead, :]}"
        out.mul(randn(g, dtype, *out.shape)).sum().backward()
        for t, label in ((q, "q"), (k, "k"), (v, "v")):
            assert bool(t.grad.isfinite().all()), f"{name}: the gradient of {label} is not finite: {t.grad}"
    # MultiHeadAttention: zero weights, so the output is out_proj's bias (out_proj of a zero vector)
    mha = seeded(c["seed"], lambda: MultiHeadAttention(H * D, H).to(dtype).eval())
    torch.nn.init.normal_(mha.out_proj.bias, generator=g)
    x, mem = randn(g, dtype, B, L, H * D), randn(g, dtype, B, S, H * D)
    with torch.no_grad():
        for need_weights in (True, False):
            out, w = mha(x, mem, mem, attn_keep=mask, need_weights=need_weights)
            assert not bool(out.isnan().any()), f"MultiHeadAttention gives NaN (need_weights={need_weights}): {out}"
            close(out[:, dead], mha.out_proj.bias.expand_as(out[:, dead]), "MultiHeadAttention on a fully masked row")
            if need_weights:
                assert bool((w[:, dead] == 0).all()), f"MultiHeadAttention weights of a fully masked row: {w[:, dead]}"


@PROPS
@given(dead_row_cases())
def test_fully_masked_rows_give_zeros_never_nan(case):
    check_fully_masked_rows(case)


def test_dead_row_property_catches_a_masked_softmax_without_its_dead_row_guard(monkeypatch):
    def plain_softmax(scores, mask=None, dim=-1):
        return torch.softmax(scores + masks.as_additive(mask, scores.dtype), dim=dim)

    monkeypatch.setattr(masks, "masked_softmax", plain_softmax)
    monkeypatch.setattr(attention, "masked_softmax", plain_softmax)
    case = counterexample(dead_row_cases(), check_fully_masked_rows)
    monkeypatch.undo()
    check_fully_masked_rows(case)


def test_dead_row_property_catches_tiled_attention_dividing_by_a_zero_normaliser(monkeypatch):
    forward = mutant(scale._flash_forward, ("acc / torch.where(l == 0, torch.ones_like(l), l)", "acc / l"))
    monkeypatch.setattr(scale, "_flash_forward", forward)
    case = counterexample(dead_row_cases(), check_fully_masked_rows)
    monkeypatch.undo()
    check_fully_masked_rows(case)


# ----------------------------------------------------------------------------------------------
# e. grouped-query attention = multi-head attention with repeated key/value heads
# ----------------------------------------------------------------------------------------------


@st.composite
def gqa_cases(draw):
    H = draw(st.sampled_from([1, 2, 3, 4, 6]))
    B = draw(st.integers(1, 2))
    return dict(
        B=B,
        H=H,
        Hkv=draw(st.sampled_from([d for d in range(1, H + 1) if H % d == 0])),
        D=draw(st.integers(1, 2)),
        L=draw(st.integers(1, 4)),
        S=draw(st.integers(1, 4)),
        cross=draw(st.booleans()),
        is_causal=draw(st.booleans()),
        key_keep=draw(st.none() | bools(B * 4)),  # (B, 4): the first L or S keys are used
        need_weights=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


@torch.no_grad()
def check_gqa_is_mha_with_repeated_heads(c):
    B, H, Hkv, D, L, dtype = c["B"], c["H"], c["Hkv"], c["D"], c["L"], c["dtype"]
    S = c["S"] if c["cross"] else L
    E, G = H * D, H // Hkv
    gqa = seeded(c["seed"], lambda: MultiHeadAttention(E, H, num_kv_heads=Hkv).to(dtype).eval())
    g = torch.Generator().manual_seed(c["seed"])
    for lin in (gqa.q_proj, gqa.k_proj, gqa.v_proj, gqa.out_proj):
        torch.nn.init.normal_(lin.bias, generator=g)
    mha = seeded(c["seed"], lambda: MultiHeadAttention(E, H).to(dtype).eval())
    mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
    mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
    for ours, theirs in ((mha.k_proj, gqa.k_proj), (mha.v_proj, gqa.v_proj)):
        # key/value head j serves query heads j*G .. j*G + G - 1
        ours.weight.copy_(theirs.weight.view(Hkv, D, E).repeat_interleave(G, dim=0).reshape(E, E))
        ours.bias.copy_(theirs.bias.view(Hkv, D).repeat_interleave(G, dim=0).reshape(E))
    x = randn(g, dtype, B, L, E)
    mem = randn(g, dtype, B, S, E) if c["cross"] else x
    keep = None
    if c["key_keep"] is not None:
        keep = torch.tensor(c["key_keep"]).view(B, 4)[:, :S]
    kw = dict(key_keep=keep, is_causal=c["is_causal"], need_weights=c["need_weights"], average_attn_weights=False)
    out, w = gqa(x, mem, mem, **kw)
    ref, w_ref = mha(x, mem, mem, **kw)
    close(out, ref, f"grouped-query attention (H={H}, Hkv={Hkv}) vs multi-head attention with repeated kv heads")
    if c["need_weights"]:
        close(w, w_ref, "per-head weights")
    if Hkv == H:  # as many key/value heads as heads: the very same module as plain multi-head attention
        plain = seeded(c["seed"], lambda: MultiHeadAttention(E, H).to(dtype).eval())
        plain.load_state_dict(gqa.state_dict())
        same, _ = plain(x, mem, mem, **kw)
        assert torch.equal(same, out), "num_kv_heads=num_heads differs from num_kv_heads=None"


@PROPS
@given(gqa_cases())
def test_grouped_query_attention_is_multi_head_attention_with_repeated_kv_heads(case):
    check_gqa_is_mha_with_repeated_heads(case)


def test_gqa_property_catches_kv_heads_repeated_in_the_wrong_order(monkeypatch):
    def expand_kv_tiled(self, t):  # heads 0, 1, 0, 1 instead of 0, 0, 1, 1
        return t.repeat(1, self.num_heads // self.num_kv_heads, 1, 1)

    monkeypatch.setattr(MultiHeadAttention, "expand_kv", expand_kv_tiled)
    case = counterexample(gqa_cases(), check_gqa_is_mha_with_repeated_heads)
    assert case["Hkv"] >= 2 and case["H"] // case["Hkv"] >= 2  # one kv head, or one query head per group, hides it
    monkeypatch.undo()
    check_gqa_is_mha_with_repeated_heads(case)


# ----------------------------------------------------------------------------------------------
# f. tiled attention = naive attention
# ----------------------------------------------------------------------------------------------


@st.composite
def tiled_cases(draw):
    L, S = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    return dict(
        batch=draw(st.sampled_from([(), (2,), (2, 1)])),
        L=L,
        S=S,
        D=draw(st.integers(1, 4)),
        Dv=draw(st.integers(1, 3)),
        block_size=draw(st.integers(1, 10)),
        causal=draw(st.booleans()),
        mask=draw(st.sampled_from([None, "bool", "float", "keys", "queries"])),
        keep=draw(bools(L * S)),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def check_tiled_equals_naive(c):
    L, S, dtype = c["L"], c["S"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    q, k, v = randn(g, dtype, *c["batch"], L, c["D"]), randn(g, dtype, *c["batch"], S, c["D"]), randn(
        g, dtype, *c["batch"], S, c["Dv"]
    )
    keep = torch.tensor(c["keep"]).view(L, S)
    mask = {
        None: None,
        "bool": keep,
        "float": randn(g, dtype, L, S).masked_fill(~keep, float("-inf")),
        "keys": keep[:1],  # (1, S): the same keys for every query
        "queries": keep[:, :1],  # (L, 1): whole rows kept or blocked
    }[c["mask"]]
    got = scale.tiled_attention(q, k, v, mask, causal=c["causal"], block_size=c["block_size"])
    want = scale.naive_attention(q, k, v, mask, causal=c["causal"])
    close(got, want, f"tiled (block_size={c['block_size']}) vs naive attention")


@PROPS
@given(tiled_cases())
def test_tiled_attention_equals_naive_attention(case):
    check_tiled_equals_naive(case)


def test_tiled_property_catches_dropping_the_last_partial_key_block(monkeypatch):
    forward = mutant(
        scale._flash_forward,
        (
            "range(0, min(S, last_key + 1), block_size)",
            "range(0, min(S, last_key + 1) // block_size * block_size, block_size)",
        ),
    )
    monkeypatch.setattr(scale, "_flash_forward", forward)
    case = counterexample(tiled_cases(), check_tiled_equals_naive)
    assert case["S"] % case["block_size"] or case["causal"]  # S a multiple of the block: no partial block
    monkeypatch.undo()
    check_tiled_equals_naive(case)


# ----------------------------------------------------------------------------------------------
# g. monotonic attention: the parallel form agrees with the recurrence
# ----------------------------------------------------------------------------------------------

# Selection probabilities where the forms have diverged: exactly 0 and 1, and just short of 1.
SPECIAL_P = [0.0, 1.0, 0.5, 1 - 1e-4, 1 - 1e-7, 1e-7]


@st.composite
def monotonic_cases(draw):
    B, S = draw(st.integers(1, 2)), draw(st.integers(1, 12))  # up to 4 rounds of the parallel scan
    p = draw(st.lists(st.sampled_from(SPECIAL_P) | st.floats(0, 1), min_size=B * S, max_size=B * S))
    return dict(
        B=B,
        S=S,
        p=p,
        prev=draw(st.sampled_from(["one-hot", "distribution", "partial", "zero"])),
        at=draw(st.integers(0, S - 1)),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def check_monotonic_forms_agree(c):
    B, S, dtype = c["B"], c["S"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    p = torch.tensor(c["p"], dtype=F64).view(B, S).to(dtype)
    prev = {
        "one-hot": torch.nn.functional.one_hot(torch.full((B,), c["at"]), S).to(dtype),
        "distribution": torch.softmax(randn(g, dtype, B, S) * 2, -1),
        "partial": torch.softmax(randn(g, dtype, B, S), -1) * 0.6,  # some mass ran off the end before
        "zero": torch.zeros(B, S, dtype=dtype),
    }[c["prev"]]
    weight = randn(g, dtype, B, S)
    results = {}
    for parallel in (True, False):
        pp, pv = p.clone().requires_grad_(), prev.clone().requires_grad_()
        a = variants.monotonic_attention(pp, pv, parallel=parallel)
        a.mul(weight).sum().backward()
        results[parallel] = a.detach(), pp.grad, pv.grad
    for i, what in enumerate(("alignment", "gradient wrt p", "gradient wrt prev")):
        par, rec = results[True][i], results[False][i]
        assert bool(par.isfinite().all()), f"parallel form: {what} is not finite: {par}"
        close(par, rec, f"monotonic attention, parallel vs recurrent form: {what}")


@PROPS
@given(monotonic_cases())
def test_monotonic_parallel_form_agrees_with_the_recurrence(case):
    check_monotonic_forms_agree(case)


@pytest.mark.parametrize("upper", [1.0, None], ids=["clamp(1e-10, 1)", "clamp_min(1e-10)"])
def test_monotonic_property_catches_the_clamped_closed_form(monkeypatch, upper):
    """The closed form this library had (clamped to [1e-10, 1]), and Raffel et al.'s (clamped below only)."""
    recurrence = variants.monotonic_attention

    def clamped_closed_form(p, prev, *, parallel=True):  # p * cumprod_excl(1 - p) * cumsum(prev / cumprod_excl(1 - p))
        if not parallel:
            return recurrence(p, prev, parallel=False)
        one_minus = torch.cat([torch.ones_like(p[:, :1]), 1 - p[:, :-1]], dim=1)
        cumprod = torch.cumprod(one_minus, dim=1)
        return p * cumprod * torch.cumsum(prev / cumprod.clamp(1e-10, upper), dim=1)

    monkeypatch.setattr(variants, "monotonic_attention", clamped_closed_form)
    case = counterexample(monotonic_cases(), check_monotonic_forms_agree)
    if upper is None:  # the division goes wrong only once the product of (1 - p) underflows the clamp
        assert any(x > 0.99 for x in case["p"])
    else:  # the upper clamp also cuts the gradient where the product is exactly 1 (p = 0 before)
        assert case["S"] >= 2
    monkeypatch.undo()
    check_monotonic_forms_agree(case)


# ----------------------------------------------------------------------------------------------
# h. the key/value cache decodes what the full forward computes
# ----------------------------------------------------------------------------------------------


@st.composite
def cache_cases(draw):
    H = draw(st.sampled_from([1, 2, 4]))
    chunks = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    return dict(
        B=draw(st.integers(1, 2)),
        H=H,
        Hkv=draw(st.sampled_from([d for d in (1, 2, 4) if H % d == 0])),
        D=draw(st.sampled_from([2, 4])),
        chunks=chunks,
        rope=draw(st.booleans()),
        need_weights=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


@torch.no_grad()
def check_mha_cache(c):
    """Causal self-attention fed chunk by chunk through a cache equals one causal pass over everything."""
    B, H, D, dtype = c["B"], c["H"], c["D"], c["dtype"]
    E, T = H * D, sum(c["chunks"])
    mha = seeded(c["seed"], lambda: MultiHeadAttention(E, H, num_kv_heads=c["Hkv"]).to(dtype).eval())
    rotary = RotaryEmbedding(D) if c["rope"] else None
    g = torch.Generator().manual_seed(c["seed"])
    x = randn(g, dtype, B, T, E)
    full, _ = mha(x, x, x, is_causal=True, rotary=rotary, need_weights=c["need_weights"])
    cache, outs, start = {}, [], 0
    for n in c["chunks"]:
        xc = x[:, start : start + n]
        out, _ = mha(xc, xc, xc, is_causal=True, rotary=rotary, cache=cache, need_weights=c["need_weights"])
        outs.append(out)
        start += n
        assert cache["k"].shape == (B, c["Hkv"], start, D), f"cache holds {tuple(cache['k'].shape)} after {start}"
    close(torch.cat(outs, dim=1), full, f"chunks {c['chunks']} through the cache vs one pass")


@PROPS
@given(cache_cases())
def test_attention_cache_equals_the_full_causal_pass(case):
    check_mha_cache(case)


def test_cache_property_catches_new_keys_and_values_put_before_the_cached_ones(monkeypatch):
    forward = mutant(
        MultiHeadAttention.forward,
        ('k = torch.cat([cache["k"], k], dim=-2)', 'k = torch.cat([k, cache["k"]], dim=-2)'),
        ('v = torch.cat([cache["v"], v], dim=-2)', 'v = torch.cat([v, cache["v"]], dim=-2)'),
    )
    monkeypatch.setattr(MultiHeadAttention, "forward", forward)
    case = counterexample(cache_cases(), check_mha_cache)
    # a chunk of one query sees every key, in any order: it takes a later chunk of two or more
    assert len(case["chunks"]) >= 2 and max(case["chunks"][1:]) >= 2
    monkeypatch.undo()
    check_mha_cache(case)


@st.composite
def ring_cases(draw):
    return dict(
        B=draw(st.integers(1, 2)),
        H=draw(st.integers(1, 2)),
        D=draw(st.integers(1, 3)),
        T=draw(st.integers(1, 8)),
        window=draw(st.integers(1, 5)),
        need_weights=draw(st.booleans()),
        dtype=draw(DTYPES),
        seed=draw(st.integers(0, 2**16)),
    )


def check_ring_cache(c):
    """Decoding token by token over a rolling cache of W slots equals attention with a sliding window of W."""
    B, H, D, T, W, dtype = c["B"], c["H"], c["D"], c["T"], c["window"], c["dtype"]
    g = torch.Generator().manual_seed(c["seed"])
    q, k, v = (randn(g, dtype, B, H, T, D) for _ in range(3))
    band = scale.sliding_window_mask(T, window=W)  # (T, T)
    full, _ = attention.scaled_dot_product_attention(q, k, v, band, need_weights=c["need_weights"])
    ring = scale.RingKVCache(W)
    for t in range(T):
        ring.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
        kk, vv = ring.keys_values()  # (B, H, min(t + 1, W), D)
        out, _ = attention.scaled_dot_product_attention(q[:, :, t : t + 1], kk, vv, need_weights=c["need_weights"])
        close(out, full[:, :, t : t + 1], f"token {t} over the ring cache (W={W}) vs the banded full pass")


@PROPS
@given(ring_cases())
def test_ring_cache_equals_sliding_window_attention(case):
    check_ring_cache(case)


def test_ring_cache_property_catches_a_token_written_to_the_wrong_slot(monkeypatch):
    append = mutant(
        scale.RingKVCache.append, ("slot = (self.seen + i) % self.window", "slot = (self.seen + i + 1) % self.window")
    )
    monkeypatch.setattr(scale.RingKVCache, "append", append)
    case = counterexample(ring_cases(), check_ring_cache)
    assert case["window"] >= 2  # one slot: every token lands in it anyway
    monkeypatch.undo()
    check_ring_cache(case)


@torch.no_grad()
def check_transformer_cache(c):
    """Step-by-step decoding, with the cache and without, gives the logits and attention of one forward pass."""
    model, src, tgt_in = tiny_transformer(c)
    logits, attn = model(src, tgt_in, return_attention=True)  # (B, T, V), (B, T, S)
    memory = model.encode(src)
    for use_cache in (True, False):
        with model.kv_cache(use_cache):
            state = model.init_state(memory)
            for t in range(c["T"]):
                step_logits, state, step_attn = model.step(memory, state, tgt_in[:, t], t)
                close(step_logits, logits[:, t], f"step {t} logits (use_cache={use_cache}) vs the forward pass")
                close(step_attn, attn[:, t], f"step {t} cross-attention (use_cache={use_cache}) vs the forward pass")


@PROPS
@given(transformer_cases())
def test_transformer_incremental_decoding_equals_the_forward_pass(case):
    check_transformer_cache(case)


def test_transformer_cache_property_catches_a_step_that_forgets_its_position(monkeypatch):
    step = mutant(Transformer.step, ("y_prev.unsqueeze(1), offset=t)", "y_prev.unsqueeze(1), offset=0)"))
    monkeypatch.setattr(Transformer, "step", step)
    case = counterexample(transformer_cases(), check_transformer_cache)
    assert case["T"] >= 2 and case["positions"] in ("sinusoidal", "learned")  # the kinds added to the embeddings
    monkeypatch.undo()
    check_transformer_cache(case)


# ----------------------------------------------------------------------------------------------
# the planted-bug machinery itself
# ----------------------------------------------------------------------------------------------


def test_mutant_refuses_a_mutation_that_does_not_apply():
    with pytest.raises(AssertionError, match=r"occurs 0 times"):
        mutant(scale.tiled_attention, ("no such code", ""))
