"""Numbers in a lesson's prose, and where each one comes from.

A lesson's markdown may state a measurement only if the lesson shows it or ships it. This module finds
the numbers a reader takes as measurements and looks each one up; ``tests/test_prose_numbers.py``
applies it to every lesson.

**What counts as a measurement** (:func:`prose_numbers`), in the markdown cells outside code spans,
code blocks and link targets:

* a decimal (``0.988``, ``98.9``), a percentage (``82%``), an integer of three or more digits
  (``1,000``, ``229979``);
* any number followed by a unit of time (``79 s``, ``2.5 min``, ``64 minutes``), and a duration
  spelled out in words (``about two minutes``, ``an hour``): a time is always a measurement, and
  one written in words cannot be checked, so it is flagged as such.

**Not counted:** years (1900-2039 without a comma), numbers after *Table*, *Fig.*, *Figure*, *Eq.*,
*§*, *section*, *lesson*, *Part*, *arXiv:*, *notebook* and at the start of a heading (references and
section numbers, not measurements), numbers that end a name (``AVX-512``), version
strings (``2.14.1``), numbers inside words (``seq2seq``, ``0xAC00``), and a size being defined in
maths, ``$H = 128$``: a single symbol, ``=``, a number (the sizes of the model being defined).

**Where a number may come from** (:func:`unbacked`), in this order:

1. the lesson's stored outputs (streams, ``text/plain``, ``text/markdown``, errors), **at the
   precision printed**: ``0.988`` in prose needs ``0.988`` in an output (``98.8%`` and ``0.988`` are the
   same figure at the same precision); ``1,000`` and ``1000`` are the same;
2. the results files the lesson names (:func:`referenced_results`): a file of ``data/results/`` (or
   ``data/results/comparisons/``) whose stem is a string literal of the lesson's code or a ``*.json``
   name in its markdown, or such a stem followed by ``_seed<n>`` and/or ``_ko``. A prose number of
   at least three significant digits (``98.36``, ``0.568``, ``1,000``) matches a value of those files
   rounded to the prose's precision. Only the files the lesson names, and only numbers of three digits
   or more: results files hold thousands of values (loss curves, per-bucket figures), and rounding
   backs almost any two-digit decimal by chance (``0.71`` rounds from 14 values of ``data/results/``,
   ``0.93`` from 89, and from six values of the files lesson 02 names). A figure of one or two digits
   must be printed by the lesson. Durations are the exception: only the values under a key that
   names seconds back them (converted to the prose's unit), at any number of digits;
3. the lesson's allowlist, ``tests/prose_numbers/<notebook stem>.txt``: one ``number<TAB>source``
   per line, the source being the cited paper with its table or figure, or ``definition``. Lines
   starting with ``#`` are comments.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ProseNumber",
    "markdown_text",
    "prose_numbers",
    "output_numbers",
    "result_numbers",
    "referenced_results",
    "read_allowlist",
    "unbacked",
    "significant_digits",
    "check_lesson",
]

_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUMBER = re.compile(r"(?<![\w.,§'/\\])(?P<num>" + _DIGITS + r")(?![\w]|[.,]\d)(?P<pct>\s?%)?")
_TIME_UNIT = re.compile(r"^\s?-?\s?(?P<unit>ms|s|sec|seconds?|min|minutes?|h|hours?)\b")
_UNITS = {
    "ms": "ms",
    "s": "s",
    "sec": "s",
    "second": "s",
    "seconds": "s",
    "min": "min",
    "minute": "min",
    "minutes": "min",
    "h": "h",
    "hour": "h",
    "hours": "h",
}
_PER_SECOND = {"ms": 1000.0, "s": 1.0, "min": 1 / 60, "h": 1 / 3600}
_SPELLED_TIME = re.compile(
    r"\b(?:(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|"
    r"fifty|sixty|a few|several|half an?|a quarter of an?)\s+(?:seconds|minutes|hours)|an\s+hour|a\s+minute"
    r"|half\s+an\s+hour)\b",
    re.IGNORECASE,
)
_REFERENCE_BEFORE = re.compile(
    r"(?:\b(?:Tables?|Fig\.|Figs\.|Figures?|Eq\.|Eqs\.|Equations?|[Ss]ections?|[Ll]essons?|Part|notebook|"
    r"chapter|Chapter|arXiv:)|§)\s*$"
)
_HEADING_BEFORE = re.compile(r"(?:^|\n)#+\s*$")
_DEFINITION_BEFORE = re.compile(r"(?:^|[\s(,$])\\?[A-Za-z]+(?:_\{?[\w,]+\}?)?\s*=\s*$")
_CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_HTML_TAG = re.compile(r"<[^>\n]*>")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
MIN_RESULT_DIGITS = 3  # a results value backs a prose number of at least this many significant digits
_JSON_NAME = re.compile(r"([A-Za-z0-9_]+)\.json")
_STRING_LITERAL = re.compile(r"[\"']([A-Za-z0-9_]+)[\"']")


@dataclass(frozen=True)
class ProseNumber:
    """One number of the prose: ``text`` as written, its ``value`` (a percentage as a fraction) and
    ``decimals`` (the precision of ``value``: ``82%`` is 0.82 at 2 decimals), ``cell`` its markdown
    cell, ``context`` the words around it. ``spelled`` is True for a duration written in words, which
    no output can back."""

    text: str
    value: float
    decimals: int
    cell: int
    context: str
    spelled: bool = False
    unit: str | None = None

    def __str__(self) -> str:
        return f"cell {self.cell}: {self.text!r} in “{self.context}”"


def _parse(num: str, percent: bool) -> tuple[float, int]:
    plain = num.replace(",", "")
    decimals = len(plain.partition(".")[2])
    value = float(plain)
    if percent:
        return value / 100, decimals + 2
    return value, decimals


def markdown_text(source: str) -> str:
    """The prose of a markdown cell: code blocks, code spans, link targets and HTML tags blanked out
    (replaced by spaces of the same length, so that positions still point into the source)."""
    for pattern in (_CODE_BLOCK, _CODE_SPAN, _LINK_TARGET, _HTML_TAG):
        source = pattern.sub(lambda m: " " * len(m.group(0)), source)
    return source


def _in_spans(pos: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def prose_numbers(source: str, cell: int = 0) -> list[ProseNumber]:
    """The numbers of one markdown cell that a reader takes as measurements (the module docstring's rule)."""
    text = markdown_text(source)
    maths = [m.span() for m in _MATH.finditer(text)]
    found = []
    for m in _NUMBER.finditer(text):
        num, pct = m.group("num"), bool(m.group("pct"))
        before, after = text[: m.start()], text[m.end() :]
        unit_match = None if pct else _TIME_UNIT.match(after)
        timed = unit_match is not None
        plain = num.replace(",", "")
        measured = pct or timed or "." in plain or len(plain) >= 3
        if not measured:
            continue
        if "," not in num and "." not in num and not pct and not timed and 1900 <= int(plain) <= 2039:
            continue  # a year
        if _REFERENCE_BEFORE.search(before) or _HEADING_BEFORE.search(before):
            continue  # Table 4, §3.2, lesson 03, "### 3.1 Query": a reference or a section number
        if re.search(r"[A-Za-z]-$", before):
            continue  # AVX-512, RNNsearch-50: part of a name
        if _in_spans(m.start(), maths) and _DEFINITION_BEFORE.search(before[-40:]):
            continue  # $H = 128$: a size being defined
        value, decimals = _parse(num, pct)
        context = " ".join(text[max(0, m.start() - 40) : m.end() + 25].split())
        unit = _UNITS[unit_match.group("unit")] if timed else None
        found.append(ProseNumber(m.group(0).strip(), value, decimals, cell, context, unit=unit))
    for m in _SPELLED_TIME.finditer(text):
        context = " ".join(text[max(0, m.start() - 40) : m.end() + 25].split())
        found.append(ProseNumber(m.group(0), math.nan, 0, cell, context, spelled=True))
    return found


def _output_texts(cell: Mapping) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            texts.append(_joined(out.get("text", "")))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            texts += [_joined(data[k]) for k in ("text/plain", "text/markdown") if k in data]
        elif kind == "error":
            texts.append(_joined(out.get("evalue", "")))
    return texts


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


_OUTPUT_NUMBER = re.compile(r"(?<![\w.])[-+]?(?P<num>" + _DIGITS + r")(?![\w]|[.,]\d)(?P<pct>\s?%)?")


def output_numbers(texts: Iterable[str]) -> set[tuple]:
    """Every number printed in ``texts`` as ``(value, decimals)`` (a percentage as its fraction), and a
    number followed by a unit of time also as ``(value, decimals, unit)``."""
    found: set[tuple] = set()
    for text in texts:
        for m in _OUTPUT_NUMBER.finditer(text):
            value, decimals = _parse(m.group("num"), bool(m.group("pct")))
            found.add((round(value, decimals), decimals))
            unit = None if m.group("pct") else _TIME_UNIT.match(text[m.end() :])
            if unit:
                found.add((round(value, decimals), decimals, _UNITS[unit.group("unit")]))
    return found


def result_numbers(paths: Iterable[Path], *, seconds: bool = False) -> list[float]:
    """Every number in the JSON files ``paths``, at any depth (booleans excluded); with ``seconds``, only
    those under a key that names seconds (``train_seconds``: the durations)."""
    values: list[float] = []

    def walk(x, timed: bool) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, timed or "second" in str(k))
        elif isinstance(x, list):
            for v in x:
                walk(v, timed)
        elif isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and (timed or not seconds):
            values.append(float(x))

    for path in paths:
        walk(json.loads(Path(path).read_text(encoding="utf-8")), False)
    return values


def referenced_results(notebook: Mapping, results_dir: Path) -> list[Path]:
    """The results files a lesson names: a stem that is a string literal of a code cell or a ``*.json``
    name of a markdown cell, or that stem followed by ``_seed<n>`` and/or ``_ko``."""
    names = set()
    for cell in notebook["cells"]:
        source = _joined(cell["source"])
        names |= set(_STRING_LITERAL.findall(source) if cell["cell_type"] == "code" else [])
        names |= set(_JSON_NAME.findall(source))
    files = sorted(Path(results_dir).glob("*.json")) + sorted(Path(results_dir).glob("comparisons/*.json"))
    suffix = re.compile(r"(?:_seed\d+)?(?:_ko)?")
    return [f for f in files if any(f.stem.startswith(n) and suffix.fullmatch(f.stem[len(n) :]) for n in names)]


def read_allowlist(path: Path) -> dict[tuple[float, int], str]:
    """``number<TAB>source`` lines as ``{(value, decimals): source}``.

    Raises:
        ValueError: a line without a tab, a number or a source (the message names the file and line).
    """
    allowed = {}
    if not Path(path).exists():
        return allowed
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        number, tab, source = line.partition("\t")
        m = re.fullmatch(r"(" + _DIGITS + r")(\s?%)?", number.strip())
        if not tab or not source.strip() or not m:
            raise ValueError(f"{path}:{i}: expected 'number<TAB>source', got {line!r}")
        value, decimals = _parse(m.group(1), bool(m.group(2)))
        allowed[round(value, decimals), decimals] = source.strip()
    return allowed


def significant_digits(text: str) -> int:
    """Significant digits of a number as written: ``0.71`` has 2, ``98.36`` 4, ``1,000`` 4, ``82%`` 2."""
    digits = re.sub(r"\D", "", text.split("%")[0])
    return len(digits.lstrip("0")) or 1


def _matches_result(number: ProseNumber, values: Sequence[float], min_digits: int = MIN_RESULT_DIGITS) -> bool:
    if significant_digits(number.text) < min_digits:
        return False
    half = 0.5 * 10.0 ** (-number.decimals)
    return any(abs(v - number.value) <= half * (1 + 1e-9) for v in values)


def unbacked(
    numbers: Iterable[ProseNumber],
    printed: set[tuple],
    results: Sequence[float] = (),
    allowed: Mapping[tuple[float, int], str] | None = None,
    durations: Sequence[float] = (),
) -> list[ProseNumber]:
    """The prose numbers that no output prints at their precision, no results value rounds to and no
    allowlist line lists. A duration must be printed with its unit (``79 s`` backs ``79 s``, not
    ``79 min``) or be a results value in seconds (``durations``) converted to the prose's unit; one
    spelled in words is always unbacked."""
    allowed = allowed or {}
    missing = []
    for n in numbers:
        if n.spelled:
            missing.append(n)
            continue
        key = (round(n.value, n.decimals), n.decimals)
        if n.unit:
            ok = (*key, n.unit) in printed or _matches_result(n, [d * _PER_SECOND[n.unit] for d in durations], 1)
        else:
            ok = key in printed or _matches_result(n, results)
        if not (ok or key in allowed):
            missing.append(n)
    return missing


def check_lesson(notebook_path: Path, results_dir: Path, allowlist: Path) -> tuple[list[ProseNumber], list[str]]:
    """Apply the rule to one lesson: ``(unbacked numbers, allowlist lines no prose number uses)``."""
    notebook = json.loads(Path(notebook_path).read_text(encoding="utf-8"))
    cells = notebook["cells"]
    numbers = [
        n for i, c in enumerate(cells) if c["cell_type"] == "markdown" for n in prose_numbers(_joined(c["source"]), i)
    ]
    printed = output_numbers(t for c in cells if c["cell_type"] == "code" for t in _output_texts(c))
    files = referenced_results(notebook, results_dir)
    allowed = read_allowlist(allowlist)
    missing = unbacked(numbers, printed, result_numbers(files), allowed, result_numbers(files, seconds=True))
    used = {(round(n.value, n.decimals), n.decimals) for n in numbers if not n.spelled}
    stale = [f"{v:.{d}f}" + "\t" + src for (v, d), src in allowed.items() if (v, d) not in used]
    return missing, stale
