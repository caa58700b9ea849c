"""Tables built from ``data/results/*.json``: the README's figures are generated, never typed.

``python -m attnlab.training.report`` prints the comparison tables, one per language pair (English->French,
then English->Korean when there are results for it); ``python -m attnlab.training.report --readme`` rewrites
the block between ``<!-- results:start -->`` and ``<!-- results:end -->`` in README.md. A test
checks that the README block equals what this module generates from the shipped files.

The chrF and AER columns appear only in a table where some result records them (results written
before those metrics existed show none).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnlab.data.corpus import BUCKET_NAMES, TARGETS
from attnlab.training import results as results_io

__all__ = ["load_all_results", "results_table", "update_readme", "PAIR_TITLES"]

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


README = Path(__file__).resolve().parents[3] / "README.md"  # lib/attnlab/training/report.py -> the repository's


def update_readme(readme: Path | None = None, table: str | None = None) -> bool:
    """Replace the results block of README.md (default :data:`README`); return True when the file changed."""
    readme = readme or README
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme} has no {START} ... {END} block")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    new = f"{before}{START}\n{table or results_table()}\n{END}{after}"
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv=None) -> int:
    """CLI: print the tables, or rewrite the README block with ``--readme``."""
    ap = argparse.ArgumentParser(prog="python -m attnlab.training.report")
    ap.add_argument("--readme", action="store_true", help="rewrite the results block in README.md")
    args = ap.parse_args(argv)
    if args.readme:
        print("README.md updated" if update_readme() else "README.md already up to date")
    else:
        print(results_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
