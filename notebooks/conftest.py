"""nbval settings for the lessons: skip outputs that cannot be compared byte for byte; the lessons in
the order that finishes soonest on two workers; and a summary of the seconds each lesson took (the
course's budget is about a minute per lesson under nbval, four at most), printed at the end of the
run and kept in ``build/lesson_times.json``.

The order: ``make notebooks`` runs nbval with ``-n 2 --dist loadscope --no-loadscope-reorder``, so
each worker takes the next lesson of the collection when its own is nearly done. Collected in file
order (or, xdist's default, most cells first), the lessons that train for minutes could come late
and leave one worker alone at the end; :func:`pytest_collection_modifyitems` puts the longest
lessons first (longest-processing-time-first), each lesson's cells staying together and in order.
"""

import json
from collections import defaultdict
from pathlib import Path

LESSON_SECONDS: dict[str, float] = defaultdict(float)
TIMES = Path(__file__).resolve().parents[1] / "build" / "lesson_times.json"
# Seconds per lesson under nbval in `make test` on a clean clone (2 cores, beside the browser stage,
# 2 December 2026). Only the order matters: a lesson not listed counts as 0 and goes after these.
EXPECTED_SECONDS = {
    "02_bahdanau_attention.ipynb": 184,
    "06_transformer.ipynb": 169,
    "03_luong_attention.ipynb": 163,
    "01_seq2seq_bottleneck.ipynb": 75,
    "13_attention_beyond_text.ipynb": 61,
    "10_attention_that_points.ipynb": 56,
    "12_attention_at_scale.ipynb": 37,
    "11_decoder_only.ipynb": 19,
    "05_masking_multihead.ipynb": 17,
    "04_self_attention.ipynb": 15,
}


def lesson_order(items):
    """``items`` (collected test items) with the lessons longest first, by :data:`EXPECTED_SECONDS`.

    The sort is stable: each lesson's cells keep their order, lessons of equal cost their file
    order, and items that are not lesson cells stay after them in their own order.
    """

    def cost(item):
        path = Path(str(item.fspath))
        return -EXPECTED_SECONDS.get(path.name, 0) if path.suffix == ".ipynb" else 1

    return sorted(items, key=cost)


def pytest_collection_modifyitems(session, config, items):
    items[:] = lesson_order(items)


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
