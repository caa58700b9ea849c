"""Lesson 12's widget: how much memory attention's scores and the key/value cache take.

Three controls, sequence length ``N``, block size and number of key/value heads, go into
:func:`update_scale_explorer`, a pure function around :func:`attnlab.core.scale.memory_model`. It returns
the bytes of naive attention's score matrix (``N x N`` per head), of FlashAttention's tiles (fixed) plus
its output (``N x D``, growing like ``N``), and of the key/value cache, each with its formula, plus the curves of
all three against ``N`` for the plot (log-log, the chosen ``N`` marked). The model described is a
7B-class decoder in float16 (32 layers, 32 heads of 128), unless other sizes are given.

The widget follows the course's pattern (:mod:`attnlab.viz.widgets._live`): the pure update function,
a text description, and a figure drawn without pyplot into an ``ipywidgets.Image``.
"""

from __future__ import annotations

from attnlab.core.checks import check_positive_int
from attnlab.core.scale import memory_model
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = [
    "SEQ_LENS",
    "BLOCK_SIZES",
    "update_scale_explorer",
    "format_scale_explorer",
    "plot_scale_explorer",
    "scale_explorer_widget",
]

SEQ_LENS = tuple(2**i for i in range(8, 18))  # 256 .. 131072
BLOCK_SIZES = (16, 32, 64, 128, 256, 512)
MODEL = dict(num_heads=32, head_dim=128, layers=32, batch=1, bytes_per=2)


def update_scale_explorer(seq_len: int, block_size: int, num_kv_heads: int, **model) -> dict:
    """Bytes of naive vs tiled attention scores and of the cache at ``seq_len``, and their curves over N.

    Args:
        seq_len: ``N``, tokens in the sequence (and in the cache).
        block_size: ``Bq = Bk`` of the tiled computation.
        num_kv_heads: ``Hkv``, must divide ``num_heads``.
        model: sizes passed to :func:`attnlab.core.scale.memory_model` (``num_heads``, ``head_dim``,
            ``layers``, ``batch``, ``bytes_per``); default :data:`MODEL`.

    Returns:
        the :func:`~attnlab.core.scale.memory_model` dict at ``seq_len`` plus ``seq_len``, ``block_size``,
        ``num_kv_heads``, ``model`` (the sizes used) and ``curves``:
        ``{"N": [...], "naive": [...], "tiled": [...], "cache": [...]}`` over :data:`SEQ_LENS` and ``seq_len``.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    sizes = {**MODEL, **model}
    at = memory_model(seq_len, block_size, num_kv_heads, **sizes)
    ns = sorted({*SEQ_LENS, seq_len})
    points = [memory_model(n, block_size, num_kv_heads, **sizes) for n in ns]
    curves = {"N": ns, **{k: [p[k] for p in points] for k in ("naive", "tiled", "cache")}}
    return {
        **at,
        "seq_len": seq_len,
        "block_size": block_size,
        "num_kv_heads": num_kv_heads,
        "model": sizes,
        "curves": curves,
    }


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024
    raise AssertionError("unreachable")


def format_scale_explorer(result: dict) -> str:
    """Three lines, one per quantity: the formula with the numbers, and the size in binary units."""
    m = result["model"]
    f = result["formulas"]
    return (
        f"model: {m['layers']} layers, H={m['num_heads']} heads of D={m['head_dim']}, "
        f"Hkv={result['num_kv_heads']}, batch {m['batch']}, {m['bytes_per']} bytes per number\n"
        f"naive scores (one layer): {f['naive']}  ({_human(result['naive'])})\n"
        f"tiled (one layer):        {f['tiled']}  ({_human(result['tiled'])})\n"
        f"  -> tiled holds 1/{result['ratio']:,.0f} of naive's memory (its tile is fixed, its output grows like N)\n"
        f"key/value cache:          {f['cache']}  ({_human(result['cache'])})"
    )


def plot_scale_explorer(result: dict, ax) -> object:
    """Log-log curves of the three quantities against N, the chosen N marked."""
    c = result["curves"]
    for key, label, style in (
        ("naive", "naive scores  ~N²", "-"),
        ("tiled", "tiled: tile + output  ~N", "--"),
        ("cache", f"KV cache, Hkv={result['num_kv_heads']}  ~N", "-."),
    ):
        ax.loglog(c["N"], [v / 2**20 for v in c[key]], style, label=label, base=2)
        ax.plot(result["seq_len"], result[key] / 2**20, "o", color=ax.lines[-1].get_color())
    ax.axvline(result["seq_len"], color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("MiB")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    return ax


def scale_explorer_widget(seq_len: int = 4096, block_size: int = 128, num_kv_heads: int = 8, **model):
    """Sliders ``N``, ``block`` and ``KV heads``; the memory of naive vs tiled attention and of the cache.

    Returns an ``ipywidgets.VBox``; ``.result`` holds the latest :func:`update_scale_explorer` dict.
    """
    import ipywidgets as widgets

    sizes = {**MODEL, **model}
    heads = [h for h in range(1, sizes["num_heads"] + 1) if sizes["num_heads"] % h == 0]
    n = widgets.SelectionSlider(options=SEQ_LENS, value=seq_len if seq_len in SEQ_LENS else 4096, description="N")
    block = widgets.SelectionSlider(
        options=BLOCK_SIZES, value=block_size if block_size in BLOCK_SIZES else 128, description="block"
    )
    kv = widgets.SelectionSlider(
        options=heads, value=num_kv_heads if num_kv_heads in heads else heads[-1], description="KV heads"
    )
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox([n, block, kv]), text, plot])

    def compute() -> dict:
        return update_scale_explorer(n.value, block.value, kv.value, **sizes)

    def draw(result: dict):
        fig = new_figure((5.5, 3.0))
        plot_scale_explorer(result, fig.add_subplot())
        return fig

    return live(root, text, plot, (n, block, kv), compute, format_scale_explorer, draw)
