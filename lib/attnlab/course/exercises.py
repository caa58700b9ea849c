"""Exercises: the lesson notebooks keep their solutions; the student notebooks get stubs.

Markup (the nbgrader convention, without nbgrader):

* the code cell a learner writes is tagged ``solution``; the part to write sits between a line
  ``### BEGIN SOLUTION`` and a line ``### END SOLUTION`` (any indentation, several blocks allowed);
  everything else in the cell (the signature, the call that uses it) is kept;
* the cell or cells that check the answer follow it and are tagged ``check``;
* the exercise starts with a markdown cell whose heading reads ``## Exercise: <title>``.

:func:`student_notebook` replaces each solution block by ``raise NotImplementedError("your code")``
at the block's indentation and clears the outputs of the solution and check cells;
``python -m attnlab.course.exercises`` (``make exercises``) writes ``exercises/NN_*.ipynb`` from
``notebooks/NN_*.ipynb``. ``tests/test_exercises.py`` runs every lesson and proves that each check
fails after the stub and passes after the solution.

:func:`assert_no_loops` and :func:`assert_does_not_call` let a check enforce what an exercise
forbids ("without a Python loop", "without ``attnlab.core.masks``").
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = [
    "SOLUTION_TAG",
    "CHECK_TAG",
    "BEGIN",
    "END",
    "STUB",
    "Exercise",
    "ExerciseMarkupError",
    "stub_source",
    "find_exercises",
    "student_notebook",
    "write_exercises",
    "assert_no_loops",
    "assert_does_not_call",
]

SOLUTION_TAG, CHECK_TAG = "solution", "check"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("your code")'
_HEADING = re.compile(r"^##\s+Exercise:\s*(?P<title>.+?)\s*$", re.MULTILINE)


class ExerciseMarkupError(ValueError):
    """A notebook's exercise markup is broken (unbalanced markers, a solution without a check...)."""


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook: its title and the indices of its cells."""

    title: str
    heading: int  # the markdown cell with "## Exercise: ..."
    solution: int  # the code cell tagged "solution"
    checks: tuple[int, ...]  # the code cells tagged "check" that follow it


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def stub_source(source: str, *, where: str = "cell") -> str:
    """``source`` with every ``BEGIN``/``END`` solution block replaced by a stub.

    Args:
        source: the code of a solution cell.
        where: names the cell in error messages.

    Returns:
        The code with each block replaced by ``# your code here`` and :data:`STUB` at the
        indentation of its ``### BEGIN SOLUTION`` line.

    Raises:
        ExerciseMarkupError: no block, a block not closed, nested, or an ``END`` without ``BEGIN``.
    """
    out, inside, blocks = [], None, 0
    for n, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside is not None:
                raise ExerciseMarkupError(f"{where}, line {n}: {BEGIN!r} inside the block opened on line {inside[0]}")
            indent = line[: len(line) - len(line.lstrip())]
            inside = (n, indent)
        elif marker == END:
            if inside is None:
                raise ExerciseMarkupError(f"{where}, line {n}: {END!r} without {BEGIN!r}")
            indent = inside[1]
            out += [f"{indent}# your code here", f"{indent}{STUB}"]
            inside, blocks = None, blocks + 1
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise ExerciseMarkupError(f"{where}: {BEGIN!r} on line {inside[0]} is never closed by {END!r}")
    if blocks == 0:
        raise ExerciseMarkupError(f"{where} is tagged {SOLUTION_TAG!r} but holds no {BEGIN!r} ... {END!r} block")
    return "\n".join(out)


def find_exercises(nb, *, name: str = "notebook") -> list[Exercise]:
    """The exercises of a notebook, after checking their markup.

    Args:
        nb: an ``nbformat`` notebook.
        name: the notebook's name, for error messages.

    Returns:
        One :class:`Exercise` per ``## Exercise:`` heading, in order.

    Raises:
        ExerciseMarkupError: a heading without a solution cell, a solution cell outside an
            exercise or with no check cell after it, two solution cells in one exercise, a check
            cell that follows no solution, or broken markers (see :func:`stub_source`).
    """
    found, current = [], None  # current: [title, heading, solution, checks]

    def close():
        if current is None:
            return
        title, heading, solution, checks = current
        if solution is None:
            raise ExerciseMarkupError(
                f"{name}: exercise {title!r} (cell {heading}) has no cell tagged {SOLUTION_TAG!r}"
            )
        if not checks:
            raise ExerciseMarkupError(f"{name}: the solution of {title!r} (cell {solution}) has no {CHECK_TAG!r} cell")
        found.append(Exercise(title, heading, solution, tuple(checks)))

    for i, cell in enumerate(nb.cells):
        tags = _tags(cell)
        if cell.cell_type == "markdown":
            m = _HEADING.search(cell.source)
            if m:
                close()
                current = [m["title"], i, None, []]
            continue
        if cell.cell_type != "code":
            continue
        if SOLUTION_TAG in tags:
            if current is None:
                raise ExerciseMarkupError(f"{name}: cell {i} is tagged {SOLUTION_TAG!r} outside any exercise")
            if current[2] is not None:
                raise ExerciseMarkupError(f"{name}: exercise {current[0]!r} has two solution cells ({current[2]}, {i})")
            stub_source(cell.source, where=f"{name}, cell {i}")
            current[2] = i
        elif CHECK_TAG in tags:
            if current is None or current[2] is None:
                raise ExerciseMarkupError(f"{name}: cell {i} is tagged {CHECK_TAG!r} but follows no solution cell")
            current[3].append(i)
    close()
    return found


def student_notebook(nb, *, lesson: str):
    """The student version of a lesson: stubs instead of solutions, exercise outputs cleared.

    Args:
        nb: the lesson notebook (left unchanged).
        lesson: the lesson's file name, which the note at the top points to for the solutions.

    Returns:
        A new notebook: a note cell first, then the lesson's cells with each solution cell stubbed
        (:func:`stub_source`) and the outputs of solution and check cells cleared.
    """
    exercises = find_exercises(nb, name=lesson)
    out = copy.deepcopy(nb)
    for ex in exercises:
        cell = out.cells[ex.solution]
        cell.source = stub_source(cell.source, where=f"{lesson}, cell {ex.solution}")
        for i in (ex.solution, *ex.checks):
            out.cells[i].outputs, out.cells[i].execution_count = [], None
    titles = "\n".join(f"* {ex.title}" for ex in exercises)
    note = nbformat.v4.new_markdown_cell(
        f"> **Exercise version.** This is lesson `{lesson}` with the solution of each exercise replaced "
        f'by `{STUB}`. Write your answer there, run the cell, then run the check below it.\n'
        f"> Stuck? The lesson itself, `notebooks/{lesson}`, holds a working solution of every exercise.\n"
        f">\n> Exercises in this lesson:\n{textwrap.indent(titles, '> ')}"
    )
    note.metadata["tags"] = ["exercise-note"]
    out.cells.insert(0, note)
    return out


def write_exercises(notebooks: Path, out_dir: Path) -> list[tuple[Path, int]]:
    """Write the student version of every lesson ``NN_*.ipynb`` of ``notebooks`` into ``out_dir``.

    Lessons without exercises are copied unchanged, so links between lessons keep working.

    Returns:
        ``[(written path, number of exercises), ...]``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(Path(notebooks).glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        n = len(find_exercises(nb, name=path.name))
        student = student_notebook(nb, lesson=path.name) if n else nb
        target = out_dir / path.name
        nbformat.write(student, target)
        written.append((target, n))
    return written


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _function_tree(fn: Callable) -> ast.AST:
    if not inspect.isfunction(fn):
        raise TypeError(f"fn must be a Python function, got {type(fn).__name__}")
    return ast.parse(textwrap.dedent(inspect.getsource(fn)))


def assert_does_not_call(fn: Callable, names) -> None:
    """Fail when ``fn`` calls a function or method whose name is in ``names``.

    ``torch.softmax(x)``, ``x.softmax()`` and ``softmax(x)`` all count as calls of ``softmax``.

    Args:
        fn: a Python function whose source is readable.
        names: the forbidden names (a string or a collection of strings).

    Raises:
        AssertionError: naming the call and its line in the function.
        TypeError: ``fn`` is not a Python function.
    """
    names = {names} if isinstance(names, str) else set(names)
    for node in ast.walk(_function_tree(fn)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called in names:
                raise AssertionError(
                    f"{fn.__name__} calls {called}() on line {node.lineno} of the function; "
                    f"the exercise asks for it without {', '.join(sorted(names))}"
                )


def assert_no_loops(fn: Callable) -> None:
    """Fail when ``fn``'s source holds a Python loop (``for``, ``while`` or a comprehension).

    Args:
        fn: a function defined in a notebook or a module (its source must be readable).

    Raises:
        AssertionError: naming the loop and its line in the function.
        TypeError: ``fn`` is not a Python function.
    """
    for node in ast.walk(_function_tree(fn)):
        if isinstance(node, _LOOPS):
            kind = type(node).__name__.replace("Comp", " comprehension").replace("GeneratorExp", "generator")
            raise AssertionError(
                f"{fn.__name__} uses a Python loop ({kind.lower()} on line {node.lineno} of the function): "
                "write it with tensor operations"
            )


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m attnlab.course.exercises [--notebooks notebooks] [--out exercises]``."""
    ap = argparse.ArgumentParser(prog="python -m attnlab.course.exercises", description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    ap.add_argument("--out", type=Path, default=Path("exercises"))
    args = ap.parse_args(argv)
    total = 0
    for path, n in write_exercises(args.notebooks, args.out):
        print(f"{path}: {n} exercise(s)")
        total += n
    print(f"{total} exercises; solutions stay in {args.notebooks}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
