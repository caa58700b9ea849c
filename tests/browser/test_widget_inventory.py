"""Without a browser: every lesson's executed outputs display exactly the widgets that the browser
tests drive (tests/browser/widgets.py EXPECTED), so a widget added to any lesson, including one the
browser tests do not open, fails here until it gets its line."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from .lab import REPO, WIDGET_MIME
from .widgets import EXPECTED

LESSONS = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def displayed_widgets(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(
        WIDGET_MIME in out.get("data", {})
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


def test_every_lesson_is_listed():
    assert sorted(EXPECTED) == LESSONS, "add the lesson to EXPECTED in tests/browser/widgets.py"


@pytest.mark.parametrize("lesson", LESSONS)
def test_expected_lists_every_widget_a_lesson_displays(lesson):
    n = displayed_widgets(REPO / "notebooks" / lesson)
    names = [s.name for s in EXPECTED.get(lesson, [])]
    assert n == len(names), (
        f"{lesson}'s saved outputs display {n} widgets; tests/browser/widgets.py EXPECTED lists {len(names)} {names}"
    )
