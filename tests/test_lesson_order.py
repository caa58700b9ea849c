"""The order in which `make notebooks` hands the lessons to its two workers (notebooks/conftest.py)."""

import re
from pathlib import Path
from types import SimpleNamespace

from .modules import load_file

ROOT = Path(__file__).resolve().parents[1]
NB = load_file("notebooks_conftest", ROOT / "notebooks" / "conftest.py")
LESSONS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _items(lessons, cells=3):
    return [SimpleNamespace(fspath=ROOT / "notebooks" / name, cell=i) for name in lessons for i in range(cells)]


def _makespan(order, seconds, workers=2):
    """List scheduling as xdist's loadscope does it: each lesson goes to the worker that is free first."""
    loads = [0.0] * workers
    for name in order:
        loads[loads.index(min(loads))] += seconds.get(name, 0)
    return max(loads)


def test_every_timed_lesson_exists():
    assert set(NB.EXPECTED_SECONDS) <= set(LESSONS), set(NB.EXPECTED_SECONDS) - set(LESSONS)


def test_the_longest_lessons_come_first_and_each_lesson_stays_whole_and_in_order():
    other = SimpleNamespace(fspath=ROOT / "tests" / "test_x.py", cell=0)
    ordered = NB.lesson_order([other, *_items(LESSONS)])
    names = [Path(str(i.fspath)).name for i in ordered]
    assert names[-1] == "test_x.py"
    runs = [n for k, n in enumerate(names) if k == 0 or names[k - 1] != n]
    assert len(runs) == len(set(runs)) == len(LESSONS) + 1  # each lesson in one piece
    assert runs[0] == max(NB.EXPECTED_SECONDS, key=NB.EXPECTED_SECONDS.get)
    costs = [NB.EXPECTED_SECONDS.get(n, 0) for n in runs[:-1]]
    assert costs == sorted(costs, reverse=True)
    for name in LESSONS:
        assert [i.cell for i in ordered if Path(str(i.fspath)).name == name] == [0, 1, 2]
    untimed = [n for n in runs[:-1] if n not in NB.EXPECTED_SECONDS]
    assert untimed == sorted(untimed)  # lessons of equal cost keep their file order


def test_longest_first_finishes_sooner_than_file_order_on_two_workers():
    seconds = NB.EXPECTED_SECONDS
    ordered = [Path(str(i.fspath)).name for i in NB.lesson_order(_items(LESSONS, cells=1))]
    bound = max(sum(seconds.values()) / 2, max(seconds.values()))
    assert _makespan(ordered, seconds) <= 1.05 * bound
    assert _makespan(ordered, seconds) < _makespan(LESSONS, seconds)


def test_make_keeps_the_collection_order():
    # without --no-loadscope-reorder, xdist sorts the lessons by their number of cells instead
    line = next(x for x in (ROOT / "Makefile").read_text().splitlines() if x.startswith("NOTEBOOKS_CMD :="))
    assert re.search(r"--dist loadscope\b", line) and "--no-loadscope-reorder" in line
