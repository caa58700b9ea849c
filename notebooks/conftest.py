"""nbval settings for the lessons: skip outputs that cannot be compared byte for byte; and a summary
of the seconds each lesson took (the course's budget is about a minute per lesson under nbval, four
at most), printed at the end of the run and kept in ``build/lesson_times.json``."""

import json
from collections import defaultdict
from pathlib import Path

LESSON_SECONDS: dict[str, float] = defaultdict(float)
TIMES = Path(__file__).resolve().parents[1] / "build" / "lesson_times.json"


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        # Widget views carry a random model id; HTML/JS outputs come from progress bars.
        collector.skip_compare += (
            "text/html",
            "application/javascript",
            "application/vnd.jupyter.widget-view+json",
        )


def pytest_runtest_logreport(report):
    """Add each cell's setup, call and teardown time to its lesson (with xdist: on the controller)."""
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        LESSON_SECONDS[Path(path).name] += report.duration


def pytest_terminal_summary(terminalreporter, config):
    if not LESSON_SECONDS or hasattr(config, "workerinput"):  # a worker's summary is never shown
        return
    terminalreporter.section("seconds per lesson (cells' setup + call + teardown, each on one worker)")
    for name, sec in sorted(LESSON_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{sec:7.1f} s  {name}")
    terminalreporter.write_line(f"{sum(LESSON_SECONDS.values()):7.1f} s  in all")
    TIMES.parent.mkdir(exist_ok=True)
    TIMES.write_text(json.dumps(dict(sorted(LESSON_SECONDS.items())), indent=1) + "\n")
