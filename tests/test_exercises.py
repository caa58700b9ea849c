"""Exercises: the markup, the student notebooks, and every check proven to fail on its stub.

The last test runs each lesson's exercises in a real kernel. At each exercise it runs the stub first
and requires every check cell to fail, then the solution and requires every check to pass. nbval
runs every cell of every lesson; this test runs only the cells the exercises need (:func:`cells_to_run`:
a cell runs when it may bind or change a name that a later cell that runs reads), with
``ATTNLAB_USE_SHIPPED=1`` so that a model an exercise reads is loaded, not trained. Cells tagged
``slow`` (a live training run that no exercise uses) never run here. A skipped cell can only leave
a name undefined or unchanged, which makes a solution fail (loudly), never a stub's check pass.
"""

import ast
import builtins
import copy
import os
import re
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
    assert counts == {"00": 2, "01": 3, "02": 4, "03": 5, "04": 2, "05": 4, "06": 4, "07": 3, "08": 3, "09": 3, "10": 5, "11": 3, "12": 4, "13": 4}, counts


# ---------------------------------------------------------------------------------------------
# Which cells the exercises need: a liveness analysis of the names the cells bind, change and read
# ---------------------------------------------------------------------------------------------

_MAGIC = re.compile(r"^\s*[%!]")  # IPython magics and shell lines: not Python, left out of the analysis
_BUILTINS = frozenset(dir(builtins)) | {"display", "get_ipython"}
# Calls that only read their arguments: passing a name to them does not change it.
_READ_ONLY_CALLS = frozenset(
    "print len display isinstance str repr int float bool range enumerate zip sorted list tuple dict set sum min max "
    "abs round type any all hasattr getattr format".split()
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _root(node):
    """The name an expression starts from: ``model`` for ``model.encoder.layers[0].weight`` or ``model.f()``."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _names(target):
    """The names an assignment target binds (``a, (b, *c)``); none for ``x[i]`` or ``x.attr``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_names(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return set()


def _stored(node):
    """The names ``node``'s own scope binds (not those bound inside a nested function or comprehension)."""
    out = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store | ast.Del):
            out.add(child.id)
        elif isinstance(child, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in child.names}
        elif isinstance(child, ast.ExceptHandler) and child.name:
            out.add(child.name)
        elif isinstance(child, ast.arg):
            out.add(child.arg)
        elif isinstance(child, ast.Global | ast.Nonlocal):
            out |= set(child.names)
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(child.name)
        elif not isinstance(child, _SCOPES):
            out |= _stored(child)
    return out


def _free(node):
    """The names ``node`` reads from the cell's scope (a nested scope's own names are not read from it)."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    inner = set().union(*(_free(child) for child in ast.iter_child_nodes(node)))
    if isinstance(node, _SCOPES):
        declared = {n for c in ast.walk(node) if isinstance(c, ast.Global) for n in c.names}
        return (inner - _stored(node)) | (inner & declared)
    return inner


def cell_names(source):
    """What one code cell binds, may change and reads, or None when it cannot be analysed.

    Returns:
        ``(rebinds, binds, changes, imports, reads)``: the names every run of the cell binds afresh
        (an unconditional top-level assignment, import, def or class); every name it may bind;
        the names it may change in place (an item or attribute assigned, a method called on it,
        passed to a call other than a read-only builtin); the names its imports bind; the names it
        reads before binding them itself. None for code that does not parse or a ``*`` import.
    """
    code = "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    changes, imports, reads = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            imports |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            changes |= {_root(t) for t in targets if not isinstance(t, ast.Name)}
        elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _READ_ONLY_CALLS):
            if isinstance(node.func, ast.Attribute):
                changes.add(_root(node.func))
            changes |= {_root(a) for a in [*node.args, *(k.value for k in node.keywords)]}
    changes.discard(None)

    def run(statements, bound):
        """Adds to ``reads`` what the statements read before binding it; returns what is bound after them."""
        nonlocal reads
        for stmt in statements:
            if isinstance(stmt, ast.For | ast.AsyncFor):
                reads |= _free(stmt.iter) - bound
                bound = run(stmt.body + stmt.orelse, bound | _names(stmt.target))
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    reads |= _free(item.context_expr) - bound
                    bound = bound | (_names(item.optional_vars) if item.optional_vars is not None else set())
                bound = run(stmt.body, bound)
            elif isinstance(stmt, ast.If | ast.While):
                reads |= _free(stmt.test) - bound
                bound = run(stmt.body + stmt.orelse, bound)
            elif isinstance(stmt, ast.Try):
                bound = run(stmt.body, bound)
                for handler in stmt.handlers:
                    reads |= (_free(handler.type) if handler.type else set()) - bound
                    bound = run(handler.body, bound | ({handler.name} if handler.name else set()))
                bound = run(stmt.orelse + stmt.finalbody, bound)
            else:
                reads |= _free(stmt) - bound
                bound = bound | _stored(ast.Module(body=[stmt], type_ignores=[]))
        return bound

    binds = run(tree.body, set())
    rebinds = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            rebinds |= set().union(*(_names(t) for t in stmt.targets))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            rebinds |= _names(stmt.target)
        elif isinstance(stmt, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            rebinds |= _stored(ast.Module(body=[stmt], type_ignores=[]))
    return rebinds, binds, changes, imports, reads


def cells_to_run(sources, must_run):
    """The code cells to run, in order, so that every cell of ``must_run`` finds what it reads.

    Args:
        sources: ``{cell index: code}`` of the code cells that may run.
        must_run: the indices that run in any case (the exercises' solution and check cells).

    Returns:
        The sorted indices: every cell of ``must_run``, every cell that cannot be analysed, and every
        cell that may bind or change a name that a later cell that runs reads before it binds it.
        Changes to what an import binds (``torch.manual_seed``, ``plt.show``) are not followed.
    """
    names = {i: cell_names(src) for i, src in sources.items()}
    modules = set().union(*(n[3] for n in names.values() if n)) | _BUILTINS
    live, keep = set(), set()
    for i in sorted(names, reverse=True):
        if names[i] is None:  # unknown: run it, and everything that binds a module before it
            keep.add(i)
            live |= modules - _BUILTINS
            continue
        rebinds, binds, changes, _, reads = names[i]
        if i in must_run or (binds | (changes - modules)) & live:
            keep.add(i)
            live = (live - rebinds) | (reads - _BUILTINS)
    return sorted(keep)


def test_cells_to_run_follows_what_each_cell_binds_changes_and_reads():
    sources = {
        0: "import torch",
        1: "data = make()\nmodel = train(data, steps=500)",  # binds model, which the solution reads
        2: "print(model)\nlosses = [s.loss for s in model.history]",  # reads model, changes nothing needed
        3: "model.eval()",  # a method call may change model
        4: "scale = 2\nx = torch.zeros(3)",  # scale is bound again below; x is only a parameter name below
        5: "scale = 3\ncfg = {}",
        6: "cfg['k'] = 7",  # an item assigned changes cfg
        7: "log = []\nlog.append(1)",  # log is read by no cell that runs
        8: "cfg2 = dict(cfg)",
        10: "def f(x):\n    return model(x) * scale + cfg2['k']",
        11: "for i in range(3):\n    assert f(i) == i",  # i is bound by the loop, not read from a cell
        12: "%%capture\nthis is not python =",  # cannot be analysed: runs, and so does every import before it
    }
    assert cells_to_run(sources, {10, 11}) == [0, 1, 3, 5, 6, 8, 10, 11, 12]
    rebinds, binds, changes, imports, reads = cell_names("import numpy as np\nfor t in ts:\n    total = f(t, w=np)")
    assert (rebinds, imports, reads) == ({"np"}, {"np"}, {"ts", "f"}) and binds == {"np", "t", "total"}
    assert changes == {"t", "np"}
    assert cell_names("from torch import *") is None


def _toy_for_kernel():
    nb = _toy()
    nb.cells.insert(1, _code("raise RuntimeError('a training run no exercise needs')"))
    nb.cells.insert(2, _code("import torch\n\nw = torch.zeros(1, requires_grad=True)\nopt = torch.optim.SGD([w], lr=1.0)\n"
                             "w.sum().backward()\nopt.step()\nbase = 3 + int(w.item()) + 1"))
    nb.cells[3].source = nb.cells[3].source.replace("answer = double(3)", "answer = double(base)")
    nb.cells.append(new_markdown_cell("## Exercise: a name the analysis cannot see"))
    nb.cells.append(_code("exec('hidden = 1')"))
    nb.cells.append(_code(f"{BEGIN}\nseen = hidden + 1\n{END}", "solution"))
    nb.cells.append(_code("assert seen == 2", "check"))
    return nb


def test_run_exercises_runs_only_needed_cells_and_reports_a_missed_cell_and_training(_shared_kernel):
    report, problems, skipped = _run_exercises(_toy_for_kernel(), "toy")
    assert skipped == [1, 10]  # the training run, and the exec that no name analysis sees
    assert [title for title, *_ in report] == ["double it", "a constant", "a name the analysis cannot see"]
    assert all(all(e is not None for e in stub) for _, stub, _ in report)
    assert problems == [
        "a name the analysis cannot see: the solution failed (NameError, checks ['NameError'])",
        "1 optimiser steps ran: a cell this test runs trains a model (nbval trains it)",
    ]


# Run in the kernel before the lesson: counts the optimiser steps of torch's optimisers and fastai's (the
# lessons train through both), so that a cell this test runs cannot train a model unnoticed.
_COUNT_STEPS = """
def _attnlab_count_steps():
    import fastai.optimizer
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    steps = [0]

    def count(*_):
        steps[0] += 1

    register_optimizer_step_pre_hook(count)
    step = fastai.optimizer.Optimizer.step

    def counted(self, *args, **kwargs):
        count()
        return step(self, *args, **kwargs)

    fastai.optimizer.Optimizer.step = counted
    return steps


_attnlab_optimizer_steps = _attnlab_count_steps()
del _attnlab_count_steps
"""


# One kernel per test process serves every lesson in turn (each lesson starts with ``%reset -f``: a namespace
# as empty as a new kernel's, while torch, fastai and the course's modules stay imported). A kernel's start
# and those imports took about as long as a lesson's exercises; :func:`_shared_kernel` pays them once.
_KERNEL: dict = {}
_RESET = "%reset -f\nimport matplotlib.pyplot\nmatplotlib.pyplot.close('all')"


@pytest.fixture(scope="session")  # session: under xdist a worker may run other modules between two lessons
def _shared_kernel():
    yield _KERNEL
    _stop_kernel()


def _stop_kernel():
    from jupyter_core.utils import run_sync

    km, kc = _KERNEL.pop("km", None), _KERNEL.pop("kc", None)
    if kc is not None:
        kc.stop_channels()
    if km is not None:
        run_sync(km.shutdown_kernel)(now=True)


def _run_exercises(nb, name):
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    exercises = {ex.solution: ex for ex in find_exercises(nb, name=name)}
    checks = {i for ex in exercises.values() for i in ex.checks}
    sources = {
        i: cell.source
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and "slow" not in cell.metadata.get("tags", [])
    }
    selected = set(cells_to_run(sources, set(exercises) | checks))
    if "km" in _KERNEL and not run_sync(_KERNEL["km"].is_alive)():
        _stop_kernel()  # a lesson before this one killed it: start a new one
    client = NotebookClient(
        nb, kernel_name="python3", timeout=600, km=_KERNEL.get("km"), resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.kc = _KERNEL.get("kc")
    # nbclient plays the frontend of ipywidgets' Output widget by default (it answers the kernel's
    # comm messages); once, in a clean clone, that left a widget cell waiting for ever. The checks
    # need no widget frontend: without one, widget cells simply run.
    client.widget_registry = {}
    env = {**os.environ, "ATTNLAB_USE_SHIPPED": "1", "MPLBACKEND": "Agg"}
    report, problems, ran = [], [], []

    def run(cell, index):
        try:
            client.execute_cell(cell, index)
            return None
        except CellExecutionError as exc:
            return exc.ename or "error"

    with client.setup_kernel(env=env, cleanup_kc=False):
        _KERNEL.update(km=client.km, kc=client.kc)
        assert run(new_code_cell(_RESET), 0) is None
        assert run(new_code_cell(_COUNT_STEPS), 0) is None
        for i, cell in enumerate(nb.cells):
            if i not in selected or i in checks:
                continue
            ran.append(i)
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
        count = new_code_cell("print(_attnlab_optimizer_steps[0])")
        assert run(count, 0) is None
        steps = int("".join(o.get("text", "") for o in count.outputs if o.get("name") == "stdout"))
    if steps:
        problems.append(f"{steps} optimiser steps ran: a cell this test runs trains a model (nbval trains it)")
    skipped = sorted(set(sources) - set(ran) - checks)
    return report, problems, skipped


@pytest.mark.parametrize("name", LESSONS)
def test_every_check_fails_on_its_stub_and_passes_on_its_solution(name, _shared_kernel):
    report, problems, skipped = _run_exercises(nbformat.read(NOTEBOOKS / name, as_version=4), name)
    assert not problems, "\n".join(problems)
    assert report and all(all(e is not None for e in stub) for _, stub, _ in report)
    print(f"{name}: {len(skipped)} cells no exercise needs were not run (nbval runs them): {skipped}")
    for title, stub, solution in report:
        print(f"{name}: {title}: stub -> check fails with {stub}; solution -> {solution}")
