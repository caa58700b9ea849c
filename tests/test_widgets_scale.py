"""Headless tests of lesson 12's scale explorer: the pure update function and the widget's wiring."""

from __future__ import annotations

import pytest

from attnlab.core.scale import kv_cache_bytes, memory_model
from attnlab.viz.widgets._live import new_figure
from attnlab.viz.widgets.scale_explorer import (
    SEQ_LENS,
    format_scale_explorer,
    plot_scale_explorer,
    update_scale_explorer,
)


def test_update_is_the_memory_model_with_curves():
    r = update_scale_explorer(4096, 128, 8)
    m = memory_model(4096, 128, 8, num_heads=32, head_dim=128, layers=32, batch=1, bytes_per=2)
    assert (r["naive"], r["tiled"], r["cache"]) == (m["naive"], m["tiled"], m["cache"])
    assert r["cache"] == kv_cache_bytes(layers=32, kv_heads=8, head_dim=128, tokens=4096, bytes_per=2)
    c = r["curves"]
    assert c["N"] == list(SEQ_LENS)
    # naive grows 4x per doubling of N, the cache 2x, tiled less than 2x (a fixed tile plus the O(N) output)
    assert all(b == 4 * a for a, b in zip(c["naive"], c["naive"][1:], strict=False))
    assert all(b == 2 * a for a, b in zip(c["cache"], c["cache"][1:], strict=False))
    assert all(a < b < 2 * a for a, b in zip(c["tiled"], c["tiled"][1:], strict=False))


def test_fewer_kv_heads_shrink_only_the_cache():
    a, b = update_scale_explorer(8192, 64, 32), update_scale_explorer(8192, 64, 1)
    assert a["cache"] == 32 * b["cache"]
    assert (a["naive"], a["tiled"]) == (b["naive"], b["tiled"])
    assert update_scale_explorer(1000, 64, 4)["curves"]["N"].count(1000) == 1  # an N off the grid is added


def test_text_shows_the_formulas_and_plot_marks_the_point():
    r = update_scale_explorer(2048, 256, 4, layers=2)
    text = format_scale_explorer(r)
    assert "2·2·4·128·2048·1·2" in text and f"{r['cache']:,}" in text and "1/" in text
    fig = new_figure((4, 3))
    ax = plot_scale_explorer(r, fig.add_subplot())
    assert len(ax.lines) == 7  # three curves, three points, the marker line
    assert ax.lines[1].get_xdata()[0] == 2048


def test_errors():
    with pytest.raises(ValueError, match="num_heads=32 is not divisible by num_kv_heads=3"):
        update_scale_explorer(1024, 64, 3)
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        update_scale_explorer(1024, 0, 4)
    with pytest.raises(ValueError, match="seq_len must be >= 1, got 0"):
        update_scale_explorer(0, 64, 4)


def test_widget_follows_its_controls():
    pytest.importorskip("ipywidgets")
    from attnlab.viz.widgets.scale_explorer import scale_explorer_widget

    root = scale_explorer_widget(seq_len=4096, block_size=128, num_kv_heads=8)
    n, block, kv = root.children[0].children
    assert [c.description for c in (n, block, kv)] == ["N", "block", "KV heads"]
    assert root.result["seq_len"] == 4096
    before = root.result["cache"]
    kv.value = 1
    assert root.result["cache"] * 8 == before
    n.value = 8192
    assert root.result["naive"] == 32 * 8192 * 8192 * 2
    block.value = 32
    assert root.result["block_size"] == 32
    assert bytes(root.children[2].value).startswith(b"\x89PNG")
