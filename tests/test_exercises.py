"""Exercises: the markup, the student notebooks, and every check proven to fail on its stub.

The last test runs each lesson in a real kernel (with ``ATTNLAB_USE_SHIPPED=1``, so the training
lessons load their shipped models instead of training for minutes). At each exercise it runs the
stub first and requires every check cell to fail, then the solution and requires every check to pass.
Cells tagged ``slow`` (a live training run that no exercise uses; nbval runs them) are skipped: a
skipped cell can only leave names undefined, which makes a solution fail, never a stub pass.
"""

import copy
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnlab.course.exercises import (
    BEGIN,
    END,
    STUB,
    ExerciseMarkupError,
    assert_does_not_call,
    assert_no_loops,
    find_exercises,
    stub_source,
    student_notebook,
    write_exercises,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _code(source, *tags):
    cell = new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    cell.outputs = [nbformat.v4.new_output("stream", text="old output\n")]
    return cell


def _toy():
    return new_notebook(
        cells=[
            new_markdown_cell("# toy\n\n## Exercise: double it"),
            _code(f"def double(x):\n    {BEGIN}\n    y = 2 * x\n    return y\n    {END}\n\nanswer = double(3)", "solution"),
            _code("assert answer == 6", "check"),
            new_markdown_cell("## Exercise: a constant"),
            _code(f"{BEGIN}\nk = 7\n{END}", "solution"),
            _code("assert k == 7", "check"),
            _code("print(k)", "check"),
        ]
    )


def test_stub_source_keeps_the_signature_and_the_code_around_each_block():
    src = f"def f(x):\n    {BEGIN}\n    return x + 1\n    {END}\n\nval = f(1)"
    assert stub_source(src) == f"def f(x):\n    # your code here\n    {STUB}\n\nval = f(1)"
    two = f"{BEGIN}\na = 1\n{END}\nb = 2\n{BEGIN}\nc = 3\n{END}"
    assert stub_source(two) == f"# your code here\n{STUB}\nb = 2\n# your code here\n{STUB}"


@pytest.mark.parametrize(
    "src, message",
    [
        ("x = 1", "holds no '### BEGIN SOLUTION'"),
        (f"{BEGIN}\nx = 1", "line 1 is never closed"),
        (f"x = 1\n{END}", "line 2: '### END SOLUTION' without"),
        (f"{BEGIN}\n{BEGIN}\n{END}", "line 2: '### BEGIN SOLUTION' inside the block opened on line 1"),
    ],
)
def test_stub_source_refuses_broken_markers(src, message):
    with pytest.raises(ExerciseMarkupError, match=message):
        stub_source(src, where="toy, cell 3")


def test_find_exercises_and_its_markup_errors():
    nb = _toy()
    found = find_exercises(nb, name="toy")
    assert [(e.title, e.heading, e.solution, e.checks) for e in found] == [
        ("double it", 0, 1, (2,)),
        ("a constant", 3, 4, (5, 6)),
    ]
    no_check = copy.deepcopy(nb)
    no_check.cells[2].metadata["tags"] = []
    with pytest.raises(ExerciseMarkupError, match="the solution of 'double it' \\(cell 1\\) has no 'check' cell"):
        find_exercises(no_check, name="toy")
    no_solution = copy.deepcopy(nb)
    no_solution.cells[4].metadata["tags"] = []
    with pytest.raises(ExerciseMarkupError, match="cell 5 is tagged 'check' but follows no solution cell"):
        find_exercises(no_solution, name="toy")
    no_solution.cells[5].metadata["tags"] = no_solution.cells[6].metadata["tags"] = []
    with pytest.raises(ExerciseMarkupError, match="exercise 'a constant' \\(cell 3\\) has no cell tagged 'solution'"):
        find_exercises(no_solution, name="toy")
    outside = copy.deepcopy(nb)
    outside.cells.insert(0, _code(f"{BEGIN}\n{END}", "solution"))
    with pytest.raises(ExerciseMarkupError, match="cell 0 is tagged 'solution' outside any exercise"):
        find_exercises(outside, name="toy")


def test_student_notebook_stubs_solutions_clears_exercise_outputs_and_leaves_the_lesson_alone(tmp_path):
    nb = _toy()
    before = copy.deepcopy(nb)
    student = student_notebook(nb, lesson="99_toy.ipynb")
    assert nb == before
    assert "exercise-note" in student.cells[0].metadata["tags"] and "notebooks/99_toy.ipynb" in student.cells[0].source
    body = student.cells[1:]
    assert "y = 2 * x" not in body[1].source and STUB in body[1].source and "answer = double(3)" in body[1].source
    assert all(body[i].outputs == [] for i in (1, 2, 4, 5, 6))
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(nb, src / "99_toy.ipynb")
    nbformat.write(new_notebook(cells=[new_markdown_cell("# no exercises")]), src / "98_plain.ipynb")
    written = write_exercises(src, tmp_path / "exercises")
    assert [(p.name, n) for p, n in written] == [("98_plain.ipynb", 0), ("99_toy.ipynb", 2)]
    assert nbformat.read(tmp_path / "exercises" / "98_plain.ipynb", 4).cells[0].source == "# no exercises"


def test_assert_no_loops_and_assert_does_not_call():
    def vectorised(x):
        return x.sum() * 2

    def looped(x):
        total = 0
        for v in x:
            total += v
        return total

    def comprehension(x):
        return sum([v for v in x])

    def uses_softmax(x):
        import torch

        return torch.softmax(x, -1)

    assert_no_loops(vectorised)
    with pytest.raises(AssertionError, match=r"looped uses a Python loop \(for on line 3 of the function\)"):
        assert_no_loops(looped)
    with pytest.raises(AssertionError, match="comprehension uses a Python loop"):
        assert_no_loops(comprehension)
    assert_does_not_call(vectorised, {"softmax"})
    with pytest.raises(AssertionError, match=r"uses_softmax calls softmax\(\) on line 4"):
        assert_does_not_call(uses_softmax, "softmax")
    with pytest.raises(TypeError, match="fn must be a Python function, got int"):
        assert_no_loops(3)


def test_every_lesson_exercise_is_marked_and_no_solution_reaches_a_student_notebook():
    counts = {}
    for name in LESSONS:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        exercises = find_exercises(nb, name=name)
        counts[name[:2]] = len(exercises)
        # every heading that announces an exercise uses the one form find_exercises reads
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for line in cell.source.splitlines():
                    if "xercise" in line and line.startswith("#"):
                        assert line.startswith("## Exercise: ") or line.startswith("## How exercises"), (name, line)
        student = student_notebook(nb, lesson=name) if exercises else nb
        for ex in exercises:
            solution = nb.cells[ex.solution].source
            hidden = solution.split(BEGIN)[1:]
            stubbed = student.cells[ex.solution + 1].source
            assert BEGIN not in stubbed and END not in stubbed and STUB in stubbed
            for block in hidden:
                for line in block.split(END)[0].splitlines():
                    if line.strip() and not line.strip().startswith("#"):
                        assert line not in stubbed.splitlines(), (name, ex.title, line)
    assert counts == {"00": 2, "01": 2, "02": 2, "03": 3, "04": 2, "05": 3, "06": 3, "07": 3, "08": 3, "09": 2}, counts


def _run_lesson_exercises(name):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    exercises = {ex.solution: ex for ex in find_exercises(nb, name=name)}
    checks = {i for ex in exercises.values() for i in ex.checks}
    client = NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(NOTEBOOKS)}})
    # nbclient plays the frontend of ipywidgets' Output widget by default (it answers the kernel's
    # comm messages); once, in a clean clone, that left a widget cell waiting for ever. The checks
    # need no widget frontend: without one, widget cells simply run.
    client.widget_registry = {}
    env = {**os.environ, "ATTNLAB_USE_SHIPPED": "1", "MPLBACKEND": "Agg"}
    report, problems = [], []

    def run(cell, index):
        try:
            client.execute_cell(cell, index)
            return None
        except CellExecutionError as exc:
            return exc.ename or "error"

    with client.setup_kernel(env=env):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or i in checks or "slow" in cell.metadata.get("tags", []):
                continue
            if i not in exercises:
                err = run(cell, i)
                assert err is None, f"{name}, cell {i} failed ({err}) before any exercise was stubbed"
                continue
            ex = exercises[i]
            stub = copy.deepcopy(cell)
            stub.source = stub_source(cell.source)
            stub_error = run(stub, i)
            stub_checks = [run(copy.deepcopy(nb.cells[c]), c) for c in ex.checks]
            if stub_error not in (None, "NotImplementedError"):  # a cell that only defines a function runs
                problems.append(f"{ex.title}: the stub raised {stub_error!r}, not NotImplementedError")
            if any(e is None for e in stub_checks):
                problems.append(f"{ex.title}: a check passed after the stub ({stub_checks})")
            solution_error = run(cell, i)
            solution_checks = [run(nb.cells[c], c) for c in ex.checks]
            if solution_error is not None or any(e is not None for e in solution_checks):
                problems.append(f"{ex.title}: the solution failed ({solution_error}, checks {solution_checks})")
            report.append((ex.title, stub_checks, solution_checks))
    return report, problems


@pytest.mark.parametrize("name", [n for n in LESSONS if n[:2] in {"00", "01", "02", "03", "04", "05", "06", "07", "08", "09"}])
def test_every_check_fails_on_its_stub_and_passes_on_its_solution(name):
    report, problems = _run_lesson_exercises(name)
    assert not problems, "\n".join(problems)
    assert report and all(all(e is not None for e in stub) for _, stub, _ in report)
    for title, stub, solution in report:
        print(f"{name}: {title}: stub -> check fails with {stub}; solution -> {solution}")
