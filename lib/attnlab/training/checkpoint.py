"""Checkpoints: weights in ``safetensors`` (no pickle) plus a small JSON of config and metrics.

``<name>.safetensors`` holds the weights; ``<name>.json`` beside it holds:

* ``kind`` -- the model family (:data:`attnlab.training.families.FAMILIES`), ``config`` -- its frozen config;
* ``corpus_version`` -- the corpus the model was trained on;
* ``weights_sha256`` -- the sha256 of the ``.safetensors`` file's bytes, written at save time;
* ``src_vocab`` / ``tgt_vocab`` -- ``{"itos": [...]}``, so the checkpoint is self-contained; only the
  sides the model has (see :func:`vocab_sides`: a captioner has no source vocabulary, an image
  classifier none at all);
* ``shapes`` (for reading), ``metrics``, and whatever the saver added (``experiment``, ``pair``).

Loading checks, in order, and raises :class:`CheckpointError` naming the file at the first failure:
the JSON parses and has every field with the right type; the family is known and the config builds;
the vocabularies it needs are there, and each has the size the config's embeddings expect; the
weights file's digest equals the recorded one (so a flipped byte anywhere in it, a truncated file or
a file swapped for another is caught before any tensor is read); the file parses; every weight's
name, shape and dtype matches the model the config builds; then the weights go in with a strict
``load_state_dict``. A checkpoint that loads is therefore the model that was saved, never a
half-loaded or silently altered one.

A bare name (no folder, no suffix) means a shipped checkpoint in ``data/checkpoints``
(:func:`attnlab.training.results.checkpoint_path`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save_file

from attnlab.data.corpus import CORPUS_VERSION
from attnlab.data.vocab import Vocab
from attnlab.training import families as models
from attnlab.training.results import checkpoint_path, read_json_object

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "stamp_digest", "file_sha256", "vocab_sides"]

DIGEST_KEY = "weights_sha256"
SIDES = ("src", "tgt")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or does not match its configuration."""


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _resolve(name_or_path: str | Path) -> tuple[Path, Path]:
    p = Path(name_or_path)
    if p.suffix in (".safetensors", ".json"):
        base = p.with_suffix("")
    elif p.parent == Path(".") and not p.exists():
        base = checkpoint_path(p.name, shipped=True)
    else:
        base = p
    return base.with_suffix(".safetensors"), base.with_suffix(".json")


def vocab_sides(config) -> tuple[str, ...]:
    """The vocabularies (``"src"``, ``"tgt"``) a model with this config reads or writes.

    A side counts when the config has a ``<side>_vocab_size`` field that is not ``None``: both for the
    text models, ``("tgt",)`` for a captioner or an RNN decoding from given states, none for an
    image classifier.
    """
    return tuple(side for side in SIDES if getattr(config, f"{side}_vocab_size", None) is not None)


def save_checkpoint(
    model: torch.nn.Module,
    name: str | Path,
    *,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    metrics: dict | None = None,
    extra: dict | None = None,
    corpus_version: str = CORPUS_VERSION,
) -> Path:
    """Write ``<name>.safetensors`` and ``<name>.json`` (with the weights' sha256).

    Args:
        model: a model of a family in :data:`attnlab.training.families.FAMILIES`, with a dataclass ``config``.
        name: bare name (saved under ``data/checkpoints``) or a path.
        src_vocab, tgt_vocab: vocabularies, stored so the checkpoint is self-contained; exactly the
            sides of :func:`vocab_sides` must be given, with the sizes of the config.
        metrics: results to store beside the config.
        extra: any other JSON-serialisable information (training stats, profile); it may not
            replace a field this function writes.
        corpus_version: the corpus the model was trained on (default: English->French's).

    Returns:
        Path of the ``.safetensors`` file.

    Raises:
        CheckpointError: the model belongs to no family, or a vocabulary is missing, not wanted or does
            not fit its config.
        ValueError: ``extra`` reuses a reserved field name.
    """
    try:
        kind = models.family_of(model).name
    except TypeError as exc:
        raise CheckpointError(str(exc)) from exc
    vocabs = {"src": src_vocab, "tgt": tgt_vocab}
    sides = vocab_sides(model.config)
    for side, vocab in vocabs.items():
        if (vocab is None) == (side in sides):
            need = f"needs a {side} vocabulary (pass" if side in sides else f"has no {side} vocabulary (do not pass"
            raise CheckpointError(
                f"saving {name}: a {kind} model with this config {need} {side}_vocab=); its vocabularies: {list(sides)}"
            )
    _check_vocab_sizes(model.config, vocabs, where=f"saving {name}")
    weights_path, meta_path = _resolve(name)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(weights_path), metadata={"kind": kind, "corpus_version": corpus_version})
    meta = {
        "kind": kind,
        "config": dataclasses.asdict(model.config),
        "corpus_version": corpus_version,
        DIGEST_KEY: file_sha256(weights_path),
        **{f"{side}_vocab": vocabs[side].to_dict() for side in sides},
        "shapes": {k: list(v.shape) for k, v in state.items()},
        "metrics": metrics or {},
    }
    clash = sorted(meta.keys() & (extra or {}).keys())
    if clash:
        raise ValueError(f"extra must not replace the checkpoint's own fields {clash}")
    meta.update(extra or {})
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return weights_path


# field -> (type, what the message calls it)
_FIELDS = {
    "kind": (str, "a string"),
    "config": (dict, "an object"),
    "corpus_version": (str, "a string"),
    DIGEST_KEY: (str, "a string"),
    "metrics": (dict, "an object"),
}
# checked once the config tells which of them the model has
_VOCAB_FIELDS = {f"{side}_vocab": (dict, "an object") for side in SIDES}


def _check_fields(meta: dict, meta_path: Path, fields: dict) -> None:
    for key, (typ, what) in fields.items():
        if key not in meta:
            hint = " (saved before checkpoints carried a digest: re-save it, or see stamp_digest)"
            raise CheckpointError(f"{meta_path} lacks the field {key!r}" + (hint if key == DIGEST_KEY else ""))
        if not isinstance(meta[key], typ):
            raise CheckpointError(f"{meta_path}: {key!r} must be {what}, found {type(meta[key]).__name__}")


def _read_meta(meta_path: Path, *, need_digest: bool) -> dict:
    meta = read_json_object(meta_path, CheckpointError)
    _check_fields(meta, meta_path, {k: v for k, v in _FIELDS.items() if need_digest or k != DIGEST_KEY})
    if need_digest and not _HEX64.fullmatch(meta[DIGEST_KEY]):
        found = meta[DIGEST_KEY]
        raise CheckpointError(f"{meta_path}: {DIGEST_KEY!r} must be 64 lowercase hex digits, found {found!r}")
    return meta


def _vocab(meta: dict, key: str, meta_path: Path) -> Vocab:
    itos = meta[key].get("itos")
    if not isinstance(itos, list) or not all(isinstance(t, str) for t in itos):
        raise CheckpointError(f"{meta_path}: {key}['itos'] must be a list of strings")
    try:
        return Vocab(itos)
    except ValueError as exc:
        raise CheckpointError(f"{meta_path}: {key} is not a vocabulary: {exc}") from exc


def _check_vocab_sizes(config, vocabs: dict[str, Vocab], *, where: str) -> None:
    for side in vocab_sides(config):
        vocab = vocabs[side]
        expected = getattr(config, f"{side}_vocab_size")
        if len(vocab) != expected:
            raise CheckpointError(
                f"{where}: {side}_vocab has {len(vocab)} tokens but the config's {side}_vocab_size is {expected}"
            )


def _build(meta: dict, meta_path: Path) -> torch.nn.Module:
    try:
        fam = models.get_family(meta["kind"])
    except ValueError as exc:
        raise CheckpointError(f"{meta_path}: {exc}") from exc
    try:
        config = fam.config_cls(**meta["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{meta_path}: config does not build a {fam.config}: {exc}") from exc
    try:
        return fam.model_cls(config)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{meta_path}: config does not build a {fam.model}: {exc}") from exc


def _load_state(model: torch.nn.Module, blob: bytes, weights_path: Path, kind: str) -> None:
    try:
        state = load_safetensors(blob)
    except (SafetensorError, ValueError, OSError) as exc:
        raise CheckpointError(f"{weights_path} is corrupt or not a safetensors file: {exc}") from exc
    expected = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
    got = {k: (tuple(v.shape), v.dtype) for k, v in state.items()}
    missing, unexpected = sorted(expected.keys() - got.keys()), sorted(got.keys() - expected.keys())
    wrong = sorted(k for k in expected.keys() & got.keys() if expected[k] != got[k])
    if missing or unexpected or wrong:
        detail = "; ".join(
            part
            for part in (
                f"missing {missing[:5]}" if missing else "",
                f"unexpected {unexpected[:5]}" if unexpected else "",
                ", ".join(f"{k}: expected {expected[k]}, found {got[k]}" for k in wrong[:5]),
            )
            if part
        )
        raise CheckpointError(f"{weights_path} does not match its config ({kind}): {detail}")
    model.load_state_dict(state, strict=True)


def _open(name_or_path: str | Path, *, verify_digest: bool) -> tuple[torch.nn.Module, dict, Path, Path, str]:
    weights_path, meta_path = _resolve(name_or_path)
    for p in (weights_path, meta_path):
        if not p.exists():
            raise CheckpointError(f"checkpoint file not found: {p}")
    meta = _read_meta(meta_path, need_digest=verify_digest)
    model = _build(meta, meta_path)
    sides = vocab_sides(model.config)
    _check_fields(meta, meta_path, {f"{side}_vocab": _VOCAB_FIELDS[f"{side}_vocab"] for side in sides})
    vocabs = {side: _vocab(meta, f"{side}_vocab", meta_path) for side in sides}
    _check_vocab_sizes(model.config, vocabs, where=str(meta_path))
    blob = weights_path.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if verify_digest and digest != meta[DIGEST_KEY]:
        raise CheckpointError(
            f"{weights_path} is damaged or was replaced: its sha256 is {digest}, "
            f"but {meta_path.name} records {meta[DIGEST_KEY]}"
        )
    _load_state(model, blob, weights_path, meta["kind"])
    meta.update({f"{side}_vocab": vocab for side, vocab in vocabs.items()})
    return model, meta, weights_path, meta_path, digest


def load_checkpoint(name_or_path: str | Path, *, device: str | torch.device = "cpu"):
    """Rebuild a model from its checkpoint, verifying every part of it (see the module docstring).

    Args:
        name_or_path: bare name under ``data/checkpoints`` or a path (with or without suffix).
        device: where to put the model.

    Returns:
        ``(model, meta)`` where ``meta`` is the JSON dict (with ``src_vocab``/``tgt_vocab``, those the
        family has, replaced by :class:`~attnlab.data.vocab.Vocab` objects). The model is in eval mode.

    Raises:
        CheckpointError: missing files; JSON that does not parse or lacks a field or has one of the
            wrong type; unknown family; a config that does not build; vocabularies whose sizes differ
            from the config's; weights whose sha256 differs from the recorded one; a file that is not
            safetensors; weights that do not match the configuration (names, shapes or dtypes).
    """
    model, meta, *_ = _open(name_or_path, verify_digest=True)
    model.to(device).eval()
    return model, meta


def stamp_digest(name_or_path: str | Path) -> str:
    """Record the sha256 of a checkpoint saved before checkpoints carried one; return the digest.

    Every other check of :func:`load_checkpoint` runs first, so only a file that loads is stamped;
    but a digest certifies the bytes as they are now, so stamp only a checkpoint you trust. The
    digest goes in right after ``corpus_version``; every other field is written back unchanged.

    Raises:
        CheckpointError: the checkpoint does not load, or already records a different digest.
    """
    _, _, _, meta_path, digest = _open(name_or_path, verify_digest=False)
    raw = json.loads(meta_path.read_text(encoding="utf-8"))
    if DIGEST_KEY in raw:
        if raw[DIGEST_KEY] != digest:
            raise CheckpointError(f"{meta_path} records {DIGEST_KEY} {raw[DIGEST_KEY]}, but the file's is {digest}")
        return digest
    stamped = {}
    for key, value in raw.items():
        stamped[key] = value
        if key == "corpus_version":
            stamped[DIGEST_KEY] = digest
    stamped.setdefault(DIGEST_KEY, digest)
    meta_path.write_text(json.dumps(stamped, indent=1) + "\n")
    return digest
