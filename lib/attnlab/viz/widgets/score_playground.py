"""Lesson 3's two widgets: a score playground and a d_k / temperature slider.

* **Score playground** -- type a query and a few keys; every score kind of
  :class:`attnlab.core.scores.AttentionScore` scores them and softmaxes the scores, side by side.
  The parametric kinds (``general``, ``concat``, ``location``) get fixed, seeded random weights,
  as an untrained model would have them.
* **Temperature slider** -- random query and keys of width ``d_k``; the softmax of
  ``q . k_j / (sqrt(d_k) * T)`` sharpens as ``d_k`` grows (unscaled) or ``T`` shrinks, and flattens
  the other way. It reports the entropy of the weights and the norm of the gradient that flows
  back through the softmax, which is what vanishes when the softmax saturates.

Both follow the course's widget pattern: a pure ``update_*`` function (tested headless) and a
thin ipywidgets wrapper that only wires controls to it.

Shape legend
------------
N    number of keys
d    query/key width (``d_k`` for the slider)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.core.scores import SCORE_KINDS, AttentionScore
from attnlab.viz.widgets._live import figure_png, flipbook, live, new_figure, picture

__all__ = [
    "PLAYGROUND_KINDS",
    "DEFAULT_QUERY",
    "DEFAULT_KEYS",
    "make_scorers",
    "update_score_playground",
    "format_score_playground",
    "plot_score_playground",
    "score_playground_widget",
    "update_temperature",
    "format_temperature",
    "plot_temperature",
    "temperature_widget",
]

PLAYGROUND_KINDS = SCORE_KINDS  # dot, scaled_dot, general, concat, location

# A query that points mostly along the first axis, and keys: aligned, opposite, orthogonal,
# aligned but twice as long. The long key shows that dot scores reward length, not only direction.
DEFAULT_QUERY = (1.0, 0.5, 0.0, 0.0)
DEFAULT_KEYS = (
    (1.0, 0.5, 0.0, 0.0),
    (-1.0, -0.5, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0),
    (2.0, 1.0, 0.0, 0.0),
)


def make_scorers(
    dim: int, *, max_len: int = 16, attn_dim: int | None = None, seed: int = 0, kinds: Sequence[str] = PLAYGROUND_KINDS
) -> dict[str, AttentionScore]:
    """One :class:`AttentionScore` per kind for queries and keys of width ``dim``.

    The parametric kinds are initialised from ``seed`` without touching the global random state,
    so the same arguments always give the same scorers.

    Args:
        dim: query and key width ``d``.
        max_len: most keys the ``location`` score can address.
        attn_dim: hidden size of the ``concat`` score (default ``dim``).
        seed: seed of the random weights.
        kinds: which kinds to build.

    Returns:
        ``{kind: scorer}`` in eval mode.
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    scorers = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for kind in kinds:
            scorers[kind] = AttentionScore(kind, dim, dim, attn_dim=attn_dim, max_len=max_len).eval()
    return scorers


def _as_query_and_keys(query, keys) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.as_tensor(query, dtype=torch.float32)
    k = torch.as_tensor(keys, dtype=torch.float32)
    if q.dim() != 1:
        raise ValueError(f"query must be one vector (d,), got shape {tuple(q.shape)}")
    if k.dim() != 2 or k.shape[0] < 1:
        raise ValueError(f"keys must be a non-empty matrix (N, d), got shape {tuple(k.shape)}")
    if k.shape[1] != q.shape[0]:
        raise ValueError(
            f"query and keys must have the same width d: query has d={q.shape[0]}, keys have d={k.shape[1]}"
        )
    return q, k


@torch.no_grad()
def update_score_playground(query, keys, scorers: dict[str, AttentionScore] | None = None, *, seed: int = 0) -> dict:
    """Score one query against N keys with every score kind (pure: inputs are not modified).

    Args:
        query: ``(d,)`` query (tensor or nested list).
        keys: ``(N, d)`` keys.
        scorers: from :func:`make_scorers`; built for ``d`` from ``seed`` when ``None``.
        seed: seed of the default scorers.

    Returns:
        dict with ``scores`` and ``weights`` (``{kind: (N,) tensor}``), ``argmax``
        (``{kind: int}``) and ``kinds`` (the order used).
    """
    q, k = _as_query_and_keys(query, keys)
    d, N = q.shape[0], k.shape[0]
    if scorers is None:
        scorers = make_scorers(d, max_len=max(N, 16), seed=seed)
    scores, weights, argmax = {}, {}, {}
    for kind, scorer in scorers.items():
        if scorer.query_dim != d or scorer.key_dim != d:
            raise ValueError(
                f"the {kind!r} scorer was built for query/key width {scorer.query_dim}/{scorer.key_dim}, "
                f"got d={d}: call make_scorers({d})"
            )
        s = scorer(q.unsqueeze(0), k.unsqueeze(0))[0]  # (N,)
        scores[kind] = s
        weights[kind] = torch.softmax(s, dim=0)  # (N,)
        argmax[kind] = int(s.argmax())
    return {"kinds": list(scorers), "scores": scores, "weights": weights, "argmax": argmax}


def format_score_playground(result: dict, key_labels: Sequence[str] | None = None, decimals: int = 3) -> str:
    """A plain-text table: one row per kind, its scores and then its softmax weights per key."""
    kinds = result["kinds"]
    N = len(result["scores"][kinds[0]])
    labels = list(key_labels) if key_labels is not None and len(key_labels) == N else [f"k{j}" for j in range(N)]
    w = max(decimals + 4, max(len(x) for x in labels))
    head = f"{'':10s} " + " ".join(f"{x:>{w}s}" for x in labels)
    lines = ["scores", head]
    for kind in kinds:
        lines.append(f"{kind:10s} " + " ".join(f"{v:>{w}.{decimals}f}" for v in result["scores"][kind].tolist()))
    lines += ["", "softmax weights", head]
    for kind in kinds:
        lines.append(f"{kind:10s} " + " ".join(f"{v:>{w}.{decimals}f}" for v in result["weights"][kind].tolist()))
    return "\n".join(lines)


def plot_score_playground(result: dict, key_labels: Sequence[str] | None = None, ax=None):
    """Grouped bars: for each key, one bar per score kind's softmax weight."""
    import matplotlib.pyplot as plt
    import numpy as np

    kinds = result["kinds"]
    N = len(result["weights"][kinds[0]])
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 2.8))
    width = 0.8 / len(kinds)
    x = np.arange(N)
    for i, kind in enumerate(kinds):
        ax.bar(x + (i - (len(kinds) - 1) / 2) * width, result["weights"][kind].numpy(), width, label=kind)
    ax.set_xticks(x)
    ax.set_xticklabels(list(key_labels) if key_labels is not None else [f"k{j}" for j in range(N)])
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("softmax weight")
    # Above the axes, not inside: a weight near 1 reaches the top, where a legend inside would cover it.
    ax.legend(fontsize=7, ncol=min(len(kinds), 5), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return ax


def score_playground_widget(query=DEFAULT_QUERY, keys=DEFAULT_KEYS, *, seed: int = 0):
    """Edit the query and the keys; every score kind's weights update side by side.

    Returns an ``ipywidgets.VBox``; its ``.result`` attribute always holds the latest
    :func:`update_score_playground` dict (handy for checks).
    """
    import ipywidgets as widgets

    q0, k0 = _as_query_and_keys(query, keys)
    scorers = make_scorers(q0.shape[0], max_len=max(k0.shape[0], 16), seed=seed)

    def cells(row):
        return [widgets.FloatText(value=float(x), step=0.1, layout=widgets.Layout(width="62px")) for x in row]

    q_cells = cells(q0.tolist())
    k_cells = [cells(row) for row in k0.tolist()]
    editors = widgets.VBox(
        [
            widgets.HTML("<b>query q</b>"),
            widgets.HBox(q_cells),
            widgets.HTML("<b>keys k_j</b> (one per row)"),
            *[
                widgets.HBox([widgets.Label(f"k{j}", layout=widgets.Layout(width="24px")), *row])
                for j, row in enumerate(k_cells)
            ],
        ]
    )
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox([editors, text]), plot])

    def compute() -> dict:
        return update_score_playground([c.value for c in q_cells], [[c.value for c in row] for row in k_cells], scorers)

    def draw(result: dict):
        fig = new_figure((6, 2.6))
        ax = fig.add_subplot()
        plot_score_playground(result, ax=ax)
        return fig

    controls = q_cells + [c for row in k_cells for c in row]
    return live(root, text, plot, controls, compute, format_score_playground, draw)


# ----------------------------------------------------------------------------------------------
# d_k / temperature slider
# ----------------------------------------------------------------------------------------------


def update_temperature(
    d_k: int, temperature: float = 1.0, *, scale: bool = True, n_keys: int = 8, seed: int = 0
) -> dict:
    """Softmax of ``q . k_j / (sqrt(d_k) * T)`` for a random query and random keys (pure).

    ``q`` and the ``k_j`` have independent N(0, 1) entries, drawn from ``seed`` and ``d_k`` with a
    private generator, so the raw scores have variance ``d_k``.

    Args:
        d_k: query/key width.
        temperature: ``T > 0``; below 1 sharpens the softmax, above 1 flattens it.
        scale: divide by ``sqrt(d_k)`` (the scaled dot product) or not (plain dot).
        n_keys: number of keys N.
        seed: seed of the random vectors.

    Returns:
        dict with ``raw`` (``(N,)`` q . k_j), ``logits`` (what enters the softmax), ``weights``
        ``(N,)``, ``entropy`` (nats; ``log N`` is uniform, 0 is one-hot), ``max_weight`` and
        ``grad_norm``: the norm of the gradient reaching the logits when a fixed random vector
        ``g`` is pulled back through the softmax, ``||(diag(p) - p p^T) g||``.
    """
    if int(d_k) != d_k or d_k < 1:
        raise ValueError(f"d_k must be a positive integer, got {d_k}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if n_keys < 1:
        raise ValueError(f"n_keys must be >= 1, got {n_keys}")
    d_k = int(d_k)
    gen = torch.Generator().manual_seed(seed * 100_003 + d_k)
    q = torch.randn(d_k, generator=gen, dtype=torch.float64)  # (d,)
    K = torch.randn(n_keys, d_k, generator=gen, dtype=torch.float64)  # (N, d)
    g = torch.randn(n_keys, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (N,)
    raw = K @ q  # (N,)
    logits = raw / ((math.sqrt(d_k) if scale else 1.0) * temperature)  # (N,)
    p = torch.softmax(logits, dim=0)  # (N,)
    jac = torch.diag(p) - torch.outer(p, p)  # (N, N) d p / d logits
    entropy = float(-(p * torch.log(p.clamp_min(1e-300))).sum())
    return {
        "d_k": d_k,
        "temperature": float(temperature),
        "scale": scale,
        "raw": raw,
        "logits": logits,
        "weights": p,
        "entropy": entropy,
        "max_weight": float(p.max()),
        "grad_norm": float((jac @ g).norm()),
    }


def format_temperature(result: dict) -> str:
    """One line of numbers and the weights, rounded."""
    div = f"√{result['d_k']}·{result['temperature']:g}" if result["scale"] else f"{result['temperature']:g}"
    weights = ", ".join(f"{w:.3f}" for w in result["weights"].tolist())
    return (
        f"d_k={result['d_k']}, scores / {div}: std of logits {float(result['logits'].std()):.2f}, "
        f"max weight {result['max_weight']:.3f}, entropy {result['entropy']:.3f} nats "
        f"(uniform {math.log(len(result['weights'])):.3f}), gradient norm {result['grad_norm']:.2e}\n"
        f"weights [{weights}]"
    )


def plot_temperature(result: dict, ax=None):
    """Bars of the softmax weights, one per key."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 2.4))
    N = len(result["weights"])
    ax.bar(range(N), result["weights"].numpy(), color="tab:blue")
    ax.axhline(1 / N, color="grey", linestyle=":", linewidth=1)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(range(N))
    ax.set_xticklabels([f"k{j}" for j in range(N)], fontsize=8)
    ax.set_ylabel("weight")
    ax.set_title(
        f"d_k={result['d_k']}, T={result['temperature']:.3g}, {'scaled' if result['scale'] else 'unscaled'}", fontsize=9
    )
    return ax


D_K_CHOICES = tuple(2**i for i in range(11))  # 1 .. 1024


def temperature_widget(d_k: int = 64, temperature: float = 1.0, *, scale: bool = False, n_keys: int = 8, seed: int = 0):
    """Sliders for ``d_k`` and the temperature, a switch for the ``sqrt(d_k)`` scale.

    Returns an ``ipywidgets.VBox``; ``.result`` holds the latest :func:`update_temperature` dict.
    """
    import ipywidgets as widgets

    dk = widgets.SelectionSlider(options=D_K_CHOICES, value=d_k if d_k in D_K_CHOICES else 64, description="d_k")
    temp = widgets.FloatLogSlider(value=temperature, base=10, min=-1.5, max=1.5, step=0.05, description="T")
    scale_box = widgets.Checkbox(value=scale, description="divide by √d_k")
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox([dk, temp, scale_box]), text, plot])

    def compute() -> dict:
        return update_temperature(dk.value, temp.value, scale=scale_box.value, n_keys=n_keys, seed=seed)

    def draw(result: dict):
        fig = new_figure((4.5, 2.4))
        ax = fig.add_subplot()
        plot_temperature(result, ax=ax)
        return fig

    return live(root, text, plot, (dk, temp, scale_box), compute, format_temperature, draw)


def temperature_flipbook(d_ks=D_K_CHOICES, temperature: float = 1.0, *, n_keys: int = 8, seed: int = 0):
    """A ``d_k`` slider over precomputed frames: the weights without and with the ``sqrt(d_k)`` scale.

    Each frame draws :func:`update_temperature` for one ``d_k`` twice, side by side (unscaled, then
    scaled); the frames are made once here, so the slider moves in the browser alone (also on the
    course website, where no kernel runs). See :func:`attnlab.viz.widgets._live.flipbook`.

    Returns:
        an ``ipywidgets.VBox``; ``.frames`` holds one PNG per ``d_k`` and ``.results`` the
        ``(unscaled, scaled)`` :func:`update_temperature` dicts behind each frame.
    """
    results, frames = [], []
    for d_k in d_ks:
        pair = tuple(update_temperature(d_k, temperature, scale=s, n_keys=n_keys, seed=seed) for s in (False, True))
        fig = new_figure((8.4, 2.3))
        for ax, result in zip(fig.subplots(1, 2), pair, strict=True):
            plot_temperature(result, ax=ax)
            ax.set_xlabel(f"max weight {result['max_weight']:.2f}, entropy {result['entropy']:.2f} nats", fontsize=8)
        results.append(pair)
        frames.append(figure_png(fig, dpi=80))
    root = flipbook(d_ks, frames, description="d_k")
    root.results = results
    return root
