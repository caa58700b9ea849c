"""Static checks of the committed lessons: executed in order, no errors, course kernel, small."""

import json
import re
from pathlib import Path

import pytest

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))


def test_lessons_exist_and_are_numbered_from_00():
    assert NOTEBOOKS, "no lessons found"
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers[0] == 0 and len(set(numbers)) == len(numbers)
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name) for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_executed_top_to_bottom_without_errors(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "attnlab", "lessons run on the course kernel"
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), "run it top to bottom after a kernel restart"
    for c in code:
        for out in c.get("outputs", []):
            assert out.get("output_type") != "error", f"stored error: {out.get('ename')}"
            assert out.get("name") != "stderr" or "Traceback" not in "".join(out.get("text", ""))
    assert path.stat().st_size < 3_000_000, "keep figures small"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignored_cells_still_assert_something(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        src = "".join(c["source"])
        if c["cell_type"] == "code" and "NBVAL_IGNORE_OUTPUT" in src:
            assert re.search(r"\bassert\b|assert_close|check_", src), f"ignored cell asserts nothing:\n{src[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_a_title_and_has_exercises(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown" and "".join(first["source"]).lstrip().startswith("# ")
    if not path.name.startswith("00_"):
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert len(re.findall(r"(?im)^#+\s*exercise", text)) >= 2, "each lesson has at least two exercises"
