"""Generated scenes of coloured shapes with captions and gold image regions (lesson 13).

The text corpus scores attention over *words* against gold alignments; this module does the same
for attention over *image regions*. A scene is a small RGB image of one to three shapes, drawn
with numpy from a seed, together with an English caption and, for every caption word that names
an object or one of its attributes, the pixels of that object. Nothing is downloaded; images are
rendered on demand and never stored.

Layout
------
The image (``image_size`` pixels square, default 48) is cut into a coarse layout grid of cells
(``cell_size`` pixels, default 16: 3 × 3 cells). Each object sits inside its own cell, so objects
never overlap. An object is one of :data:`SHAPES` in one of :data:`COLOURS` and one of
:data:`SIZES`: a *small* object spans ``cell_size // 2`` pixels, a *large* one ``cell_size - 2``;
with ``jitter`` its box moves by a random whole number of pixels inside the cell. The background
is dark grey; optional noise, uniform in ``[-noise, noise]`` and the same for a given scene every
time, is added to every pixel (then clipped to ``[0, 1]``), so a pixel of an object never
differs from its colour by more than ``noise`` in any channel.

Captions
--------
Objects are listed in **reading order** of their cells (top row first, left to right inside a
row); this canonical order makes the caption a function of the image, so exact match is
reachable. Every object reads ``a <size> <colour> <shape>``; then

* one object: ``a small red circle``;
* two objects: ``<first> <relation> <second>``, where the relation says where the first object
  (in reading order) lies: ``left of`` / ``right of`` when the two cells are in different
  columns, ``above`` when they share a column (the first is then necessarily higher). So
  ``below`` never occurs;
* three or more: a list, ``<first> , <second> and <third>`` (commas between all but the last two).

The vocabulary (:data:`CAPTION_WORDS`) has 18 words; :func:`caption_vocab` adds the four
specials of :mod:`attnlab.data.vocab`. Each token has a word class (:data:`WORD_CLASSES`): ``"noun"``
(the shape), ``"colour"``, ``"size"`` or ``"function"`` (``a``, relation words, ``,``, ``and``).
``Scene.token_object[t]`` is the index of the object token ``t`` describes, for nouns, colours
and sizes, and None for function words.

Gold regions
------------
For an attention over a ``grid × grid`` feature map (patches of ``image_size // grid`` pixels),
:func:`token_region_mask` gives, for each token, the grid cells that hold at least one pixel of
its object (pixel masks, not boxes); :func:`token_regions` gives the same as sets of flat cell
indices ``row * grid + col``.

Splits and tasks
----------------
Scenes are bucketed by their number of objects (:attr:`Scene.bucket`, ``"1"``, ``"2"``, ``"3"``).
:func:`make_scene_splits` draws a test split stratified by bucket first, then valid, then train,
with no scene *content* (shapes, colours, sizes and cells; not the jitter or the noise) in two
splits. :func:`classification_set` builds image-classification tasks on the same scenes for a
Vision Transformer, with the gold mask of the object each label depends on.

Shape legend
------------
N   number of scenes
C   colour channels (3, RGB)
H   image height = W width = ``image_size``
K   objects in a scene
g   side of the attention grid; G = g * g grid cells
T   caption length + 1 (``<bos>`` in front of the decoder input, ``<eos>`` after the output)
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from attnlab.core.checks import check_choice, check_float, check_int, check_positive_int
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, Vocab

if TYPE_CHECKING:  # imported lazily at run time: attnlab.data.vocab imports this package
    from attnlab.data.vocab import Vocab

__all__ = [
    "SHAPES",
    "COLOURS",
    "COLOUR_RGB",
    "SIZES",
    "BACKGROUND_RGB",
    "RELATIONS",
    "CAPTION_WORDS",
    "WORD_CLASSES",
    "MIN_CELL_SIZE",
    "CLASSIFICATION_TASKS",
    "SceneConfig",
    "DEFAULT_CONFIG",
    "SceneObject",
    "Scene",
    "SceneSplits",
    "ClassificationSet",
    "make_object",
    "make_scene",
    "caption",
    "parse_caption",
    "generate_scenes",
    "make_scene_test_split",
    "make_scene_splits",
    "scene_bucket_names",
    "images_tensor",
    "object_masks",
    "token_region_mask",
    "token_regions",
    "token_region_batch",
    "caption_vocab",
    "encode_captions",
    "classification_set",
    "shares_label",
]

SHAPES = ("circle", "square", "triangle", "cross")
COLOURS = ("red", "green", "blue", "yellow", "purple")
COLOUR_RGB: dict[str, tuple[float, float, float]] = {
    "red": (0.90, 0.15, 0.15),
    "green": (0.15, 0.80, 0.20),
    "blue": (0.20, 0.35, 0.95),
    "yellow": (0.95, 0.85, 0.15),
    "purple": (0.65, 0.25, 0.85),
}
SIZES = ("small", "large")
BACKGROUND_RGB = (0.12, 0.12, 0.12)
RELATIONS = (("left", "of"), ("right", "of"), ("above",))
CAPTION_WORDS: tuple[str, ...] = ("a", *SIZES, *COLOURS, *SHAPES, "left", "right", "of", "above", ",", "and")
WORD_CLASSES: dict[str, str] = {
    **{w: "function" for w in CAPTION_WORDS},
    **{s: "noun" for s in SHAPES},
    **{c: "colour" for c in COLOURS},
    **{z: "size" for z in SIZES},
}
MIN_CELL_SIZE = 12  # below this a small shape is 4 pixels wide and a circle looks like a cross
CLASSIFICATION_TASKS = ("count", "circle_colour", "red_shape")

_COLOUR_ARRAY = {c: np.array(rgb, dtype=np.float32)[:, None] for c, rgb in COLOUR_RGB.items()}  # (C, 1)
_BACKGROUND = np.array(BACKGROUND_RGB, dtype=np.float32)[:, None, None]  # (C, 1, 1)


# --------------------------------------------------------------------------------------------
# Configuration, objects, scenes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SceneConfig:
    """Geometry and noise of generated scenes.

    Args:
        image_size: side of the square image in pixels.
        cell_size: side of a layout cell in pixels (``>= MIN_CELL_SIZE``, divides ``image_size``).
        n_objects: the numbers of objects a scene may have; one bucket each.
        noise: amplitude of the uniform pixel noise, in ``[0, 0.5]`` (0: none).
        jitter: move each object by a random offset inside its cell (else it is centred).

    Raises:
        TypeError / ValueError: a size that is not a positive int, a cell that does not divide
            the image, a number of objects above the number of cells, noise outside ``[0, 0.5]``.
    """

    image_size: int = 48
    cell_size: int = 16
    n_objects: tuple[int, ...] = (1, 2, 3)
    noise: float = 0.05
    jitter: bool = True

    def __post_init__(self):
        check_positive_int("image_size", self.image_size)
        check_int("cell_size", self.cell_size, minimum=MIN_CELL_SIZE)
        if self.image_size % self.cell_size:
            raise ValueError(f"image_size ({self.image_size}) must be a multiple of cell_size ({self.cell_size})")
        try:
            counts = tuple(self.n_objects)
        except TypeError:
            raise TypeError(f"n_objects must be a sequence of ints, got {self.n_objects!r}") from None
        if not counts:
            raise ValueError("n_objects must not be empty")
        for k in counts:
            check_positive_int("n_objects", k)
        if len(set(counts)) != len(counts):
            raise ValueError(f"n_objects must not repeat a count, got {counts}")
        cells = self.n_cells
        if max(counts) > cells:
            raise ValueError(
                f"n_objects asks for {max(counts)} objects but a {self.cells_per_side}x{self.cells_per_side} "
                f"layout (image_size {self.image_size}, cell_size {self.cell_size}) has only {cells} cells"
            )
        noise = check_float("noise", self.noise)
        if noise > 0.5:
            raise ValueError(f"noise must be <= 0.5 (colours would blur into each other), got {noise}")
        if not isinstance(self.jitter, bool):
            raise TypeError(f"jitter must be a bool, got {type(self.jitter).__name__} {self.jitter!r}")
        object.__setattr__(self, "n_objects", tuple(sorted(int(k) for k in counts)))
        object.__setattr__(self, "noise", noise)

    @property
    def cells_per_side(self) -> int:
        """Layout cells along one side (``image_size // cell_size``)."""
        return self.image_size // self.cell_size

    @property
    def n_cells(self) -> int:
        """Layout cells in the image."""
        return self.cells_per_side**2

    def extent(self, size: str) -> int:
        """Side in pixels of the box of an object of ``size`` (``"small"`` or ``"large"``)."""
        check_choice("size", size, SIZES)
        return self.cell_size // 2 if size == "small" else self.cell_size - 2


DEFAULT_CONFIG = SceneConfig()


@functools.cache
def _template(shape: str, extent: int) -> np.ndarray:
    """``(extent, extent)`` bool mask of ``shape`` drawn in its box (read-only; cached)."""
    centre = extent / 2
    y, x = np.mgrid[0:extent, 0:extent] + 0.5  # pixel centres, (e, e) each
    if shape == "circle":
        m = (y - centre) ** 2 + (x - centre) ** 2 <= centre**2
    elif shape == "square":
        m = np.ones((extent, extent), dtype=bool)
    elif shape == "triangle":  # apex up: the half-width grows linearly from the top row to the base
        m = np.abs(x - centre) <= (y / extent) * centre + 0.25
    elif shape == "cross":
        half = max(1, round(extent / 7))  # arms of width 2 * half: about a quarter of the box
        lo, hi = centre - half, centre + half
        m = ((x > lo) & (x < hi)) | ((y > lo) & (y < hi))
    else:  # pragma: no cover -- callers check the shape
        raise ValueError(f"unknown shape {shape!r}")
    m = np.ascontiguousarray(m)
    m.setflags(write=False)
    return m


@dataclass(frozen=True)
class SceneObject:
    """One shape in a scene: what it is, which layout cell holds it, and where its box lies.

    ``top``/``left`` are the pixel coordinates of its ``extent × extent`` box; the box lies inside
    the cell ``(row, col)``. Build one with :func:`make_object`.
    """

    shape: str
    colour: str
    size: str
    row: int
    col: int
    top: int
    left: int
    extent: int

    @property
    def words(self) -> tuple[str, str, str]:
        """``(size, colour, shape)``: the attribute words of its caption phrase."""
        return (self.size, self.colour, self.shape)

    @property
    def bbox(self) -> tuple[int, int, int, int]:
        """Tight bounding box of its pixels, ``(y0, x0, y1, x1)`` with exclusive ends."""
        m = _template(self.shape, self.extent)
        rows, cols = np.flatnonzero(m.any(1)), np.flatnonzero(m.any(0))
        return (
            self.top + int(rows[0]),
            self.left + int(cols[0]),
            self.top + int(rows[-1]) + 1,
            self.left + int(cols[-1]) + 1,
        )

    def mask(self, image_size: int) -> np.ndarray:
        """``(H, W)`` bool mask of its pixels in an image of side ``image_size``."""
        out = np.zeros((image_size, image_size), dtype=bool)  # (H, W)
        out[self.top : self.top + self.extent, self.left : self.left + self.extent] = _template(self.shape, self.extent)
        return out


@dataclass(frozen=True)
class Scene:
    """One generated scene: objects in reading order, the caption, and how to render the image.

    Attributes:
        objects: the objects, in reading order of their cells.
        tokens: the caption, one word per token (no specials).
        token_object: per token, the index in ``objects`` of the object it names (nouns,
            colours, sizes), or None (function words).
        noise_seed: seed of the pixel noise; :meth:`render` gives the same image every time.
        config: the geometry it was drawn with.
    """

    objects: tuple[SceneObject, ...]
    tokens: tuple[str, ...]
    token_object: tuple[int | None, ...]
    noise_seed: int
    config: SceneConfig = field(default=DEFAULT_CONFIG)

    @property
    def n_objects(self) -> int:
        """Number of objects."""
        return len(self.objects)

    @property
    def bucket(self) -> str:
        """Bucket name: the number of objects, e.g. ``"2"``."""
        return str(len(self.objects))

    @property
    def key(self) -> tuple:
        """The scene's content (shape, colour, size, cell of each object); splits never share one."""
        return tuple((o.shape, o.colour, o.size, o.row, o.col) for o in self.objects)

    @property
    def word_classes(self) -> tuple[str, ...]:
        """Per token, ``"noun"``, ``"colour"``, ``"size"`` or ``"function"``."""
        return tuple(WORD_CLASSES[t] for t in self.tokens)

    def render(self, out: np.ndarray | None = None) -> np.ndarray:
        """Draw the image.

        Args:
            out: optional ``(C, H, W)`` float32 array to draw into.

        Returns:
            ``(C, H, W)`` float32 in ``[0, 1]``.
        """
        size = self.config.image_size
        if out is None:
            out = np.empty((3, size, size), dtype=np.float32)  # (C, H, W)
        _render([self], out[None])  # the batch path of images_tensor, so both give the same bits
        return out

    def object_mask(self, i: int) -> np.ndarray:
        """``(H, W)`` bool mask of object ``i``'s pixels."""
        check_int("i", i, minimum=0)
        if i >= len(self.objects):
            raise ValueError(f"i must be < {len(self.objects)} (the scene's objects), got {i}")
        return self.objects[i].mask(self.config.image_size)


@dataclass(frozen=True)
class SceneSplits:
    """Train / valid / test lists of scenes; no scene content (:attr:`Scene.key`) is in two of them."""

    train: list[Scene]
    valid: list[Scene]
    test: list[Scene]


def _config(config) -> SceneConfig:
    if config is None:
        return DEFAULT_CONFIG
    if not isinstance(config, SceneConfig):
        raise TypeError(f"config must be a SceneConfig or None, got {type(config).__name__}")
    return config


def make_object(
    shape: str,
    colour: str,
    size: str,
    row: int,
    col: int,
    *,
    offset: tuple[int, int] | None = None,
    config: SceneConfig | None = None,
) -> SceneObject:
    """An object in layout cell ``(row, col)``.

    Args:
        shape: one of :data:`SHAPES`.
        colour: one of :data:`COLOURS`.
        size: one of :data:`SIZES`.
        row: layout row, ``0 .. cells_per_side - 1``.
        col: layout column.
        offset: ``(dy, dx)`` of its box from the cell's corner, each in ``[0, cell_size - extent]``;
            None centres it.
        config: the geometry (default :class:`SceneConfig`).

    Returns:
        A :class:`SceneObject`.

    Raises:
        ValueError: an unknown shape, colour or size, a cell outside the layout, an offset that
            would leave the cell.
    """
    cfg = _config(config)
    check_choice("shape", shape, SHAPES)
    check_choice("colour", colour, COLOURS)
    extent = cfg.extent(size)
    side = cfg.cells_per_side
    for name, v in (("row", row), ("col", col)):
        check_int(name, v, minimum=0)
        if v >= side:
            raise ValueError(f"{name} must be < {side} (a {side}x{side} layout), got {v}")
    free = cfg.cell_size - extent
    if offset is None:
        dy = dx = free // 2
    else:
        if len(offset) != 2:
            raise ValueError(f"offset must be a pair (dy, dx), got {offset!r}")
        dy, dx = offset
        for name, v in (("offset dy", dy), ("offset dx", dx)):
            check_int(name, v, minimum=0)
            if v > free:
                raise ValueError(
                    f"{name} must be <= {free} (a {size} object spans {extent} of the cell's {cfg.cell_size} "
                    f"pixels), got {v}"
                )
    return SceneObject(shape, colour, size, row, col, row * cfg.cell_size + dy, col * cfg.cell_size + dx, extent)


def _relation(first: SceneObject, second: SceneObject) -> tuple[str, ...]:
    """Where ``first`` lies relative to ``second`` (``first`` comes first in reading order)."""
    if first.col != second.col:
        return ("left", "of") if first.col < second.col else ("right", "of")
    return ("above",)


def caption(objects: Sequence[SceneObject]) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    """The caption of objects given in reading order (see the module docstring for the grammar).

    Args:
        objects: the scene's objects, in reading order.

    Returns:
        ``(tokens, token_object)``: the words, and per word the index of the object it names or None.
    """
    tokens: list[str] = []
    owner: list[int | None] = []

    def phrase(i):
        tokens.extend(("a", *objects[i].words))
        owner.extend((None, i, i, i))

    n = len(objects)
    if n == 2:
        phrase(0)
        rel = _relation(objects[0], objects[1])
        tokens.extend(rel)
        owner.extend([None] * len(rel))
        phrase(1)
        return tuple(tokens), tuple(owner)
    for i in range(n):
        if i:
            tokens.append("and" if i == n - 1 else ",")
            owner.append(None)
        phrase(i)
    return tuple(tokens), tuple(owner)


def parse_caption(tokens: Sequence[str]) -> tuple[list[tuple[str, str, str]], tuple[str, ...] | None] | None:
    """Read a caption back: its object phrases and, for two objects, the relation.

    The inverse of :func:`caption`; a model's output that the grammar cannot make gives None.

    Args:
        tokens: the words (no specials).

    Returns:
        ``([(size, colour, shape), ...], relation)``, ``relation`` a tuple such as
        ``("left", "of")`` for two objects and None otherwise; or None for a caption the grammar
        does not make.
    """
    toks = list(tokens)

    def take_phrase(k):
        if k + 4 > len(toks) or toks[k] != "a":
            return None
        size, colour, shape = toks[k + 1 : k + 4]
        if size not in SIZES or colour not in COLOURS or shape not in SHAPES:
            return None
        return (size, colour, shape)

    first = take_phrase(0)
    if first is None:
        return None
    if len(toks) == 4:
        return [first], None
    for rel in RELATIONS:
        if tuple(toks[4 : 4 + len(rel)]) == rel:
            second = take_phrase(4 + len(rel))
            if second is None or len(toks) != 8 + len(rel):
                return None
            return [first, second], rel
    phrases, k = [first], 4
    while k < len(toks):
        sep = toks[k]
        p = take_phrase(k + 1)
        if p is None or sep not in (",", "and"):
            return None
        phrases.append(p)
        k += 5
        if (sep == "and") != (k == len(toks)):  # "and" before the last phrase, "," before the others
            return None
    if len(phrases) < 3:
        return None
    return phrases, None


def make_scene(objects: Iterable[SceneObject], *, noise_seed: int = 0, config: SceneConfig | None = None) -> Scene:
    """A scene from hand-built objects (:func:`make_object`), sorted into reading order.

    Args:
        objects: one to ``n_cells`` objects, each in its own cell.
        noise_seed: seed of the pixel noise.
        config: the geometry the objects were built for (default :class:`SceneConfig`).

    Returns:
        A :class:`Scene` with its caption.

    Raises:
        ValueError: no objects, more objects than cells, two objects in one cell, or an object
            built for another geometry.
    """
    cfg = _config(config)
    objs = list(objects)
    check_int("noise_seed", noise_seed, minimum=0)
    if not objs:
        raise ValueError("a scene needs at least one object, got none")
    if len(objs) > cfg.n_cells:
        raise ValueError(f"a scene of {len(objs)} objects does not fit in the layout's {cfg.n_cells} cells")
    seen = {}
    for o in objs:
        if not isinstance(o, SceneObject):
            raise TypeError(f"objects must be SceneObject (see make_object), got {type(o).__name__}")
        cell = (o.row, o.col)
        if cell in seen:
            raise ValueError(f"two objects share layout cell {cell} and would overlap: {seen[cell]} and {o}")
        seen[cell] = o
        if (
            o.row >= cfg.cells_per_side
            or o.col >= cfg.cells_per_side
            or o.extent != cfg.extent(o.size)
            or not 0 <= o.top - o.row * cfg.cell_size <= cfg.cell_size - o.extent
            or not 0 <= o.left - o.col * cfg.cell_size <= cfg.cell_size - o.extent
        ):
            raise ValueError(f"object {o} was not built for this config ({cfg}); use make_object(..., config=config)")
    objs.sort(key=lambda o: (o.row, o.col))
    tokens, owner = caption(objs)
    return Scene(tuple(objs), tokens, owner, noise_seed, cfg)


# --------------------------------------------------------------------------------------------
# Drawing scenes at random
# --------------------------------------------------------------------------------------------


def _draw_scene(
    rng: random.Random,
    n: int,
    cfg: SceneConfig,
    shapes: Sequence[Sequence[str]] | None = None,
    colours: Sequence[Sequence[str]] | None = None,
) -> Scene:
    """A random scene of ``n`` objects; ``shapes[i]`` / ``colours[i]`` restrict object ``i``'s draws.

    The restricted objects are numbered in reading order (object ``i`` takes the ``i``-th cell).
    """
    rand, randrange = rng.random, rng.randrange
    cells = sorted(rng.sample(range(cfg.n_cells), n))
    side, cell = cfg.cells_per_side, cfg.cell_size
    objs = []
    for i, c in enumerate(cells):
        ss = SHAPES if shapes is None else shapes[i]
        cs = COLOURS if colours is None else colours[i]
        shape = ss[int(rand() * len(ss))]
        colour = cs[int(rand() * len(cs))]
        size = SIZES[int(rand() * 2)]
        extent = cfg.extent(size)
        free = cell - extent
        if cfg.jitter:
            dy, dx = randrange(free + 1), randrange(free + 1)
        else:
            dy = dx = free // 2
        row, col = divmod(c, side)
        objs.append(SceneObject(shape, colour, size, row, col, row * cell + dy, col * cell + dx, extent))
    tokens, owner = caption(objs)
    return Scene(tuple(objs), tokens, owner, rng.getrandbits(63), cfg)


def _capacity(cfg: SceneConfig, n: int) -> int:
    """Number of distinct scene contents with ``n`` objects."""
    return math.comb(cfg.n_cells, n) * (len(SHAPES) * len(COLOURS) * len(SIZES)) ** n


def scene_bucket_names(config: SceneConfig | None = None) -> tuple[str, ...]:
    """The bucket names of ``config``: its numbers of objects as strings, e.g. ``("1", "2", "3")``."""
    return tuple(str(k) for k in _config(config).n_objects)


def generate_scenes(n: int, *, seed: int, config: SceneConfig | None = None) -> list[Scene]:
    """``n`` random scenes, the number of objects drawn uniformly from ``config.n_objects``.

    Scenes may repeat. Only ``random.Random`` seeded from ``seed`` is used: the same seed gives
    the same scenes (and images) on every machine.

    Args:
        n: number of scenes (``>= 0``).
        seed: random seed.
        config: the geometry (default :class:`SceneConfig`).

    Returns:
        A list of :class:`Scene`.
    """
    check_int("n", n, minimum=0)
    check_int("seed", seed)
    cfg = _config(config)
    rng = random.Random(f"attnlab.scenes/generate/{seed}")
    counts = cfg.n_objects
    return [_draw_scene(rng, counts[int(rng.random() * len(counts))], cfg) for _ in range(n)]


def _draw_bucket(rng, k: int, n: int, cfg, held: set, unique: bool, what: str, draw=None) -> list[Scene]:
    """``n`` scenes of ``k`` objects whose contents are not in ``held`` (and distinct when ``unique``)."""
    draw = draw or (lambda: _draw_scene(rng, k, cfg))
    out: list[Scene] = []
    seen: set = set()
    tries, max_tries = 0, 50 * n + 1000
    while len(out) < n:
        tries += 1
        if tries > max_tries:
            raise ValueError(
                f"could only draw {len(out)} of {n} {'distinct ' if unique else ''}{what} scenes with {k} "
                f"object(s) that are not in the other splits (of {_capacity(cfg, k)} possible contents)"
            )
        s = draw()
        key = s.key
        if key in held or (unique and key in seen):
            continue
        if unique:
            seen.add(key)
        out.append(s)
    return out


def _check_room(cfg: SceneConfig, k: int, n: int, arg: str, held: int = 0) -> None:
    """Raise when ``n`` new distinct scenes of ``k`` objects cannot exist besides ``held`` taken ones."""
    room = _capacity(cfg, k)
    if n + held > room:
        taken = f" beyond the {held} the other splits hold," if held else ""
        raise ValueError(f"{arg}: asked for {n} distinct scenes with {k} object(s){taken} but only {room} exist")


def make_scene_test_split(
    *,
    seed: int,
    per_bucket: int = 100,
    exclude: Iterable[Scene] | None = None,
    config: SceneConfig | None = None,
) -> list[Scene]:
    """A stratified test split: exactly ``per_bucket`` distinct scenes per number of objects, in bucket order.

    ``make_scene_test_split(seed=s, per_bucket=k)`` equals ``make_scene_splits(seed=s, test_per_bucket=k).test``.

    Args:
        seed: random seed.
        per_bucket: scenes per bucket.
        exclude: scenes whose content must not appear.
        config: the geometry (default :class:`SceneConfig`).

    Returns:
        ``len(config.n_objects) * per_bucket`` scenes.

    Raises:
        ValueError: a negative ``per_bucket``, or more distinct scenes than a bucket holds.
    """
    check_int("per_bucket", per_bucket, minimum=0)
    check_int("seed", seed)
    cfg = _config(config)
    held = {s.key for s in exclude} if exclude is not None else set()
    rng = random.Random(f"attnlab.scenes/test/{seed}")
    out: list[Scene] = []
    for k in cfg.n_objects:
        _check_room(cfg, k, per_bucket, "per_bucket")
        part = _draw_bucket(rng, k, per_bucket, cfg, held, True, "test")
        held.update(s.key for s in part)
        out.extend(part)
    return out


def _draw_split(rng, n, cfg, held, unique, what) -> list[Scene]:
    """``n`` scenes, each bucket drawn uniformly, none in ``held``; redraws stay in the bucket."""
    counts = cfg.n_objects
    per = [0] * len(counts)
    order = [int(rng.random() * len(counts)) for _ in range(n)]
    for b in order:
        per[b] += 1
    parts = {}
    for b, k in enumerate(counts):
        if unique:
            _check_room(cfg, k, per[b], f"n_{what}", sum(1 for key in held if len(key) == k))
        parts[b] = iter(_draw_bucket(rng, k, per[b], cfg, held, unique, what))
    return [next(parts[b]) for b in order]


def make_scene_splits(
    *,
    n_train: int = 3000,
    n_valid: int = 300,
    test_per_bucket: int = 100,
    seed: int = 0,
    config: SceneConfig | None = None,
) -> SceneSplits:
    """Train / valid / test scenes with no scene content in two splits.

    The test split is drawn first (stratified, :func:`make_scene_test_split`), then valid
    (distinct contents, none in test), then train (none in test or valid; one-object scenes,
    of which there are few, may repeat inside train). Valid and train draw their number of
    objects uniformly for each scene.

    Args:
        n_train: training scenes.
        n_valid: validation scenes.
        test_per_bucket: test scenes per number of objects.
        seed: random seed.
        config: the geometry (default :class:`SceneConfig`).

    Returns:
        :class:`SceneSplits`.

    Raises:
        ValueError: a negative size, or more distinct scenes asked for than exist.
    """
    check_int("n_train", n_train, minimum=0)
    check_int("n_valid", n_valid, minimum=0)
    check_int("test_per_bucket", test_per_bucket, minimum=0)
    check_int("seed", seed)
    cfg = _config(config)
    test = make_scene_test_split(seed=seed, per_bucket=test_per_bucket, config=cfg)
    held = {s.key for s in test}
    valid = _draw_split(random.Random(f"attnlab.scenes/valid/{seed}"), n_valid, cfg, held, True, "valid")
    held.update(s.key for s in valid)
    train = _draw_split(random.Random(f"attnlab.scenes/train/{seed}"), n_train, cfg, held, False, "train")
    return SceneSplits(train=train, valid=valid, test=test)


# --------------------------------------------------------------------------------------------
# Tensors and gold regions
# --------------------------------------------------------------------------------------------


_RENDER_CHUNK = 256  # scenes whose noise is drawn before it is added at once (a 7 MB buffer at 48 px)


def _render(scenes: Sequence[Scene], out: np.ndarray) -> None:
    """Draw ``scenes`` (of one image size) into ``out`` ``(N, C, H, W)`` float32.

    Each scene's noise comes from its own generator (``noise_seed``), so an image does not
    depend on the batch it is drawn in; only the arithmetic is batched.
    """
    buf = np.empty((min(len(scenes), _RENDER_CHUNK), *out.shape[1:]), dtype=np.float32)  # (chunk, C, H, W)
    for start in range(0, len(scenes), _RENDER_CHUNK):
        part = scenes[start : start + _RENDER_CHUNK]
        img, noise = out[start : start + len(part)], buf[: len(part)]  # (n, C, H, W) each
        amp = np.empty((len(part), 1, 1, 1), dtype=np.float32)  # (n, 1, 1, 1) noise amplitude
        img[...] = _BACKGROUND
        for j, s in enumerate(part):
            for o in s.objects:
                box = img[j, :, o.top : o.top + o.extent, o.left : o.left + o.extent]  # (C, e, e), a view
                box[:, _template(o.shape, o.extent)] = _COLOUR_ARRAY[o.colour]
            amp[j] = s.config.noise
            if s.config.noise:
                np.random.default_rng(s.noise_seed).random(out=noise[j], dtype=np.float32)  # (C, H, W) in [0, 1)
            else:
                noise[j] = 0.0
        noise *= 2 * amp
        noise -= amp  # uniform in [-amp, amp)
        img += noise
        np.clip(img, 0.0, 1.0, out=img)


def _scene_list(scenes, name="scenes") -> list[Scene]:
    out = list(scenes)
    for s in out:
        if not isinstance(s, Scene):
            raise TypeError(f"{name} must hold Scene objects, got {type(s).__name__}")
    return out


def images_tensor(scenes: Iterable[Scene]) -> torch.Tensor:
    """Render scenes into one batch.

    Args:
        scenes: scenes of one image size.

    Returns:
        ``(N, C, H, W)`` float32 tensor in ``[0, 1]``.

    Raises:
        ValueError: scenes of different image sizes.
    """
    ss = _scene_list(scenes)
    sizes = {s.config.image_size for s in ss}
    if len(sizes) > 1:
        raise ValueError(f"scenes must share one image size to stack, got sizes {sorted(sizes)}")
    size = sizes.pop() if sizes else DEFAULT_CONFIG.image_size
    out = np.empty((len(ss), 3, size, size), dtype=np.float32)  # (N, C, H, W)
    _render(ss, out)
    return torch.from_numpy(out)


def object_masks(scene: Scene) -> np.ndarray:
    """``(K, H, W)`` bool pixel masks of a scene's objects, in reading order."""
    size = scene.config.image_size
    return np.stack([o.mask(size) for o in scene.objects]) if scene.objects else np.zeros((0, size, size), bool)


def _check_grid(scene: Scene, grid) -> int:
    check_positive_int("grid", grid)
    size = scene.config.image_size
    if size % grid:
        raise ValueError(f"image_size ({size}) must be divisible by grid ({grid}) to cut the image into grid cells")
    return grid


def _object_cells(scene: Scene, grid: int) -> np.ndarray:
    """``(K, G)`` bool: object ``k`` has a pixel in grid cell ``j``."""
    masks = object_masks(scene)  # (K, H, W)
    k, size = masks.shape[0], scene.config.image_size
    p = size // grid
    cells = masks.reshape(k, grid, p, grid, p).any(axis=(2, 4))  # (K, g, g)
    return cells.reshape(k, grid * grid)  # (K, G)


def token_region_mask(scene: Scene, grid: int) -> np.ndarray:
    """Gold regions of the caption's tokens on a ``grid × grid`` attention grid.

    Args:
        scene: the scene.
        grid: cells per side of the feature grid; must divide ``image_size``.

    Returns:
        ``(len(tokens), G)`` bool: row ``t`` is True on the grid cells (flat index ``row * grid + col``)
        holding a pixel of the object token ``t`` names; all False for function words.

    Raises:
        ValueError: ``grid`` does not divide the image size.
    """
    g = _check_grid(scene, grid)
    cells = _object_cells(scene, g)  # (K, G)
    out = np.zeros((len(scene.tokens), g * g), dtype=bool)  # (len(tokens), G)
    for t, k in enumerate(scene.token_object):
        if k is not None:
            out[t] = cells[k]
    return out


def token_regions(scene: Scene, grid: int) -> tuple[frozenset[int], ...]:
    """Per caption token, the set of flat grid cells its object overlaps (empty for function words).

    Same as :func:`token_region_mask`, as sets: ``{row * grid + col, ...}``.
    """
    return tuple(frozenset(int(j) for j in np.flatnonzero(row)) for row in token_region_mask(scene, grid))


def token_region_batch(scenes: Iterable[Scene], grid: int) -> torch.Tensor:
    """Gold regions for a batch, aligned with ``tgt_out`` of :func:`encode_captions`.

    Args:
        scenes: the scenes.
        grid: cells per side of the feature grid.

    Returns:
        ``(N, T, G)`` bool, ``T`` = longest caption + 1; the rows of ``<eos>`` and padding are all False.
    """
    ss = _scene_list(scenes)
    g = check_positive_int("grid", grid)
    T = max((len(s.tokens) for s in ss), default=0) + 1
    out = np.zeros((len(ss), T, g * g), dtype=bool)  # (N, T, G)
    for i, s in enumerate(ss):
        out[i, : len(s.tokens)] = token_region_mask(s, g)
    return torch.from_numpy(out)


def caption_vocab() -> Vocab:
    """The caption vocabulary: the specials of :mod:`attnlab.data.vocab`, then :data:`CAPTION_WORDS`.

    Fixed (not counted from data), so every split and checkpoint agrees on the ids.

    Returns:
        A :class:`attnlab.data.vocab.Vocab` of 22 tokens.
    """

    return Vocab([*SPECIALS, *CAPTION_WORDS])


def encode_captions(scenes: Iterable[Scene], vocab: Vocab | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Captions as decoder tensors, the way :func:`attnlab.data.loaders.encode_pairs` encodes targets.

    Args:
        scenes: the scenes.
        vocab: a :class:`attnlab.data.vocab.Vocab` (default :func:`caption_vocab`).

    Returns:
        ``(tgt_in, tgt_out)``, each ``(N, T)`` int64, right-padded with ``<pad>``: ``tgt_in`` =
        ``<bos>`` + tokens, ``tgt_out`` = tokens + ``<eos>``.
    """

    ss = _scene_list(scenes)
    vocab = caption_vocab() if vocab is None else vocab
    T = max((len(s.tokens) for s in ss), default=0) + 1
    tgt_in = torch.full((len(ss), T), PAD, dtype=torch.int64)  # (N, T)
    tgt_out = torch.full((len(ss), T), PAD, dtype=torch.int64)  # (N, T)
    for i, s in enumerate(ss):
        ids = vocab.encode(s.tokens, eos=False)
        n = len(ids)
        tgt_in[i, : n + 1] = torch.tensor([BOS, *ids])
        tgt_out[i, : n + 1] = torch.tensor([*ids, EOS])
    return tgt_in, tgt_out


# --------------------------------------------------------------------------------------------
# Classification tasks (for the Vision Transformer)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassificationSet:
    """Images, labels and the gold object mask each label depends on.

    Attributes:
        images: ``(N, C, H, W)`` float32.
        labels: ``(N,)`` int64, indices into ``label_names``.
        label_names: the class names.
        masks: ``(N, H, W)`` bool: the pixels of the object(s) the label depends on.
        scenes: the scenes, in the same order.
        task: the task's name (:data:`CLASSIFICATION_TASKS`).
    """

    images: torch.Tensor
    labels: torch.Tensor
    label_names: tuple[str, ...]
    masks: torch.Tensor
    scenes: tuple[Scene, ...]
    task: str


def shares_label(data: ClassificationSet) -> np.ndarray:
    """Per image, whether another object shares the labelled attribute of the gold one (``"circle_colour"``:
    its colour; ``"red_shape"``: its shape), so that the answer can be read off a distractor too.

    Returns:
        ``(N,)`` bool (all False for ``"count"``).
    """
    if data.task == "count":
        return np.zeros(len(data.scenes), dtype=bool)
    attr = "colour" if data.task == "circle_colour" else "shape"
    out = []
    for s, label in zip(data.scenes, data.labels.tolist(), strict=True):
        name = data.label_names[label]
        out.append(sum(getattr(o, attr) == name for o in s.objects) > 1)
    return np.array(out, dtype=bool)


def classification_set(
    n: int,
    *,
    task: str,
    seed: int,
    config: SceneConfig | None = None,
    exclude: Iterable[Scene] | None = None,
    distinct_distractors: bool = False,
) -> ClassificationSet:
    """An image-classification set on generated scenes.

    Tasks (:data:`CLASSIFICATION_TASKS`); the number of objects is drawn uniformly from
    ``config.n_objects`` and the label uniformly from its classes:

    * ``"count"`` -- the number of objects (classes ``config.n_objects``); the gold mask is all objects;
    * ``"circle_colour"`` -- every scene has exactly one circle (the others are other shapes);
      the label is its colour (:data:`COLOURS`); the gold mask is the circle;
    * ``"red_shape"`` -- every scene has exactly one red object (the others other colours); the
      label is its shape (:data:`SHAPES`); the gold mask is the red object.

    Args:
        n: number of images (``>= 0``).
        task: the task's name.
        seed: random seed.
        config: the geometry (default :class:`SceneConfig`).
        exclude: scenes whose content must not appear (e.g. the training set's, for a test set).
        distinct_distractors: the other objects never share the labelled object's colour
            (``"circle_colour"``) or shape (``"red_shape"``), so that the answer can be read from
            the gold object only. Off by default, which keeps every set drawn before the option
            existed (the same seed gives the same scenes); a set drawn with it is another set.

    Returns:
        :class:`ClassificationSet`.

    Raises:
        ValueError: a negative ``n``, an unknown task, or too few scenes left outside ``exclude``.
    """
    check_int("n", n, minimum=0)
    check_choice("task", task, CLASSIFICATION_TASKS)
    check_int("seed", seed)
    if not isinstance(distinct_distractors, bool):
        raise TypeError(f"distinct_distractors must be a bool, got {type(distinct_distractors).__name__}")
    cfg = _config(config)
    held = {s.key for s in _scene_list(exclude, "exclude")} if exclude is not None else set()
    seed_text = f"attnlab.scenes/classify/{task}/{seed}" + ("/distinct" if distinct_distractors else "")
    rng = random.Random(seed_text)
    counts = cfg.n_objects
    names = {"count": tuple(map(str, counts)), "circle_colour": COLOURS, "red_shape": SHAPES}[task]
    others_shapes = tuple(s for s in SHAPES if s != "circle")
    others_colours = tuple(c for c in COLOURS if c != "red")
    scenes, labels, targets = [], [], []
    for _ in range(n):
        label = int(rng.random() * len(names))
        k = counts[label] if task == "count" else counts[int(rng.random() * len(counts))]
        target = int(rng.random() * k)  # which object (in reading order) the label is about
        if task == "count":
            shapes = colours = None
        elif task == "circle_colour":
            shapes = [("circle",) if i == target else others_shapes for i in range(k)]
            other = tuple(c for c in COLOURS if c != names[label]) if distinct_distractors else COLOURS
            colours = [(names[label],) if i == target else other for i in range(k)]
        else:
            other = tuple(s for s in SHAPES if s != names[label]) if distinct_distractors else SHAPES
            shapes = [(names[label],) if i == target else other for i in range(k)]
            colours = [("red",) if i == target else others_colours for i in range(k)]

        def draw(k=k, shapes=shapes, colours=colours):
            return _draw_scene(rng, k, cfg, shapes, colours)

        (scene,) = _draw_bucket(rng, k, 1, cfg, held, False, f"{task} ({names[label]})", draw)
        scenes.append(scene)
        labels.append(label)
        targets.append(None if task == "count" else target)
    size = cfg.image_size
    masks = np.zeros((n, size, size), dtype=bool)  # (N, H, W)
    for i, (s, t) in enumerate(zip(scenes, targets, strict=True)):
        masks[i] = object_masks(s).any(0) if t is None else s.object_mask(t)
    return ClassificationSet(
        images=images_tensor(scenes) if scenes else torch.zeros((0, 3, size, size)),
        labels=torch.tensor(labels, dtype=torch.int64),
        label_names=tuple(names),
        masks=torch.from_numpy(masks),
        scenes=tuple(scenes),
        task=task,
    )
