"""Checkpoints: weights in ``safetensors`` (no pickle) plus a small JSON of config and metrics.

``data/checkpoints/<name>.safetensors`` holds the weights; ``<name>.json`` beside it holds the
model kind, its frozen config, both vocabularies, the corpus version and the metrics. Loading
rebuilds the model from the JSON and checks every weight's name and shape against it, so a
file from another configuration or a damaged file gives a clear error, never a half-loaded model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .data import CORPUS_VERSION, Vocab

__all__ = ["CheckpointError", "register_model", "save_checkpoint", "load_checkpoint", "checkpoint_dir", "data_dir"]

_REGISTRY: dict[str, tuple[type, type]] = {}


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or does not match its configuration."""


def data_dir() -> Path:
    """The repository's ``data/`` folder (override with ``ATTNLAB_DATA_DIR``)."""
    import os

    env = os.environ.get("ATTNLAB_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


def checkpoint_dir() -> Path:
    """``data/checkpoints``."""
    return data_dir() / "checkpoints"


def register_model(kind: str, model_cls: type, config_cls: type) -> None:
    """Make a model class loadable by name (each model module registers itself)."""
    _REGISTRY[kind] = (model_cls, config_cls)


def _resolve(name_or_path: str | Path) -> tuple[Path, Path]:
    p = Path(name_or_path)
    if p.suffix in (".safetensors", ".json"):
        base = p.with_suffix("")
    elif p.parent == Path(".") and not p.exists():
        base = checkpoint_dir() / p.name
    else:
        base = p
    return base.with_suffix(".safetensors"), base.with_suffix(".json")


def _kind_of(model: torch.nn.Module) -> str:
    for kind, (cls, _) in _REGISTRY.items():
        if type(model) is cls:
            return kind
    raise CheckpointError(f"{type(model).__name__} is not registered; call register_model first")


def save_checkpoint(
    model: torch.nn.Module,
    name: str | Path,
    *,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    metrics: dict | None = None,
    extra: dict | None = None,
) -> Path:
    """Write ``<name>.safetensors`` and ``<name>.json``.

    Args:
        model: a registered model with a dataclass ``config`` attribute.
        name: bare name (saved under ``data/checkpoints``) or a path.
        src_vocab, tgt_vocab: vocabularies, stored so the checkpoint is self-contained.
        metrics: results to store beside the config.
        extra: any other JSON-serialisable information (training stats, profile).

    Returns:
        Path of the ``.safetensors`` file.
    """
    weights_path, meta_path = _resolve(name)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(weights_path), metadata={"kind": _kind_of(model), "corpus_version": CORPUS_VERSION})
    meta = {
        "kind": _kind_of(model),
        "config": dataclasses.asdict(model.config),
        "corpus_version": CORPUS_VERSION,
        "src_vocab": src_vocab.to_dict(),
        "tgt_vocab": tgt_vocab.to_dict(),
        "shapes": {k: list(v.shape) for k, v in state.items()},
        "metrics": metrics or {},
        **(extra or {}),
    }
    meta_path.write_text(json.dumps(meta, indent=1, sort_keys=False) + "\n")
    return weights_path


def load_checkpoint(name_or_path: str | Path, *, device: str | torch.device = "cpu"):
    """Rebuild a model from its checkpoint.

    Args:
        name_or_path: bare name under ``data/checkpoints`` or a path (with or without suffix).
        device: where to put the model.

    Returns:
        ``(model, meta)`` where ``meta`` is the JSON dict (with ``src_vocab``/``tgt_vocab``
        replaced by :class:`~attnlab.data.Vocab` objects). The model is in eval mode.

    Raises:
        CheckpointError: missing files, corrupt bytes, unknown kind, or weights that do not
            match the configuration (names or shapes).
    """
    from . import rnn  # noqa: F401  (registers models)

    try:
        from . import transformer  # noqa: F401
    except ImportError:  # the Transformer lesson may not be installed yet
        pass
    weights_path, meta_path = _resolve(name_or_path)
    for p in (weights_path, meta_path):
        if not p.exists():
            raise CheckpointError(f"checkpoint file not found: {p}")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{meta_path} is not valid JSON: {exc}") from exc
    kind = meta.get("kind")
    if kind not in _REGISTRY:
        raise CheckpointError(f"{meta_path}: unknown model kind {kind!r}; known: {sorted(_REGISTRY)}")
    model_cls, config_cls = _REGISTRY[kind]
    try:
        config = config_cls(**meta["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{meta_path}: config does not build a {config_cls.__name__}: {exc}") from exc
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{weights_path} is corrupt or not a safetensors file: {exc}") from exc
    model = model_cls(config)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
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
    model.load_state_dict(state)
    model.to(device).eval()
    meta["src_vocab"] = Vocab.from_dict(meta["src_vocab"])
    meta["tgt_vocab"] = Vocab.from_dict(meta["tgt_vocab"])
    return model, meta
