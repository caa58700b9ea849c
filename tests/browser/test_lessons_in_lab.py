"""The lessons in JupyterLab, in headless Chromium: every widget renders and moves, and lesson 00 runs
end to end as a learner runs it (open, Run menu -> Run All Cells, wait for idle).

The lessons run with ``ATTNLAB_USE_SHIPPED=1`` (lesson 00 explains it): ``experiments.run`` loads the
shipped model instead of training it (lesson 03 skips its three 200-step live runs, of which no model
is shipped); each lesson that calls it must show that it loaded, and so must each call of ``toys.run``
(:mod:`attnlab.course.toys`: the tiny models of lessons 05 and 06, shipped by
``scripts/lesson05_06_toys.py``) and of lesson 13's ``speech_experiments.run`` and
``hierarchical_experiments.run`` (the speller and the document models). Nothing trains in the browser.
"""

from __future__ import annotations

import json

import pytest

from .conftest import SKIP_REASON

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from .conftest import HEAD_START  # noqa: E402
from .lab import REPO, notebook_state, widget_locator, widget_outputs  # noqa: E402
from .widgets import ARTIFACTS, EXPECTED, drive  # noqa: E402

# pytest-playwright 0.10's base_url fixture trips a pytest 9 deprecation warning; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods")

# Lessons with widgets; those with a head start last, so that their Run All overlaps the others.
WIDGET_LESSONS = sorted((name for name, specs in EXPECTED.items() if specs), key=lambda n: (n in HEAD_START, n))


def _shipped_runs(lesson: str) -> int:
    """How many of the lesson's code cells call ``experiments.run`` or ``toys.run`` (cells tagged ``slow`` left out:
    lesson 03's one trains only without ``ATTNLAB_USE_SHIPPED``); under the variable each one loads a shipped
    model and says so."""
    cells = json.loads((REPO / "notebooks" / lesson).read_text())["cells"]
    return sum(
        c["cell_type"] == "code" and "slow" not in c["metadata"].get("tags", [])
        and any(call in "".join(c["source"]) for call in ("experiments.run(", "toys.run("))
        for c in cells
    )


def _check_run(page, recorder, lesson: str) -> None:
    if recorder.console_errors:  # shown when the test fails; only the widget manager's fail it
        print(f"{lesson}: browser console errors:", *recorder.console_errors, sep="\n  ")
    state = notebook_state(page)
    assert not state["errors"], f"{lesson}: error output after Run All:\n" + "\n---\n".join(state["errors"])
    assert state["unrun"] == 0, f"{lesson}: {state['unrun']} of {state['cells']} code cells did not run"
    assert not state["wrapped"], f"{lesson}: outputs too wide for a 1280 px window:\n" + "\n".join(state["wrapped"])
    # The kernel got ATTNLAB_USE_SHIPPED=1 from the server: every experiments.run loaded, none trained.
    assert state["shipped"] >= _shipped_runs(lesson), (
        f"{lesson}: {_shipped_runs(lesson)} cells call experiments.run, {state['shipped']} outputs say that a "
        "shipped model was loaded (ATTNLAB_USE_SHIPPED=1 did not reach the kernel?)"
    )


@pytest.mark.parametrize("lesson", ["00_welcome.ipynb"])
def test_lesson_00_end_to_end_as_a_learner(lesson_page, lesson):
    """Open lesson 00, Run All, wait for idle: every code cell ran and nothing shows an error."""
    page, recorder = lesson_page
    _check_run(page, recorder, lesson)
    found = widget_outputs(page)
    assert len(found) == len(EXPECTED[lesson]), f"{lesson} displays {len(found)} widgets; EXPECTED lists none"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "00_after_run_all.png"))
    assert not recorder.page_errors, recorder.page_errors


@pytest.mark.parametrize("lesson", WIDGET_LESSONS)
def test_every_widget_renders_and_moves(lesson_page, lessons, latencies, lesson):
    """Before the lesson ran, every widget showed its saved picture (the committed notebooks store
    their widget state, and ``make lab`` trusts them: an untrusted notebook shows raw ``VBox(…`` text);
    after Run All every widget rendered, and each of its controls changes what it shows."""
    assert not lessons.saved.get(lesson), f"{lesson}, opened and not run: {lessons.saved[lesson]}"
    page, recorder = lesson_page
    _check_run(page, recorder, lesson)
    found = widget_outputs(page)
    specs = EXPECTED[lesson]
    assert len(found) == len(specs), (
        f"{lesson} displays {len(found)} widgets, EXPECTED in tests/browser/widgets.py lists {len(specs)} "
        f"({[s.name for s in specs]}): {[f['text'][:80] for f in found]}"
    )
    not_rendered = [f for f in found if not f["rendered"]]
    assert not not_rendered, f"{lesson}: widgets that did not render: {not_rendered}"
    problems = []
    for spec, output in zip(specs, found, strict=True):
        run = drive(page, widget_locator(page, output["index"]), spec, lesson)
        latencies.extend(run.updates)
        problems += run.problems
    assert not problems, f"{lesson}:\n" + "\n".join(problems)
    errors = recorder.widget_manager_errors()
    assert not errors, f"{lesson}: console errors from the widget manager:\n" + "\n".join(errors)


HARNESS_PAGE = """
<div class="jp-Notebook">
 <div class="jp-Cell-outputArea"><div class="jp-OutputArea-child"><div class="jp-OutputArea-output">
  <div class="jupyter-widgets widget-vbox"><div class="widget-html-content">a</div><img id="pic" src="data:,1"></div>
 </div></div></div>
 <div class="jp-Cell-outputArea"><div class="jp-OutputArea-child"><div class="jp-OutputArea-output">
  Error displaying widget: model not found</div></div></div>
 <div class="jp-Cell-outputArea"><div class="jp-OutputArea-child"><div class="jp-OutputArea-output">
  <pre>VBox(children=(HBox(children=(Dropdown(</pre></div></div></div>
</div>
<div id="jp-main-statusbar">Attention Lab | Idle</div>
"""


def test_the_harness_sees_broken_widgets_and_double_draws(page):
    """The checks above can fail: a widget that did not render (the widget manager's error, or the
    raw VBox(...) text) is reported as such, and a picture given two PNGs for one change is counted."""
    from .lab import PAGE_JS, timed_change

    page.set_content(HARNESS_PAGE)
    page.evaluate(PAGE_JS)
    found = widget_outputs(page)
    assert [(f["rendered"], f["error"], f["raw"]) for f in found] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]
    widget = widget_locator(page, 0)

    def draw_twice():
        page.evaluate("() => { const p = document.getElementById('pic'); p.src = 'data:,2'; setTimeout(() => p.src = 'data:,3', 30); }")

    update, _ = timed_change(page, widget, "fake", "draw twice", draw_twice, timeout_ms=3_000)
    assert update.changed and update.draws == 2
    update, _ = timed_change(page, widget, "fake", "nothing", lambda: None, timeout_ms=500)
    assert not update.changed
    assert not update.lost_picture

    def blank_for_a_while():  # a picture taken away and given back 100 ms later: painted without it
        page.evaluate("() => { const p = document.getElementById('pic'); const box = p.parentNode; p.remove();"
                      " setTimeout(() => { p.src = 'data:,4'; box.appendChild(p); }, 100); }")

    update, _ = timed_change(page, widget, "fake", "blank", blank_for_a_while, timeout_ms=3_000)
    assert update.changed and update.lost_picture

    def swap_in_one_task():  # a new picture in place of the old one within one task: never painted without
        page.evaluate("() => { const p = document.getElementById('pic'); const box = p.parentNode; p.remove();"
                      " const q = document.createElement('img'); q.id = 'pic'; q.src = 'data:,5'; box.appendChild(q); }")

    update, _ = timed_change(page, widget, "fake", "swap", swap_in_one_task, timeout_ms=3_000)
    assert update.changed and not update.lost_picture


def test_the_harness_sees_saved_widgets_that_do_not_show(page):
    """Before Run All: a widget left as raw text, or one whose picture does not decode, is a problem;
    rendered widgets with decoded pictures are not."""
    from .lab import saved_widget_problems

    page.set_content(HARNESS_PAGE)  # one rendered widget (an undecodable picture), an error, raw text
    assert saved_widget_problems(page, 3, timeout_ms=500)
    assert saved_widget_problems(page, 1, timeout_ms=500)  # "data:,1" is no picture
    png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    page.evaluate(f"() => document.getElementById('pic').src = '{png}'")
    assert saved_widget_problems(page, 1, timeout_ms=2_000) == []



SHIPPED_PAGE = """
<div class="jp-Notebook">
 <div class="jp-Cell jp-CodeCell"><div class="jp-InputPrompt">[1]:</div><div class="jp-Cell-outputArea">
  <div class="jp-OutputArea-child"><div class="jp-OutputArea-output"><pre>ATTNLAB_USE_SHIPPED=1: loaded the shipped
 'bahdanau' (9000 steps), not trained</pre></div></div></div></div>
 <div class="jp-Cell jp-CodeCell"><div class="jp-InputPrompt">[2]:</div><div class="jp-Cell-outputArea">
  <div class="jp-OutputArea-child"><div class="jp-OutputArea-output"><pre>training bahdanau (cpu profile) for 9000 steps
 ATTNLAB_USE_SHIPPED=1 would have loaded it</pre></div></div></div></div>
</div>
"""


def test_the_harness_counts_the_runs_that_loaded_a_shipped_model(page):
    """The ATTNLAB_USE_SHIPPED check can fail: only an output that says a shipped model was loaded counts,
    and the lessons' experiments.run cells are counted without lesson 03's slow one (its exercise's toys.run
    cell counts: 1, not 2)."""
    page.set_content(SHIPPED_PAGE)
    state = notebook_state(page)
    assert (state["cells"], state["unrun"], state["shipped"]) == (2, 0, 1)
    assert [_shipped_runs(n) for n in ("02_bahdanau_attention.ipynb", "03_luong_attention.ipynb")] == [1, 1]
