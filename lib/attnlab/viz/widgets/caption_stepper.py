"""Lesson 13's widget: pick a test image and step through the caption a captioner writes for it.

Each step shows the image under that step's attention over the ``grid x grid`` regions (upsampled
to the pixels), the word produced, and -- when the word is a size, colour or shape -- the outline
of the object it describes and whether the attention's peak lies on that object.

The captioner runs once, in :func:`caption_cases`: it greedy-decodes all the scenes in one batch
with the one decoding loop of :mod:`attnlab.models.decoding` (:func:`~attnlab.models.decoding.beam_steps` with
``k = 1``, so the words are exactly :func:`~attnlab.models.decoding.greedy_decode`'s) and keeps every
step's attention and best candidates. Moving a control only calls :func:`caption_frame`, a pure
lookup over those records, and draws its result.

Which object a word describes: a caption lists the objects in reading order, one phrase
``a <size> <colour> <shape>`` each, so a size, colour or shape word in the ``j``-th phrase written
so far (counted by its ``a``) describes object ``j`` of the scene (:func:`named_objects`). The word
may be wrong (``"blue"`` for a red object): the frame says so. The attention's peak is *on* the
object when the peak region holds at least one of its pixels -- the gold regions the lesson scores
attention against (:func:`attnlab.data.corpus.scenes.token_region_mask`).

The widget follows the course's pattern (:mod:`attnlab.viz.widgets._live`): the pure update function,
a text description, and a figure drawn without pyplot into an ``ipywidgets.Image``.

Shape legend
------------
N   number of scenes
C   colour channels (3)
H   image height = W width (pixels)
g   regions per side of the attention grid; S = g * g regions
T   produced tokens (``<eos>`` included when the caption finished)
K   objects in a scene
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attnlab.core.checks import check_int, check_positive_int
from attnlab.data.corpus.scenes import WORD_CLASSES, Scene, caption_vocab, images_tensor, token_region_mask
from attnlab.data.vocab import EOS
from attnlab.models.decoding import beam_steps
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = [
    "CaptionCase",
    "caption_cases",
    "named_objects",
    "upsample_attention",
    "caption_frame",
    "format_caption_frame",
    "plot_caption_frame",
    "caption_stepper_widget",
]

_ATTRIBUTE = {"size": "size", "colour": "colour", "noun": "shape"}  # word class -> SceneObject field


def named_objects(tokens: Sequence[str], n_objects: int) -> tuple[int | None, ...]:
    """Per token, the index of the object it describes, or None.

    A size, colour or shape word in the ``j``-th phrase (the ``j``-th ``"a"`` so far, counting from
    0) describes object ``j``; function words, specials, words before the first ``"a"`` and phrases
    beyond the scene's objects describe none.

    Args:
        tokens: produced words (specials allowed).
        n_objects: ``K``, the scene's objects.

    Returns:
        one entry per token.
    """
    check_int("n_objects", n_objects, minimum=0)
    out, phrase = [], -1
    for tok in tokens:
        if tok == "a":
            phrase += 1
        describes = WORD_CLASSES.get(tok, "function") != "function" and 0 <= phrase < n_objects
        out.append(phrase if describes else None)
    return tuple(out)


def upsample_attention(attention, grid: int, image_size: int) -> np.ndarray:
    """One step's attention over the regions as a map over the pixels.

    Region ``i`` (grid row ``i // g``, column ``i % g``) is the square of ``image_size / g`` pixels
    it encodes; each of its pixels gets the region's weight (``np.kron`` with a block of ones).

    Args:
        attention: ``(S,)`` weights, ``S = grid * grid``.
        grid: ``g``.
        image_size: ``H = W``; ``grid`` must divide it.

    Returns:
        ``(H, W)`` float array.
    """
    g = check_positive_int("grid", grid)
    size = check_positive_int("image_size", image_size)
    if size % g:
        raise ValueError(f"grid={g} must divide image_size={size} (each region is a whole square of pixels)")
    a = np.asarray(attention, dtype=np.float64)
    if a.shape != (g * g,):
        raise ValueError(f"attention must be (S,) = ({g * g},) for a {g}x{g} grid, got shape {a.shape}")
    p = size // g
    return np.kron(a.reshape(g, g), np.ones((p, p)))  # (H, W)


@dataclass(frozen=True, eq=False)  # arrays inside: compared by identity
class CaptionCase:
    """One scene's recorded caption: what the widget looks up at every step.

    Attributes:
        scene: the scene (:class:`attnlab.data.corpus.scenes.Scene`).
        tokens: the ``T`` produced tokens, ``"<eos>"`` last when the caption finished.
        attention: ``(T, S)`` attention over the regions per produced token.
        grid: ``g`` (``S = g * g``); it must divide the scene's image size.
        candidates: per token up to ``k`` ``(word, probability)`` pairs, best first (default: none).
        image: ``(H, W, C)`` float32, the rendered scene (set from ``scene``).
        object_cells: ``(K, S)`` bool, the regions holding a pixel of each object (set from ``scene``).
    """

    scene: Scene
    tokens: tuple[str, ...]
    attention: np.ndarray
    grid: int
    candidates: tuple[tuple[tuple[str, float], ...], ...] | None = None
    image: np.ndarray = field(init=False, repr=False)
    object_cells: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.scene, Scene):
            raise TypeError(f"scene must be an attnlab.data.corpus.scenes.Scene, got {type(self.scene).__name__}")
        tokens = tuple(self.tokens)
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"tokens must be a non-empty sequence of words, got {self.tokens!r}")
        g = check_positive_int("grid", self.grid)
        size = self.scene.config.image_size
        if size % g:
            raise ValueError(f"grid={g} must divide the scene's image_size={size}")
        attn = np.asarray(self.attention, dtype=np.float32)
        if attn.shape != (len(tokens), g * g):
            raise ValueError(
                f"attention must be (T, S) = ({len(tokens)}, {g * g}) for {len(tokens)} tokens on a {g}x{g} grid, "
                f"got shape {attn.shape}"
            )
        cands = tuple(tuple(c) for c in self.candidates) if self.candidates is not None else ((),) * len(tokens)
        if len(cands) != len(tokens):
            raise ValueError(f"candidates must have one entry per token ({len(tokens)}), got {len(cands)}")
        attn.setflags(write=False)
        image = np.ascontiguousarray(self.scene.render().transpose(1, 2, 0))  # (H, W, C)
        image.setflags(write=False)
        # One row per object: the gold regions of any word that names it (all its words share them).
        gold = token_region_mask(self.scene, g)  # (len(scene.tokens), S)
        owner = self.scene.token_object
        cells = np.stack([gold[owner.index(k)] for k in range(self.scene.n_objects)])  # (K, S)
        cells.setflags(write=False)
        for name, value in (("tokens", tokens), ("attention", attn), ("candidates", cands), ("grid", g)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "image", image)
        object.__setattr__(self, "object_cells", cells)

    @property
    def n_steps(self) -> int:
        """``T``: the steps the widget can show."""
        return len(self.tokens)


def caption_cases(model, scenes: Sequence[Scene], *, k: int = 3, max_len: int = 20, vocab=None) -> list[CaptionCase]:
    """Caption ``scenes`` greedily, once, recording every step for the widget.

    Args:
        model: a captioner speaking the decoding protocol over images (e.g. :class:`attnlab.models.vision.Captioner`)
            whose attention covers a square grid of regions.
        scenes: the scenes (one image size), e.g. the test split.
        k: most candidate words recorded per step (``<pad>`` and ``<bos>``, which greedy decoding
            never produces, are never candidates).
        max_len: most tokens per caption (``<eos>`` included).
        vocab: the caption vocabulary (default :func:`attnlab.data.corpus.scenes.caption_vocab`).

    Returns:
        one :class:`CaptionCase` per scene, in order.

    Raises:
        ValueError: no scenes, a vocabulary of another size than the model's, a model without
            attention, or an attention width that is not a square grid dividing the image.
    """

    scenes = list(scenes)
    if not scenes:
        raise ValueError("scenes is empty: give at least one scene to caption")
    k = check_positive_int("k", k)
    vocab = caption_vocab() if vocab is None else vocab
    weight = next(model.parameters())
    images = images_tensor(scenes).to(device=weight.device, dtype=weight.dtype)  # (N, C, H, W)
    N = len(scenes)
    lengths = [None] * N  # tokens up to and including <eos>, once produced
    candidates: list[list[tuple]] = [[] for _ in range(N)]
    last = None
    steps = beam_steps(model, images, beam=1, max_len=max_len)
    try:
        for last in steps:
            # with one hypothesis per scene, row i of every step is scene i (parent == i)
            probs = last.logp.exp()  # (N, V) the model's probabilities; forbidden tokens 0
            if probs.size(-1) != len(vocab):
                raise ValueError(f"the model scores {probs.size(-1)} words but vocab has {len(vocab)}")
            top_p, top_i = probs.topk(min(k, probs.size(-1)), dim=-1)  # (N, k), (N, k)
            produced = last.tokens[:, -1].tolist()  # (N,)
            for i in range(N):
                if lengths[i] is not None:
                    continue
                candidates[i].append(
                    tuple((vocab.itos[int(j)], float(p)) for p, j in zip(top_p[i], top_i[i], strict=True) if p > 0)
                )
                if produced[i] == EOS:
                    lengths[i] = last.t + 1
    finally:
        steps.close()  # gives the model its mode back at once, also when a check above raised
    if last.attn is None:
        raise ValueError("the caption stepper needs a model with attention (step() returned no attention)")
    S = last.attn.size(-1)
    g = math.isqrt(S)
    if g * g != S:
        raise ValueError(f"the model attends over {S} regions, which is not a square grid")
    tokens = last.tokens.tolist()  # (N, T)
    attn = last.attn.float().cpu().numpy()  # (N, T, S)
    cases = []
    for i, scene in enumerate(scenes):
        n = lengths[i] if lengths[i] is not None else len(tokens[i])
        cases.append(
            CaptionCase(
                scene=scene,
                tokens=tuple(vocab.itos[j] for j in tokens[i][:n]),
                attention=attn[i, :n],  # (T_i, S)
                grid=g,
                candidates=tuple(candidates[i][:n]),
            )
        )
    return cases


def caption_frame(case: CaptionCase, step: int) -> dict:
    """What the widget shows at ``step`` of ``case`` (pure: a lookup and an upsampling).

    Args:
        case: from :func:`caption_cases`.
        step: the produced token shown, ``0 <= step < case.n_steps``.

    Returns:
        ``{"step", "n_steps", "word", "words" (produced so far, this one included), "marked" (the
        caption so far with this word in brackets), "gold_caption", "candidates", "attention" (S,),
        "overlay" (H, W), "peak" (flat region), "peak_cell" ((row, col)), "peak_weight",
        "object" (index or None), "object_words" ((size, colour, shape) or None), "right_word"
        (the word fits the object; None without one), "box" ((y0, x0, y1, x1) pixels, exclusive
        ends, or None), "gold_cells" ((S,) bool or None), "peak_on_gold" (bool, or None without
        an object)}``.

    Raises:
        TypeError: ``case`` is not a :class:`CaptionCase`, or ``step`` not an int.
        ValueError: ``step`` outside the caption.
    """
    if not isinstance(case, CaptionCase):
        raise TypeError(f"case must be a CaptionCase (see caption_cases), got {type(case).__name__}")
    step = check_int("step", step, minimum=0)
    if step >= case.n_steps:
        raise ValueError(f"step must be < {case.n_steps} (the caption's tokens), got {step}")
    scene, g = case.scene, case.grid
    word = case.tokens[step]
    attention = case.attention[step]  # (S,)
    peak = int(np.argmax(attention))
    obj = named_objects(case.tokens[: step + 1], scene.n_objects)[step]
    words = list(case.tokens[: step + 1])
    frame = {
        "step": step,
        "n_steps": case.n_steps,
        "word": word,
        "words": words,
        "marked": " ".join([*words[:-1], f"[{word}]"]),
        "gold_caption": " ".join(scene.tokens),
        "candidates": case.candidates[step],
        "attention": attention,
        "overlay": upsample_attention(attention, g, scene.config.image_size),  # (H, W)
        "peak": peak,
        "peak_cell": divmod(peak, g),
        "peak_weight": float(attention[peak]),
        "object": obj,
        "object_words": None,
        "right_word": None,
        "box": None,
        "gold_cells": None,
        "peak_on_gold": None,
    }
    if obj is not None:
        o = scene.objects[obj]
        cells = case.object_cells[obj]  # (S,)
        frame.update(
            object_words=o.words,
            right_word=getattr(o, _ATTRIBUTE[WORD_CLASSES[word]]) == word,
            box=o.bbox,
            gold_cells=cells,
            peak_on_gold=bool(cells[peak]),
        )
    return frame


def format_caption_frame(frame: dict) -> str:
    """The caption so far with the current word marked, the object it names, where the attention peaks."""
    r, c = frame["peak_cell"]
    lines = [
        f"caption so far: {frame['marked']}",
        f"step {frame['step']} of {frame['n_steps'] - 1}: wrote {frame['word']!r}; attention peaks at region "
        f"(row {r}, col {c}) with weight {frame['peak_weight']:.2f}",
    ]
    if frame["object"] is None:
        lines.append("this word names no object")
    else:
        verdict = "the right word" if frame["right_word"] else "a wrong word"
        lines.append(
            f"it describes object {frame['object']}, a {' '.join(frame['object_words'])} ({verdict}); "
            f"the peak is {'ON' if frame['peak_on_gold'] else 'OFF'} the object"
        )
    if frame["candidates"]:
        lines.append("candidates: " + "  ".join(f"{w} {p:.2f}" for w, p in frame["candidates"]))
    lines.append(f"gold caption: {frame['gold_caption']}")
    return "\n".join(lines)


def plot_caption_frame(frame: dict, image: np.ndarray, ax) -> object:
    """The image under the step's attention (scaled to its peak), the named object's box and the peak region.

    Args:
        frame: from :func:`caption_frame`.
        image: ``(H, W, C)`` the case's :attr:`CaptionCase.image`.
        ax: a matplotlib Axes.

    Returns:
        ``ax``; ``ax.images`` are the image then the attention, ``ax.patches`` the peak region then
        (when the word names an object) the box, green when the peak is on the object, red when not.
    """
    from matplotlib.patches import Rectangle

    overlay = frame["overlay"]
    size = overlay.shape[0]
    p = size // math.isqrt(frame["attention"].shape[0])
    ax.imshow(image, interpolation="nearest")
    ax.imshow(overlay, cmap="inferno", alpha=0.6, vmin=0.0, vmax=max(frame["peak_weight"], 1e-12),
              interpolation="nearest")
    r, c = frame["peak_cell"]
    ax.add_patch(Rectangle((c * p - 0.5, r * p - 0.5), p, p, fill=False, edgecolor="white", linestyle=":", lw=1.2))
    if frame["box"] is not None:
        y0, x0, y1, x1 = frame["box"]
        ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, lw=2,
                               edgecolor="lime" if frame["peak_on_gold"] else "red"))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"step {frame['step']}: {frame['word']!r}", fontsize=9)
    return ax


def caption_stepper_widget(cases: Sequence[CaptionCase], labels: Sequence[str] | None = None):
    """A Dropdown ``scene`` and an IntSlider ``step``; that scene's image under that step's attention.

    Args:
        cases: from :func:`caption_cases`.
        labels: one name per case for the dropdown (default: its number and the first six words produced).

    Returns:
        an ``ipywidgets.VBox``; ``.result`` holds the latest :func:`caption_frame` dict plus
        ``"scene"``, the index of the case shown.
    """
    import ipywidgets as widgets

    cases = list(cases)
    if not cases:
        raise ValueError("caption_stepper_widget needs at least one case")
    for i, c in enumerate(cases):
        if not isinstance(c, CaptionCase):
            raise TypeError(f"cases[{i}] must be a CaptionCase (see caption_cases), got {type(c).__name__}")
    if labels is None:
        words = [[t for t in c.tokens if t != "<eos>"] for c in cases]
        labels = [f"#{i}: " + " ".join(w[:6]) + (" …" if len(w) > 6 else "") for i, w in enumerate(words)]
    labels = list(labels)
    if len(labels) != len(cases) or len(set(labels)) != len(labels):
        raise ValueError(f"labels must name each of the {len(cases)} cases once, got {labels!r}")
    scene = widgets.Dropdown(
        options=list(zip(labels, range(len(cases)), strict=True)), value=0, description="scene",
        layout=widgets.Layout(width="28em"),  # room for a label of six words (the browser test checks it)
    )
    step = widgets.IntSlider(value=0, min=0, max=cases[0].n_steps - 1, description="step")
    text = widgets.HTML()
    plot = picture()
    root = widgets.VBox([widgets.HBox([scene, step]), text, plot])

    def on_scene(change) -> None:
        n = cases[change["new"]].n_steps
        step.value = min(step.value, n - 1)  # first, so that lowering max never moves the value
        step.max = n - 1

    scene.observe(on_scene, names="value")  # registered first: the slider is valid before the refresh

    def compute() -> dict:
        case = cases[scene.value]
        return {**caption_frame(case, min(step.value, case.n_steps - 1)), "scene": scene.value}

    def draw(frame: dict):
        fig = new_figure((3.0, 3.0))
        plot_caption_frame(frame, cases[frame["scene"]].image, fig.add_subplot())
        return fig

    return live(root, text, plot, (scene, step), compute, format_caption_frame, draw)
