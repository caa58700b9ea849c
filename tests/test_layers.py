"""The library's layers: each package imports only from the packages below it, and nothing forms a cycle.

``attnlab`` is six packages, bottom to top (the package docstring draws them)::

    core -> data -> models -> training -> viz -> course

A module may import from its own package and from any package below it, never from one above it.
Imports are read from the source (``ast``), at every depth: an import inside a function counts like
one at the top of the file (the library has none that dodges a cycle), and so does one under
``if TYPE_CHECKING:``. Inside a package, the module-level imports must not form a cycle either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "attnlab"
LAYERS = ("core", "data", "models", "training", "viz", "course")
RANK = {name: i for i, name in enumerate(LAYERS)}


def module_name(path: Path, root: Path = LIB) -> str:
    """``lib/attnlab/data/corpus/splits.py`` -> ``attnlab.data.corpus.splits`` (packages drop ``__init__``)."""
    parts = ["attnlab", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = LIB) -> list[tuple[int, str, bool]]:
    """``(line, imported attnlab module or name's module, at module level)`` for every attnlab import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []

    def visit(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target == "attnlab" or target.startswith("attnlab."):
                    for alias in child.names:  # from attnlab.data import vocab: the module attnlab.data.vocab
                        sub = root.joinpath(*f"{target}.{alias.name}".split(".")[1:])
                        is_module = sub.with_suffix(".py").exists() or (sub / "__init__.py").exists()
                        found.append((child.lineno, f"{target}.{alias.name}" if is_module else target, top))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("attnlab"):
                        found.append((child.lineno, alias.name, top))
            visit(child, inner)

    visit(tree, True)
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def violations(root: Path = LIB) -> list[str]:
    """Every import of a higher layer, and every import of ``attnlab`` itself or of a name outside the layers."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        mine = layer_of(me)
        if mine is None:
            if me == "attnlab":
                continue
            bad.append(f"{path.relative_to(root)}: module outside the layers {LAYERS}")
            continue
        for line, target, _ in imports_of(path, root):
            theirs = layer_of(target)
            if theirs is None:
                bad.append(f"{path.relative_to(root)}:{line}: imports {target}, which is in no layer")
            elif RANK[theirs] > RANK[mine]:
                bad.append(f"{path.relative_to(root)}:{line}: {mine} imports {target} ({theirs} is above {mine})")
    return bad


def cycles(root: Path = LIB) -> list[list[str]]:
    """Cycles among module-level imports (a package's ``__init__`` counts as a module)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        graph[me] = {t for _, t, top in imports_of(path, root) if top and t != me}
    names = set(graph)
    for k, targets in graph.items():
        # "from attnlab.data.corpus import grammar" depends on the module grammar; a module's own
        # packages are imported before it by Python itself, so an edge to one of them is no cycle
        graph[k] = {t for t in targets if t in names and not k.startswith(t + ".")}
    found, state = [], {}

    def dfs(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                dfs(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node, [])
    return found


def test_every_module_sits_in_a_layer_and_imports_only_from_below():
    assert violations() == []


def test_module_level_imports_form_no_cycle():
    assert cycles() == []


def test_no_function_local_attnlab_import():
    """A function-local import of the library hides a dependency (and once hid eight-module cycles)."""
    local = [
        f"{path.relative_to(LIB)}:{line}: {target}"
        for path in sorted(LIB.rglob("*.py"))
        for line, target, top in imports_of(path)
        if not top
    ]
    assert local == []


def _copy_lib(tmp_path: Path) -> Path:
    root = tmp_path / "attnlab"
    for path in LIB.rglob("*.py"):
        dest = root / path.relative_to(LIB)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "where, planted",
    [
        ("core/masks.py", "from attnlab.training import experiments\n"),
        ("core/masks.py", "\ndef _f():\n    from attnlab.training.train import fit_budget\n"),
        ("data/vocab.py", "from attnlab.models import rnn\n"),
        ("models/rnn.py", "from attnlab.viz import plots\n"),
        ("training/report.py", "from ..course import exercises\n"),
    ],
)
def test_an_upward_import_is_caught(tmp_path, where, planted):
    root = _copy_lib(tmp_path)
    path = root / where
    path.write_text(path.read_text(encoding="utf-8") + planted, encoding="utf-8")
    assert any(where in v for v in violations(root))


def test_a_cycle_is_caught(tmp_path):
    root = _copy_lib(tmp_path)
    path = root / "core" / "checks.py"
    path.write_text(path.read_text(encoding="utf-8") + "from attnlab.core import masks\n", encoding="utf-8")
    assert any("attnlab.core.checks" in c and "attnlab.core.masks" in c for c in map(" ".join, cycles(root)))
