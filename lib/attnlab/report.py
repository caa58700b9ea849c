"""Tables built from ``data/results/*.json``: the README's figures are generated, never typed.

``python -m attnlab.report`` prints the comparison table; ``python -m attnlab.report --readme``
rewrites the block between ``<!-- results:start -->`` and ``<!-- results:end -->`` in README.md.
A test checks that the README block equals what this module generates from the shipped files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .checkpoint import data_dir
from .data import BUCKET_NAMES

__all__ = ["load_all_results", "results_table", "update_readme"]

START, END = "<!-- results:start -->", "<!-- results:end -->"
# The order models appear in: lesson order, then anything else alphabetically.
ORDER = ("rnn_noattn", "bahdanau", "transformer")


def load_all_results(results_dir: Path | None = None) -> dict[str, dict]:
    """``{name: results}`` for every ``*.json`` in ``data/results`` (lesson order first)."""
    results_dir = results_dir or data_dir() / "results"
    found = {p.stem: json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json"))}
    ordered = [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)
    return {n: found[n] for n in ordered}


def _fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def results_table(results: dict[str, dict] | None = None) -> str:
    """A markdown table: BLEU and exact match per bucket, alignment, size, speed, provenance."""
    results = load_all_results() if results is None else results
    head = (
        "| model | BLEU | exact | "
        + " | ".join(f"BLEU {b}" for b in BUCKET_NAMES)
        + " | EM 31-40 | align (content) | params | train s | tokens/s | profile |"
    )
    rule = "|" + "---|" * (head.count("|") - 1)
    rows = [head, rule]
    for name, r in results.items():
        bb = r.get("by_bucket", {})
        cells = [
            f"`{name}`",
            _fmt(r.get("bleu"), ".1f"),
            _fmt(r.get("exact_match"), ".3f"),
            *(_fmt(bb.get(b, {}).get("bleu"), ".1f") for b in BUCKET_NAMES),
            _fmt(bb.get("31-40", {}).get("exact_match"), ".3f"),
            _fmt(r.get("align_content"), ".3f"),
            f"{r.get('params', 0):,}",
            _fmt(r.get("train_seconds"), ".0f"),
            _fmt(r.get("tokens_per_second"), ".0f"),
            r.get("profile", "?"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def update_readme(readme: Path | None = None, table: str | None = None) -> bool:
    """Replace the results block of README.md; return True when the file changed."""
    readme = readme or Path(__file__).resolve().parents[2] / "README.md"
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
    """CLI: print the table, or rewrite the README block with ``--readme``."""
    ap = argparse.ArgumentParser(prog="python -m attnlab.report")
    ap.add_argument("--readme", action="store_true", help="rewrite the results block in README.md")
    args = ap.parse_args(argv)
    if args.readme:
        print("README.md updated" if update_readme() else "README.md already up to date")
    else:
        print(results_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
