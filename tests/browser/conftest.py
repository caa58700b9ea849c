"""Fixtures of the browser tests: one JupyterLab server per session (as ``make lab`` starts it) and
the system Chromium driven by pytest-playwright.

Without Playwright or Chromium the browser tests are skipped with one line that says why and how to
install Chromium (pyproject's ``-ra`` prints it in the summary), never silently.
"""

from __future__ import annotations

import json
import os

import pytest

from .lab import LessonRuns, launch_options, skip_reason, start_lab

SKIP_REASON = skip_reason()
LATENCIES: list = []  # every timed update of the session, for the summary below

# Lessons whose Run All is long (lesson 03 scores every shipped Luong model): started when the
# session's first lesson test starts, and driven last, so that their training overlaps the other
# lessons. Each other lesson starts while the one before is being driven. ATTNLAB_BROWSER_SERIAL=1
# runs every lesson alone instead (slower, but no latency is measured while another kernel works).
HEAD_START = ("03_luong_attention.ipynb",)
SERIAL = os.environ.get("ATTNLAB_BROWSER_SERIAL", "") == "1"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch options plus the system Chromium (Playwright's own download is not used)."""
    return {**browser_type_launch_args, **launch_options()}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A JupyterLab server on a scratch copy of the lessons; shut down (kernels included) after the session."""
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def latencies():
    return LATENCIES


def _lesson(item) -> str | None:
    """The lesson a collected test opens in the browser (through ``lesson_page``), else None."""
    if "lesson_page" not in getattr(item, "fixturenames", ()):
        return None
    return item.callspec.params.get("lesson")


@pytest.fixture(scope="session")
def lessons(request, browser, browser_context_args, lab):
    """The session's :class:`~.lab.LessonRuns`; the HEAD_START lessons that are selected start now."""
    from .widgets import EXPECTED

    runs = LessonRuns(browser, browser_context_args, lab, widgets={name: len(specs) for name, specs in EXPECTED.items()})
    selected = {_lesson(item) for item in request.session.items} - {None}
    for lesson in HEAD_START:
        if lesson in selected and not SERIAL:
            runs.start(lesson)
    yield runs
    runs.close_all()


@pytest.fixture
def lesson_page(request, lessons):
    """``(page, recorder)`` of the test's lesson after Run All; the next selected lesson starts meanwhile."""
    lesson = request.node.callspec.params["lesson"]
    page, recorder, seconds = lessons.finished(lesson)
    print(f"{lesson}: open + Run All {seconds:.0f} s")
    if not SERIAL:
        following = [_lesson(item) for item in request.session.items[request.session.items.index(request.node) + 1 :]]
        following = [lesson for lesson in following if lesson]
        if following:
            lessons.start(following[0])
    yield page, recorder
    lessons.close(lesson)


def pytest_terminal_summary(terminalreporter):
    # (A skip is reported by pytest itself: one "SKIPPED ... BROWSER TESTS SKIPPED: why" line, -ra.)
    if not LATENCIES:
        return
    from .widgets import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "latencies.json").write_text(json.dumps([u.__dict__ for u in LATENCIES], indent=1))
    terminalreporter.section("widget update latency in Chromium (ms, last user event -> DOM change)")
    by_widget: dict[str, list[float]] = {}
    for u in LATENCIES:
        if u.latency_ms is not None:
            by_widget.setdefault(u.widget, []).append(u.latency_ms)
    for name, values in by_widget.items():
        values = sorted(values)
        median = values[len(values) // 2]
        terminalreporter.write_line(
            f"{name:36s} {len(values):3d} updates  median {median:6.0f}  max {values[-1]:6.0f}"
        )
