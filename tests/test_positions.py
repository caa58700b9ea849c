"""Tests of the position switch of the course Transformer: sinusoidal, learned, RoPE, ALiBi.

RoPE is checked for its defining property (scores depend on i - j only), ALiBi for its slopes and
bias; every kind decodes with the cache exactly as without it; old configs load as sinusoidal;
the extrapolation presets train on short sentences only.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from attnlab.core.attention import MultiHeadAttention
from attnlab.data.corpus import Pair, Splits
from attnlab.data.vocab import BOS
from attnlab.models.transformer import (
    POSITIONS,
    RotaryEmbedding,
    Transformer,
    TransformerConfig,
    alibi_bias,
    alibi_slopes,
)
from attnlab.training import experiments

# ----------------------------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------------------------


def test_rope_scores_depend_only_on_the_offset():
    rope = RotaryEmbedding(8)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    n = 30
    rq = rope(q.expand(n, 8).clone())  # (n, D): the same query at every position
    rk = rope(k.expand(n, 8).clone())  # (n, D)
    scores = rq @ rk.T  # (n, n): [i, j] = q at position i against k at position j
    for offset in range(-n + 1, n):
        diag = torch.diagonal(scores, offset=-offset)  # all (i, j) with i - j = offset
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-12, rtol=0)
    assert scores[5, 2] != pytest.approx(float(scores[5, 3]))  # but it does depend on the offset


def test_rope_is_a_rotation_and_offsets_compose():
    rope = RotaryEmbedding(6)
    x = torch.randn(2, 3, 10, 6, dtype=torch.float64)
    y = rope(x)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # lengths are kept
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])  # position 0 is not rotated
    torch.testing.assert_close(rope(x[..., 4:, :], offset=4), y[..., 4:, :])  # offset = later positions


def test_rope_pairs_rotate_by_position_times_theta():
    rope = RotaryEmbedding(4, base=100.0)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)  # (1, D)
    y = rope(x, offset=3)
    theta = torch.tensor([1.0, 100.0 ** (-2 / 4)], dtype=torch.float64)
    expected = torch.stack([torch.cos(3 * theta), torch.sin(3 * theta)], dim=-1).flatten()
    torch.testing.assert_close(y[0], expected)


def test_rope_errors():
    with pytest.raises(ValueError, match="head_dim must be even, got 5"):
        RotaryEmbedding(5)
    with pytest.raises(ValueError, match=r"rope positions need an even head dim d_model // num_heads, got 12 // 4 = 3"):
        TransformerConfig(5, 5, d_model=12, num_heads=4, positions="rope")
    with pytest.raises(ValueError, match=r"x must be \(..., n, D\) with D=4"):
        RotaryEmbedding(4)(torch.zeros(3, 6))
    with pytest.raises(ValueError, match="base must be a number > 1"):
        RotaryEmbedding(4, base=1)


def test_rotary_in_attention_with_a_cache_equals_full():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2).eval()
    rope = RotaryEmbedding(4)
    x = torch.randn(2, 7, 16)
    full, _ = mha(x, x, x, is_causal=True, rotary=rope)
    cache: dict = {}
    steps = [mha(x[:, :3], x[:, :3], x[:, :3], is_causal=True, rotary=rope, cache=cache)[0]]
    steps += [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], rotary=rope, cache=cache)[0] for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
    k, v = mha.project_kv(x, x)
    with pytest.raises(ValueError, match="rotary= rotates keys as they are projected"):
        mha(x, kv=(k, v), rotary=rope)


# ----------------------------------------------------------------------------------------------
# ALiBi
# ----------------------------------------------------------------------------------------------


def test_alibi_slopes_of_the_paper():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(h + 1) for h in range(8)], dtype=torch.float64))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (h + 1)) for h in range(4)]).double())
    # 6 heads: the 4 slopes of H = 4, then every other slope of H = 8 (the first two)
    expected = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    torch.testing.assert_close(alibi_slopes(6), torch.tensor(expected, dtype=torch.float64))


def test_alibi_bias_matrix():
    b = alibi_bias(2, 3, dtype=torch.float64)  # (H, L, S)
    dist = torch.tensor([[0, 1, 2], [1, 0, 1], [2, 1, 0]], dtype=torch.float64)
    torch.testing.assert_close(b, -alibi_slopes(2)[:, None, None] * dist)
    last = alibi_bias(2, 1, 3, dtype=torch.float64)  # one query at the end of three keys
    torch.testing.assert_close(last, b[:, 2:])
    with pytest.raises(ValueError, match="need S >= L, got L=3, S=2"):
        alibi_bias(2, 3, 2)


# ----------------------------------------------------------------------------------------------
# the Transformer's switch
# ----------------------------------------------------------------------------------------------


def batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 20, (3, 9), generator=g)
    src[0, 6:] = 0  # a padded source
    tgt = torch.randint(4, 20, (3, 6), generator=g)
    tgt[:, 0] = BOS
    return src, tgt


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("num_kv_heads", [None, 1])
def test_every_position_kind_decodes_with_the_cache_as_without(positions, num_kv_heads):
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(20, 20, d_model=16, num_heads=4, positions=positions, num_kv_heads=num_kv_heads)
    ).eval()
    src, tgt = batch()
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        for use_cache in (True, False):
            with model.kv_cache(use_cache):
                memory = model.encode(src)
                state = model.init_state(memory)
                steps = []
                for t in range(tgt.shape[1]):
                    logits, state, _ = model.step(memory, state, tgt[:, t], t)
                    steps.append(logits)
            torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_rope_and_alibi_add_no_parameters():
    sizes = {}
    for positions in POSITIONS:
        model = Transformer(TransformerConfig(20, 20, d_model=16, num_heads=4, positions=positions))
        sizes[positions] = set(model.state_dict())
    assert sizes["rope"] == sizes["alibi"] == sizes["none"] == sizes["sinusoidal"]
    assert sizes["learned"] - sizes["none"] == {"src_pos.table_emb.weight", "tgt_pos.table_emb.weight"}


def test_rope_and_alibi_models_see_word_order():
    """Positions "none" gives the same encoder state to a word wherever it stands; RoPE and ALiBi do not.

    Symmetric ALiBi (the encoder's, -m |i - j|) keeps every distance under a reversal, so it cannot
    tell a sentence from its mirror image; a swap of two words changes distances and it sees that.
    """
    src = torch.tensor([[5, 6, 7, 8, 9]])
    swap = torch.tensor([1, 0, 2, 3, 4])
    for positions, swap_blind, mirror_blind in (("none", True, True), ("rope", False, False), ("alibi", False, True)):
        torch.manual_seed(0)
        model = Transformer(TransformerConfig(20, 20, d_model=16, num_heads=4, positions=positions)).eval()
        with torch.no_grad():
            a = model.encode(src)["states"]
            swapped = model.encode(src[:, swap])["states"][:, swap]
            mirrored = model.encode(src.flip(1))["states"].flip(1)
        assert torch.allclose(a, swapped, atol=1e-5) == swap_blind, positions
        assert torch.allclose(a, mirrored, atol=1e-5) == mirror_blind, positions


def test_an_old_config_without_the_new_fields_builds_the_old_model(tmp_path):
    with open("data/checkpoints/transformer.json") as f:
        config = json.load(f)["config"]
    assert "num_kv_heads" not in config  # saved before the field existed
    c = TransformerConfig(**config)
    assert (c.positions, c.num_kv_heads) == ("sinusoidal", None)
    model = Transformer(c)
    assert model.decoder.layers[0].self_attn.k_proj.weight.shape == (64, 64)


def test_alibi_bias_reaches_the_scores():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(20, 20, d_model=16, num_heads=4, positions="alibi")).eval()
    src, tgt = batch()
    maps = model.attention_maps(src[1:], tgt[1:])["encoder"]  # (B, N, H, S, S)
    # The steepest head (slope 1/4 for H = 4) spreads less weight far away than the flattest (1/256).
    far = torch.ones(9, 9).triu(5).bool()
    assert maps[:, :, 0][..., far].mean() < maps[:, :, 3][..., far].mean()


# ----------------------------------------------------------------------------------------------
# the extrapolation presets
# ----------------------------------------------------------------------------------------------


def test_extrapolation_presets_train_on_short_sources_only():
    for positions in ("sinusoidal", "learned", "rope", "alibi"):
        exp = experiments.preset(f"transformer_short_{positions}", "cpu")
        assert exp.model["positions"] == positions and exp.max_train_src_len == 20
        base = experiments.preset("transformer", "cpu")
        assert (exp.steps, exp.lr, exp.bs) == (base.steps, base.lr, base.bs)

    def pair(n):
        return Pair(tuple(["a"] * n), ("b",))

    splits = Splits([pair(5), pair(25), pair(20)], [pair(30), pair(3)], [pair(40), pair(2)])
    short = experiments._short_training(splits, 20)
    assert [len(p.src) for p in short.train] == [5, 20]
    assert [len(p.src) for p in short.valid] == [3]
    assert short.test == splits.test
    with pytest.raises(ValueError, match="max_train_src_len=1 leaves no training or validation pair"):
        experiments._short_training(splits, 1)
    with pytest.raises(ValueError, match="max_train_src_len must be >= 1, got 0"):
        experiments.Experiment("x", "transformer", max_train_src_len=0)


def test_gqa_presets():
    for kv in (4, 2, 1):
        exp = experiments.preset(f"transformer_kv{kv}", "cpu")
        assert exp.model["num_kv_heads"] == kv and exp.model["num_heads"] == 4
    assert math.isclose(experiments.preset("transformer_kv1", "cpu").lr, experiments.preset("transformer", "cpu").lr)
