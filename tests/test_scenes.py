"""Generated scenes (attnlab.data.corpus.scenes): determinism, gold regions, captions, splits, tasks, errors."""

import dataclasses
import itertools
from collections import Counter

import numpy as np
import pytest
import torch

from attnlab.data.corpus import Pair, scenes
from attnlab.data.corpus.scenes import (
    CAPTION_WORDS,
    COLOUR_RGB,
    COLOURS,
    SHAPES,
    SIZES,
    SceneConfig,
    caption_vocab,
    classification_set,
    encode_captions,
    generate_scenes,
    images_tensor,
    make_object,
    make_scene,
    make_scene_splits,
    make_scene_test_split,
    object_masks,
    parse_caption,
    token_region_batch,
    token_region_mask,
    token_regions,
)
from attnlab.data.loaders import encode_pairs
from attnlab.data.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab


@pytest.fixture(scope="module")
def many():
    return generate_scenes(600, seed=11)


@pytest.fixture(scope="module")
def small_splits():
    return make_scene_splits(n_train=1200, n_valid=150, test_per_bucket=40, seed=5)


def hand_scene(config=None):
    """A small red circle in the top-left corner, a large blue square in the middle row, right column."""
    circle = make_object("circle", "red", "small", 0, 0, offset=(0, 0), config=config)
    square = make_object("square", "blue", "large", 1, 2, offset=(1, 1), config=config)
    return make_scene([square, circle], noise_seed=3, config=config)


# ---------------------------------------------------------------------------------------------
# determinism and rendering
# ---------------------------------------------------------------------------------------------


def test_same_seed_same_scenes_and_bytes():
    a, b = generate_scenes(80, seed=3), generate_scenes(80, seed=3)
    assert a == b
    assert images_tensor(a).numpy().tobytes() == images_tensor(b).numpy().tobytes()


def test_different_seeds_differ():
    a, c = generate_scenes(80, seed=3), generate_scenes(80, seed=4)
    assert [s.key for s in a] != [s.key for s in c]
    assert not torch.equal(images_tensor(a), images_tensor(c))


def test_noise_seed_changes_only_the_noise():
    s = hand_scene()
    t = dataclasses.replace(s, noise_seed=s.noise_seed + 1)
    a, b = s.render(), t.render()
    assert not np.array_equal(a, b)
    assert np.abs(a - b).max() <= 2 * s.config.noise + 1e-6


def test_render_alone_equals_batch(many):
    batch = images_tensor(many[:20])
    assert batch.shape == (20, 3, 48, 48) and batch.dtype == torch.float32
    for i, s in enumerate(many[:20]):
        assert np.array_equal(s.render(), batch[i].numpy())
    assert float(batch.min()) >= 0.0 and float(batch.max()) <= 1.0


def test_no_noise_gives_exact_colours():
    s = generate_scenes(1, seed=0, config=SceneConfig(noise=0.0))[0]
    img = s.render()
    for k, o in enumerate(s.objects):
        assert (img[:, s.object_mask(k)] == np.float32(COLOUR_RGB[o.colour])[:, None]).all()


def test_other_sizes_render(many):
    cfg = SceneConfig(image_size=64, cell_size=16, n_objects=(2, 5))
    ss = generate_scenes(30, seed=1, config=cfg)
    assert images_tensor(ss).shape == (30, 3, 64, 64)
    assert {s.n_objects for s in ss} == {2, 5}


# ---------------------------------------------------------------------------------------------
# gold masks and layout
# ---------------------------------------------------------------------------------------------


def test_gold_mask_pixels_carry_the_colour_and_lie_in_the_bbox(many):
    bg = np.float32(scenes.BACKGROUND_RGB)
    for s in many[:300]:
        img = s.render()
        noise = s.config.noise + 1e-6
        masks = object_masks(s)
        assert masks.shape == (s.n_objects, 48, 48)
        for o, m in zip(s.objects, masks, strict=True):
            assert m.sum() > 0
            pix = img[:, m]  # (C, pixels)
            assert np.abs(pix - np.float32(COLOUR_RGB[o.colour])[:, None]).max() <= noise
            y0, x0, y1, x1 = o.bbox
            inside = np.zeros_like(m)
            inside[y0:y1, x0:x1] = True
            assert not (m & ~inside).any()
            # the box is tight: the mask touches each of its four edges
            assert m[y0].any() and m[y1 - 1].any() and m[:, x0].any() and m[:, x1 - 1].any()
        rest = ~masks.any(0)
        assert np.abs(img[:, rest] - bg[:, None]).max() <= noise


def test_objects_do_not_overlap_and_stay_in_their_cells(many):
    for s in many:
        masks = object_masks(s)
        assert masks.sum(0).max() == 1
        assert len({(o.row, o.col) for o in s.objects}) == s.n_objects
        for o in s.objects:
            c = s.config.cell_size
            y0, x0, y1, x1 = o.bbox
            assert o.row * c <= y0 < y1 <= (o.row + 1) * c
            assert o.col * c <= x0 < x1 <= (o.col + 1) * c


def test_objects_are_in_reading_order(many):
    for s in many:
        cells = [(o.row, o.col) for o in s.objects]
        assert cells == sorted(cells)


@pytest.mark.parametrize("cell_size", [scenes.MIN_CELL_SIZE, 16, 24])
def test_shapes_are_distinct_at_both_sizes(cell_size):
    cfg = SceneConfig(image_size=2 * cell_size, cell_size=cell_size, n_objects=(1,))
    for size in SIZES:
        e = cfg.extent(size)
        masks = {
            sh: make_object(sh, "red", size, 0, 0, offset=(0, 0), config=cfg).mask(cfg.image_size) for sh in SHAPES
        }
        for a, b in itertools.combinations(SHAPES, 2):
            assert (masks[a] != masks[b]).sum() >= 4, (size, a, b)  # a small circle is a square less its corners
        for sh, m in masks.items():
            box = m[:e, :e]
            assert box.any(0).all() and box.any(1).all(), sh  # fills its box's width and height
            assert np.array_equal(box, box[:, ::-1]), sh  # mirror-symmetric
        tri = masks["triangle"]
        assert tri[0].sum() < tri[e - 1].sum()  # apex up


def test_every_attribute_and_every_cell_occurs(many):
    seen = Counter()
    for s in many:
        for o in s.objects:
            seen.update([o.shape, o.colour, o.size, (o.row, o.col)])
    for name in (*SHAPES, *COLOURS, *SIZES, *itertools.product(range(3), range(3))):
        assert seen[name] > 20, name


def test_jitter_moves_objects_and_can_be_switched_off():
    moved = {(o.top % 16, o.left % 16) for s in generate_scenes(200, seed=2) for o in s.objects if o.size == "small"}
    assert len(moved) > 10
    fixed = generate_scenes(200, seed=2, config=SceneConfig(jitter=False))
    assert {(o.top % 16, o.left % 16) for s in fixed for o in s.objects} == {(4, 4), (1, 1)}


# ---------------------------------------------------------------------------------------------
# captions
# ---------------------------------------------------------------------------------------------


def expected_relation(a, b):
    if a.col != b.col:
        return ("left", "of") if a.col < b.col else ("right", "of")
    assert a.row < b.row
    return ("above",)


def test_captions_parse_back_into_their_objects(many):
    for s in many:
        assert set(s.tokens) <= set(CAPTION_WORDS)
        parsed = parse_caption(s.tokens)
        assert parsed is not None, s.tokens
        phrases, relation = parsed
        assert phrases == [o.words for o in s.objects]
        if s.n_objects == 2:
            assert relation == expected_relation(*s.objects)
        else:
            assert relation is None


def test_relation_words_agree_with_pixel_positions(many):
    counts = Counter()
    for s in (s for s in many if s.n_objects == 2):
        (ay0, ax0, ay1, ax1), (by0, bx0, by1, bx1) = (o.bbox for o in s.objects)
        _, relation = parse_caption(s.tokens)
        counts[relation] += 1
        if relation == ("left", "of"):
            assert ax1 <= bx0
        elif relation == ("right", "of"):
            assert bx1 <= ax0
        else:
            assert relation == ("above",) and ay1 <= by0 and s.objects[0].col == s.objects[1].col
    assert set(counts) == {("left", "of"), ("right", "of"), ("above",)}


def test_token_object_and_word_classes(many):
    attr = {"noun": "shape", "colour": "colour", "size": "size"}
    for s in many:
        assert len(s.token_object) == len(s.tokens) == len(s.word_classes)
        for tok, k, cls in zip(s.tokens, s.token_object, s.word_classes, strict=True):
            if cls == "function":
                assert k is None
            else:
                assert getattr(s.objects[k], attr[cls]) == tok
        assert sum(c == "noun" for c in s.word_classes) == s.n_objects


def test_caption_examples():
    assert " ".join(hand_scene().tokens) == "a small red circle left of a large blue square"
    objs = [
        make_object("cross", "green", "large", 2, 0),
        make_object("triangle", "yellow", "small", 0, 1),
        make_object("square", "purple", "small", 1, 1),
    ]
    s = make_scene(objs)
    assert " ".join(s.tokens) == "a small yellow triangle , a small purple square and a large green cross"
    assert s.bucket == "3"
    one = make_scene([make_object("circle", "blue", "small", 2, 2)])
    assert one.tokens == ("a", "small", "blue", "circle") and one.token_object == (None, 0, 0, 0)
    above = make_scene([make_object("circle", "blue", "small", 2, 1), make_object("cross", "red", "large", 0, 1)])
    assert " ".join(above.tokens) == "a large red cross above a small blue circle"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a small red",
        "a red small circle",
        "a small red circle and a large blue square",
        "a small red circle below a large blue square",
        "a small red circle left of a large blue square and a small green cross",
        "a small red circle , a large blue square , a small green cross",
        "a small red circle and a large blue square and a small green cross",
        "a small red circle , a large blue square and a small green cross ,",
        "a small red circle left a large blue square",
    ],
)
def test_parse_caption_rejects_what_the_grammar_does_not_make(text):
    assert parse_caption(text.split()) is None


def test_parse_caption_reads_longer_lists():
    text = "a small red circle , a large blue square , a small green cross and a large yellow triangle"
    phrases, relation = parse_caption(text.split())
    assert [p[2] for p in phrases] == ["circle", "square", "cross", "triangle"] and relation is None


# ---------------------------------------------------------------------------------------------
# gold regions on the attention grid
# ---------------------------------------------------------------------------------------------


def test_token_regions_on_a_hand_built_scene():
    s = hand_scene()
    none, circle, square = frozenset(), frozenset({0}), frozenset({16, 17, 22, 23})
    assert token_regions(s, 6) == (none, circle, circle, circle, none, none, none, square, square, square)
    assert token_regions(s, 3) == (none, *[frozenset({0})] * 3, none, none, none, *[frozenset({5})] * 3)
    m = token_region_mask(s, 6)
    assert m.shape == (10, 36) and m.dtype == bool and m.sum() == 3 * 1 + 3 * 4


def test_token_regions_follow_pixels_not_boxes():
    # A large triangle (14 px, apex up) in cell (0, 1): its box covers grid cell (0, 2) of an 8x8
    # grid (pixels 0-5 x 12-17), but the triangle's pixels there start only at row 6.
    s = make_scene([make_object("triangle", "green", "large", 0, 1, offset=(0, 0))])
    cells = token_regions(s, 8)[3]
    expected = {(0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 2), (2, 3), (2, 4)}
    assert cells == frozenset(r * 8 + c for r, c in expected)
    y0, x0, y1, x1 = s.objects[0].bbox
    assert (y0, x0) == (0, 16) and y0 // 6 == 0 and x0 // 6 == 2  # the box does reach cell (0, 2)


def test_token_region_mask_matches_brute_force(many):
    for grid in (3, 6, 8):
        p = 48 // grid
        for s in many[:60]:
            m = token_region_mask(s, grid)
            for t, k in enumerate(s.token_object):
                if k is None:
                    assert not m[t].any()
                    continue
                ys, xs = np.nonzero(s.object_mask(k))
                assert set(np.flatnonzero(m[t])) == {(y // p) * grid + x // p for y, x in zip(ys, xs, strict=True)}


def test_token_region_batch_is_aligned_with_tgt_out(many):
    batch = many[:30]
    regions = token_region_batch(batch, 6)
    tgt_in, tgt_out = encode_captions(batch)
    assert regions.shape == (30, tgt_out.shape[1], 36) and regions.dtype == torch.bool
    for i, s in enumerate(batch):
        n = len(s.tokens)
        assert torch.equal(regions[i, :n], torch.from_numpy(token_region_mask(s, 6)))
        assert not regions[i, n:].any()  # <eos> and padding
        assert int(tgt_out[i, n]) == EOS


# ---------------------------------------------------------------------------------------------
# vocabulary and caption tensors
# ---------------------------------------------------------------------------------------------


def test_caption_vocab():
    v = caption_vocab()
    assert isinstance(v, Vocab) and tuple(v.itos[:4]) == SPECIALS
    assert v.itos[4:] == list(CAPTION_WORDS) and len(v) == 4 + len(set(CAPTION_WORDS))


def test_encode_captions_like_target_sentences(many):
    v = caption_vocab()
    batch = many[:40]
    tgt_in, tgt_out = encode_captions(batch, v)
    assert tgt_in.dtype == torch.int64 and tgt_in.shape == tgt_out.shape
    assert tgt_in.shape[1] == max(len(s.tokens) for s in batch) + 1
    assert v.unk_count == 0 and not (tgt_out == UNK).any()
    ref = encode_pairs([Pair(src=("x",), tgt=s.tokens) for s in batch], v, v)
    for i, (_, t_in, t_out) in enumerate(ref):
        n = len(t_in)
        assert torch.equal(tgt_in[i, :n], t_in) and torch.equal(tgt_out[i, :n], t_out)
        assert (tgt_in[i, n:] == PAD).all() and (tgt_out[i, n:] == PAD).all()
        assert int(tgt_in[i, 0]) == BOS and v.decode(tgt_out[i]) == list(batch[i].tokens)


# ---------------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------------


def test_splits_are_disjoint(small_splits):
    keys = {name: {s.key for s in getattr(small_splits, name)} for name in ("train", "valid", "test")}
    assert not keys["train"] & keys["valid"]
    assert not keys["train"] & keys["test"]
    assert not keys["valid"] & keys["test"]
    assert len(keys["valid"]) == len(small_splits.valid) and len(keys["test"]) == len(small_splits.test)


def test_test_split_is_stratified_in_bucket_order(small_splits):
    assert [s.bucket for s in small_splits.test] == [b for b in ("1", "2", "3") for _ in range(40)]
    assert scenes.scene_bucket_names() == ("1", "2", "3")
    assert make_scene_test_split(seed=5, per_bucket=40) == small_splits.test


def test_train_and_valid_cover_the_buckets_evenly(small_splits):
    for part, lo, hi in ((small_splits.train, 330, 470), (small_splits.valid, 30, 70)):
        counts = Counter(s.bucket for s in part)
        assert set(counts) == {"1", "2", "3"}
        assert all(lo <= c <= hi for c in counts.values()), counts


def test_splits_are_deterministic(small_splits):
    again = make_scene_splits(n_train=1200, n_valid=150, test_per_bucket=40, seed=5)
    assert again == small_splits
    other = make_scene_splits(n_train=50, n_valid=20, test_per_bucket=10, seed=6)
    assert other.test != small_splits.test[:10]


def test_test_split_excludes_given_scenes(small_splits):
    test = make_scene_test_split(seed=9, per_bucket=20, exclude=small_splits.train)
    assert not {s.key for s in test} & {s.key for s in small_splits.train}


def test_too_many_distinct_scenes_is_an_error():
    one = SceneConfig(n_objects=(1,))  # 4 shapes x 5 colours x 2 sizes x 9 cells = 360 contents
    assert len(make_scene_test_split(seed=0, per_bucket=360, config=one)) == 360
    with pytest.raises(ValueError, match=r"asked for 361 distinct scenes with 1 object\(s\) but only 360 exist"):
        make_scene_test_split(seed=0, per_bucket=361, config=one)
    with pytest.raises(
        ValueError,
        match=r"n_valid: asked for .* distinct scenes with 1 object\(s\) beyond the 300 the other splits hold",
    ):
        make_scene_splits(n_train=10, n_valid=100, test_per_bucket=300, config=one)
    with pytest.raises(ValueError, match=r"could only draw .* train scenes with 1 object"):
        make_scene_splits(n_train=10, n_valid=60, test_per_bucket=300, config=one)


# ---------------------------------------------------------------------------------------------
# classification tasks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", scenes.CLASSIFICATION_TASKS)
def test_classification_labels_and_masks(task):
    data = classification_set(200, task=task, seed=1)
    n = len(data.scenes)
    where = Counter()  # the labelled object's place in reading order must vary, or position gives it away
    assert data.images.shape == (n, 3, 48, 48) and data.masks.shape == (n, 48, 48) and data.labels.shape == (n,)
    assert torch.equal(data.images, images_tensor(data.scenes))
    assert data.task == task and len(Counter(data.labels.tolist())) == len(data.label_names)
    for s, label, mask in zip(data.scenes, data.labels.tolist(), data.masks.numpy(), strict=True):
        name = data.label_names[label]
        if task == "count":
            assert name == str(s.n_objects)
            assert np.array_equal(mask, object_masks(s).any(0))
            continue
        if task == "circle_colour":
            hits = [k for k, o in enumerate(s.objects) if o.shape == "circle"]
            assert len(hits) == 1 and s.objects[hits[0]].colour == name
        else:
            hits = [k for k, o in enumerate(s.objects) if o.colour == "red"]
            assert len(hits) == 1 and s.objects[hits[0]].shape == name
        assert np.array_equal(mask, s.object_mask(hits[0]))
        if s.n_objects == 3:
            where[hits[0]] += 1
    assert task == "count" or (len(where) == 3 and min(where.values()) > 10), where
    assert data.label_names == {"count": ("1", "2", "3"), "circle_colour": COLOURS, "red_shape": SHAPES}[task]


def test_classification_is_deterministic_and_respects_exclude():
    a = classification_set(50, task="red_shape", seed=2)
    b = classification_set(50, task="red_shape", seed=2)
    assert a.scenes == b.scenes and torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    c = classification_set(300, task="red_shape", seed=3, exclude=a.scenes)
    assert not {s.key for s in c.scenes} & {s.key for s in a.scenes}
    assert len(classification_set(0, task="count", seed=0).scenes) == 0


# ---------------------------------------------------------------------------------------------
# frozen records and bad arguments
# ---------------------------------------------------------------------------------------------


def test_public_names_exist_and_are_documented():
    for name in scenes.__all__:
        obj = getattr(scenes, name)
        if callable(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name


def test_scenes_are_frozen():
    s = hand_scene()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.tokens = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.objects[0].row = 2


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: generate_scenes(-1, seed=0), ValueError, r"n must be >= 0, got -1"),
        (lambda: generate_scenes(2.0, seed=0), TypeError, r"n must be an int"),
        (lambda: classification_set(-3, task="count", seed=0), ValueError, r"n must be >= 0, got -3"),
        (lambda: make_scene_splits(n_train=-1), ValueError, r"n_train must be >= 0"),
        (lambda: make_scene_splits(n_valid=-2), ValueError, r"n_valid must be >= 0"),
        (lambda: make_scene_test_split(seed=0, per_bucket=-1), ValueError, r"per_bucket must be >= 0"),
        (lambda: classification_set(3, task="colour", seed=0), ValueError, r"task must be one of 'count', "),
        (lambda: token_regions(hand_scene(), 5), ValueError, r"image_size \(48\) must be divisible by grid \(5\)"),
        (lambda: token_region_mask(hand_scene(), 0), ValueError, r"grid must be >= 1, got 0"),
        (lambda: SceneConfig(n_objects=(1, 10)), ValueError, r"asks for 10 objects but a 3x3 layout .* only 9 cells"),
        (lambda: SceneConfig(image_size=50), ValueError, r"image_size \(50\) must be a multiple of cell_size \(16\)"),
        (lambda: SceneConfig(cell_size=8, image_size=48), ValueError, r"cell_size must be >= 12, got 8"),
        (lambda: SceneConfig(n_objects=()), ValueError, r"n_objects must not be empty"),
        (lambda: SceneConfig(n_objects=(1, 1)), ValueError, r"n_objects must not repeat"),
        (lambda: SceneConfig(n_objects=(0,)), ValueError, r"n_objects must be >= 1, got 0"),
        (lambda: SceneConfig(noise=0.7), ValueError, r"noise must be <= 0.5"),
        (lambda: SceneConfig(noise=-0.1), ValueError, r"noise must be >= 0"),
        (lambda: SceneConfig(jitter=1), TypeError, r"jitter must be a bool"),
        (lambda: generate_scenes(1, seed=0, config={"image_size": 48}), TypeError, r"config must be a SceneConfig"),
        (lambda: make_object("star", "red", "small", 0, 0), ValueError, r"shape must be one of 'circle'"),
        (lambda: make_object("circle", "pink", "small", 0, 0), ValueError, r"colour must be one of 'red'"),
        (lambda: make_object("circle", "red", "huge", 0, 0), ValueError, r"size must be one of 'small', 'large'"),
        (lambda: make_object("circle", "red", "small", 3, 0), ValueError, r"row must be < 3 \(a 3x3 layout\), got 3"),
        (lambda: make_object("circle", "red", "large", 0, 0, offset=(0, 3)), ValueError, r"offset dx must be <= 2"),
        (lambda: make_scene([]), ValueError, r"at least one object"),
        (
            lambda: make_scene(
                [make_object("circle", "red", "small", 1, 1), make_object("cross", "red", "small", 1, 1)]
            ),
            ValueError,
            r"share layout cell \(1, 1\) and would overlap",
        ),
        (
            lambda: make_scene([make_object("circle", "red", "small", r, c) for r in range(3) for c in range(3)] * 2),
            ValueError,
            r"a scene of 18 objects does not fit in the layout's 9 cells",
        ),
        (
            lambda: make_scene([make_object("circle", "red", "small", 0, 0)], config=SceneConfig(cell_size=12)),
            ValueError,
            r"was not built for this config",
        ),
        (lambda: make_scene(["circle"]), TypeError, r"objects must be SceneObject"),
        (lambda: hand_scene().object_mask(2), ValueError, r"i must be < 2"),
        (lambda: images_tensor([hand_scene(), hand_scene(SceneConfig(image_size=64))]), ValueError, r"one image size"),
        (lambda: images_tensor([np.zeros((3, 48, 48))]), TypeError, r"scenes must hold Scene objects"),
    ],
)
def test_bad_arguments_give_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
