"""Load a Python file that is not a module of a package (``scripts/*.py``, ``notebooks/conftest.py``) in a test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path, *, register: bool = False) -> ModuleType:
    """The module called ``name``, executed from ``path``.

    ``register`` also puts it in ``sys.modules`` under ``name`` before it runs: a module whose
    dataclasses look their own module up there (``scripts/build_site.py``) needs it.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
