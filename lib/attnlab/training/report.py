"""Tables built from ``data/results/*.json``: the README's figures are generated, never typed.

``python -m attnlab.training.report`` prints the comparison tables, one per language pair (English->French,
then English->Korean when there are results for it), then lesson 10's tables (:func:`task_tables`);
``python -m attnlab.training.report --readme`` rewrites the block between ``<!-- results:start -->`` and
``<!-- results:end -->`` in README.md with both (:func:`readme_block`). A test checks that the README block
equals what this module generates from the shipped files.

The chrF and AER columns appear only in a table where some result records them (results written
before those metrics existed show none).

Lesson 10's runs carry a ``task`` (``copy``, ``parsing``, ``sorting``): their figures are not translation
figures, so each task has a small table of its own (:data:`TASK_TABLES`), one row per run and pair with the
mean +- sample sd over the seeds shipped (files ``NAME``, ``NAME_seedK``, ``_ko`` last:
:func:`attnlab.training.experiments.seed_result_name`). Other tasks (lesson 13's image models, the toy runs)
have tables in their own lessons and are left out.
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from attnlab.data.corpus import BUCKET_NAMES, TARGETS
from attnlab.training import results as results_io
from attnlab.training.experiments import seed_result_name

__all__ = [
    "load_all_results",
    "results_table",
    "update_readme",
    "PAIR_TITLES",
    "TASK_TABLES",
    "load_task_results",
    "seed_groups",
    "task_table",
    "task_tables",
    "readme_block",
]

START, END = "<!-- results:start -->", "<!-- results:end -->"
# The order models appear in: lesson order, then anything else alphabetically.
ORDER = ("rnn_noattn", "bahdanau", "transformer")
PAIR_TITLES = {"fr": "English→French", "ko": "English→Korean"}


def _pair(name: str, r: dict) -> str:
    pair = r.get("pair", "fr")  # results written before the second pair have no "pair"
    if pair not in TARGETS:
        raise ValueError(f"results of {name!r}: pair must be one of {TARGETS}, got {pair!r}")
    return pair


def load_all_results() -> dict[str, dict]:
    """``{name: results}`` of every shipped translation result, in lesson order within each pair (French first).

    Lesson 13's image and classification models (their results carry a ``task``) have tables of
    their own (:func:`attnlab.training.vision_experiments.format_table`) and are left out.
    """
    found = {n: r for n, r in results_io.load_all_results(shipped=True).items() if r.get("task") is None}
    key = {}
    for name, r in found.items():
        pair = _pair(name, r)
        base = r.get("experiment", name)
        key[name] = (TARGETS.index(pair), ORDER.index(base) if base in ORDER else len(ORDER), name)
    return {n: found[n] for n in sorted(found, key=key.__getitem__)}


def format_cell(value, spec: str) -> str:
    """``value`` formatted with ``spec``, or an en dash for a missing value (None)."""
    return "–" if value is None else format(value, spec)


def _table(rows: dict[str, dict]) -> str:
    chrf = any("chrf" in r for r in rows.values())
    aer = any("aer" in r for r in rows.values())
    head = (
        "| model | BLEU | "
        + ("chrF | " if chrf else "")
        + "exact | "
        + " | ".join(f"BLEU {b}" for b in BUCKET_NAMES)
        + " | EM 31-40 | align (content) | "
        + ("AER | " if aer else "")
        + "params | train s | steps | tokens/s | profile |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in rows.items():
        bb = r.get("by_bucket", {})
        cells = [
            f"`{name}`",
            format_cell(r.get("bleu"), ".1f"),
            *([format_cell(r.get("chrf"), ".1f")] if chrf else []),
            format_cell(r.get("exact_match"), ".3f"),
            *(format_cell(bb.get(b, {}).get("bleu"), ".1f") for b in BUCKET_NAMES),
            format_cell(bb.get("31-40", {}).get("exact_match"), ".3f"),
            format_cell(r.get("align_content"), ".3f"),
            *([format_cell(r.get("aer"), ".3f")] if aer else []),
            f"{r.get('params', 0):,}",
            format_cell(r.get("train_seconds"), ".0f"),
            format_cell(r.get("train_steps"), ","),
            format_cell(r.get("tokens_per_second"), ".0f"),
            r.get("profile", "?"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def results_table(results: dict[str, dict] | None = None) -> str:
    """Markdown tables, one per language pair present: BLEU and exact match per bucket, alignment,
    size, training steps and speed, profile."""
    results = load_all_results() if results is None else results
    parts = []
    for pair in TARGETS:
        rows = {n: r for n, r in results.items() if _pair(n, r) == pair}
        if rows:
            parts.append(f"**{PAIR_TITLES[pair]}**\n\n{_table(rows)}")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Column:
    """One figure of a task table: its header, where it sits in a results file, how it is shown.

    ``path`` is the chain of keys (``("copy_accuracy", "name")``); a missing key or a ``None`` on the way
    is a missing figure. ``spec`` formats it; ``mean`` says whether seeds are averaged (mean +- sd) or must
    agree (a setting such as the step budget: shown once, or each seed's value when they differ).
    """

    header: str
    path: tuple[str, ...]
    spec: str = ".3f"
    mean: bool = True

    def get(self, r: dict):
        """The figure in results ``r``, or None when it is missing."""
        value = r
        for key in self.path:
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return value


@dataclass(frozen=True)
class TaskTable:
    """The table of one task (see :data:`TASK_TABLES`): a title, its columns, whether runs differ by language
    pair (a ``pair`` column), and the runs' order (lesson order; runs not listed follow, sorted)."""

    title: str
    columns: tuple[Column, ...]
    pairs: bool = False
    order: tuple[str, ...] = ()


_STEPS = Column("steps", ("train_steps",), ",", mean=False)
#: Lesson 10's tasks, in lesson order, and the figures the lesson prints for each.
TASK_TABLES: dict[str, TaskTable] = {
    "copy": TaskTable(
        "Lesson 10, copying (test names and numbers never seen in training)",
        (
            Column("BLEU", ("bleu",), ".1f"),
            Column("copy names", ("copy_accuracy", "name")),
            Column("copy numbers", ("copy_accuracy", "number")),
            Column("pointer", ("pointer_all",)),
            Column("p_gen (copied)", ("p_gen", "copied")),
            Column("p_gen (other)", ("p_gen", "other")),
            _STEPS,
        ),
        pairs=True,
        order=("pointer_gen", "pointer_nocopy", "conv_copy"),
    ),
    "parsing": TaskTable(
        "Lesson 10, parsing as translation (labelled bracketing F1)",
        (Column("F1", ("f1",)), Column("F1 31-40", ("by_bucket", "31-40", "f1")), _STEPS),
    ),
    "sorting": TaskTable(
        "Lesson 10, sorting (trained on 5-10 numbers)",
        (
            Column("exact order at 2x", ("exact_order_2x",)),
            Column("2x length", ("test_length_2x",), "d", mean=False),
            _STEPS,
        ),
    ),
}

_SEED_NAME = re.compile(r"(?P<run>.+?)(?:_seed(?P<seed>[1-9][0-9]*))?")


def load_task_results(tasks=TASK_TABLES) -> dict[str, dict]:
    """``{name: results}`` of every shipped result whose ``task`` is one of ``tasks``, sorted by name."""
    return {n: r for n, r in results_io.load_all_results(shipped=True).items() if r.get("task") in tasks}


def seed_groups(results: dict[str, dict], order: tuple[str, ...] = ()) -> dict[tuple[str, str], dict[int, dict]]:
    """Results grouped by run and pair: ``{(run, pair): {seed: results}}``, French first, then the runs in
    ``order``, then the others sorted; seeds ascending.

    A file name is read as :func:`attnlab.training.experiments.seed_result_name` writes it
    (``NAME[_seedK][_ko]``); the pair is the results' ``pair`` (English->French when absent).

    Raises:
        ValueError: a name that is not ``seed_result_name(run, pair, seed)`` of its own pair, or a
            results file whose ``seed`` differs from its name's.
    """
    groups: dict[tuple[str, str], dict[int, dict]] = {}
    for name, r in results.items():
        pair = _pair(name, r)
        stem = name.removesuffix(f"_{pair}") if pair != "fr" else name
        m = _SEED_NAME.fullmatch(stem)
        run, seed = m["run"], int(m["seed"] or 0)
        if seed_result_name(run, pair, seed) != name:
            raise ValueError(
                f"results of {name!r}: the name must be seed_result_name(run, pair, seed) "
                f"(NAME[_seedK][_ko]), here {seed_result_name(run, pair, seed)!r} for pair {pair!r}"
            )
        if r.get("seed", seed) != seed:
            raise ValueError(f"results of {name!r}: its seed field is {r['seed']!r}, its name says seed {seed}")
        groups.setdefault((run, pair), {})[seed] = r
    rank = {run: i for i, run in enumerate(order)}
    keys = sorted(groups, key=lambda k: (TARGETS.index(k[1]), rank.get(k[0], len(rank)), k[0]))
    return {k: dict(sorted(groups[k].items())) for k in keys}


def _seed_cell(column: Column, runs: dict[int, dict], label: str) -> str:
    """One cell: the figure over a run's seeds (mean +- sample sd), or an en dash when no seed records it."""
    values = {seed: column.get(r) for seed, r in runs.items()}
    missing = sorted(seed for seed, v in values.items() if v is None)
    if len(missing) == len(values):
        return "–"
    if missing:
        raise ValueError(
            f"{label}: {'.'.join(column.path)!r} is missing in seed(s) {missing} but recorded in the others; "
            "retrain or re-evaluate those seeds so that every seed has the same figures"
        )
    got = list(values.values())
    if not column.mean:
        return " / ".join(dict.fromkeys(format(v, column.spec) for v in got))
    if len(got) == 1:
        return format(got[0], column.spec)
    return f"{format(statistics.mean(got), column.spec)} ± {format(statistics.stdev(got), column.spec)}"


def task_table(task: str, results: dict[str, dict]) -> str:
    """Markdown table of one task of :data:`TASK_TABLES` over ``results`` (all of that task): a row per run and pair."""
    if task not in TASK_TABLES:
        raise ValueError(f"task must be one of {sorted(TASK_TABLES)}, got {task!r}")
    spec = TASK_TABLES[task]
    headers = ["run", *(["pair"] if spec.pairs else []), "seeds", *(c.header for c in spec.columns)]
    head = "| " + " | ".join(headers) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (run, pair), runs in seed_groups(results, spec.order).items():
        label = f"{task} run {run!r} ({pair})"
        cells = [f"`{seed_result_name(run, pair)}`", *([pair] if spec.pairs else []), ", ".join(map(str, runs))]
        lines.append("| " + " | ".join(cells + [_seed_cell(c, runs, label) for c in spec.columns]) + " |")
    return f"**{spec.title}**\n\n" + "\n".join(lines)


def task_tables(results: dict[str, dict] | None = None) -> str:
    """Markdown tables of lesson 10's tasks present in ``results`` (default: the shipped ones), in lesson order.

    Each cell is the mean +- sample sd over the run's seeds (the value alone for one seed); an en dash
    where no seed records the figure (e.g. ``p_gen`` of a model without copying).
    """
    results = load_task_results() if results is None else results
    parts = []
    for task in TASK_TABLES:
        rows = {n: r for n, r in results.items() if r.get("task") == task}
        if rows:
            parts.append(task_table(task, rows))
    return "\n\n".join(parts)


def readme_block() -> str:
    """The README's results block: the translation tables (:func:`results_table`), then :func:`task_tables`."""
    return "\n\n".join(part for part in (results_table(), task_tables()) if part)


README = Path(__file__).resolve().parents[3] / "README.md"  # lib/attnlab/training/report.py -> the repository's


def update_readme(readme: Path | None = None, table: str | None = None) -> bool:
    """Replace the results block of README.md (default :data:`README`); return True when the file changed."""
    readme = readme or README
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} ... {END} block")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    new = f"{before}{START}\n{table or readme_block()}\n{END}{after}"
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv=None) -> int:
    """CLI: print the tables (:func:`readme_block`), or rewrite the README block with ``--readme``."""
    ap = argparse.ArgumentParser(prog="python -m attnlab.training.report")
    ap.add_argument("--readme", action="store_true", help="rewrite the results block in README.md")
    args = ap.parse_args(argv)
    if args.readme:
        print("README.md updated" if update_readme() else "README.md already up to date")
    else:
        print(readme_block())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
