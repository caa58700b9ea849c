"""Where the course's files live (``data/``) and how a JSON object file is read with a clear error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def data_dir() -> Path:
    """The ``data/`` folder: ``$ATTNLAB_DATA_DIR`` when set, else the repository's."""
    env = os.environ.get("ATTNLAB_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "data"


def read_json_object(path: Path, error: type[Exception] = ValueError) -> dict:
    """Read a JSON file that must hold an object; a damaged one raises ``error`` naming the file.

    Args:
        path: the file.
        error: the exception class to raise (results, checkpoints and the real corpus pass their own).
    """
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise error(f"{path} must hold a JSON object, found {type(obj).__name__}")
    return obj
