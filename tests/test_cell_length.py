"""Every code cell of every lesson fits on a screen: at most 25 lines.

What a lesson shows as an idea (the attention math, the training call, the check) stays in its cell;
what only formats a table, builds a verdict string or draws a plot lives in ``attnlab.viz`` or
``attnlab.course``. A cell's length is the number of lines of its joined source, trailing newlines
stripped (a cell of one line without a newline is one line long).
"""

from __future__ import annotations

import json
from pathlib import Path

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_LINES = 25
# Long cells that another change edits right now, left alone until it lands; each is then shortened and its
# entry removed (test_pending_cells_are_still_long fails once a pending cell is short, so none is forgotten).
PENDING: dict[tuple[str, str], str] = {}


def cell_lines(source) -> int:
    """Lines of a cell's source (a list of strings or one string), trailing newlines stripped."""
    text = ("".join(source) if isinstance(source, list) else source).rstrip("\n")
    return len(text.split("\n")) if text else 0


def long_cells(path: Path, limit: int = MAX_LINES, skip=frozenset()) -> list[str]:
    """``'<notebook> cell <index>: <n> lines'`` for each code cell of ``path`` longer than ``limit`` lines.

    ``skip`` holds ``(notebook name, cell id)`` pairs left out.
    """
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        f"{path.name} cell {i}: {n} lines"
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (n := cell_lines(c["source"])) > limit and (path.name, c.get("id")) not in skip
    ]


def test_cell_lines_counts_the_joined_source():
    assert cell_lines([]) == 0 and cell_lines("") == 0 and cell_lines("x = 1") == 1
    assert cell_lines(["a\n", "b\n", "\n"]) == 2 and cell_lines("a\n\nb") == 3


def test_long_cells_names_notebook_cell_and_length(tmp_path):
    cells = [{"cell_type": "code", "source": "\n".join(["x = 1"] * 26)},
             {"cell_type": "markdown", "source": "\n".join(["text"] * 40)},
             {"cell_type": "code", "source": ["y = 2\n"] * 25}]
    path = tmp_path / "99_toy.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert long_cells(path) == ["99_toy.ipynb cell 0: 26 lines"]
    cells[0]["id"] = "abc"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert long_cells(path, skip={("99_toy.ipynb", "abc")}) == [] and long_cells(path, limit=30) == []


def test_no_lesson_code_cell_is_longer_than_25_lines():
    assert NOTEBOOKS, "no lessons found in notebooks/"
    found = [line for path in NOTEBOOKS for line in long_cells(path, skip=frozenset(PENDING))]
    assert not found, f"{len(found)} code cells longer than {MAX_LINES} lines:\n" + "\n".join(found)


def test_pending_cells_are_still_long():
    for (name, cell_id), why in PENDING.items():
        nb = json.loads((NOTEBOOKS[0].parent / name).read_text(encoding="utf-8"))
        found = [c for c in nb["cells"] if c.get("id") == cell_id]
        assert found, f"{name}: no cell {cell_id} (pending: {why}); remove it from PENDING"
        n = cell_lines(found[0]["source"])
        assert n > MAX_LINES, f"{name} cell {cell_id} is {n} lines now: remove it from PENDING"
