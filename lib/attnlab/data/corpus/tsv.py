"""Real corpora: a tab-separated English→French file, and the tokenisers that match our corpus.

The format is one pair per line, ``English<TAB>French``; further columns are ignored, so the
three-column exports of Tatoeba/Anki (``English<TAB>French<TAB>CC-BY 2.0 (France) Attribution:
tatoeba.org #...``) load as they are, and so do the ``#separator:tab``-style header lines of newer
Anki exports. Tatoeba's own sentence-pair download (``id<TAB>English<TAB>id<TAB>French``) is
recognised by its numeric id columns on the first line; ``columns=`` names the two columns of any
other layout. A name ending in ``.gz`` is read through gzip.

The file must be UTF-8 (a byte-order mark is allowed; Windows ``\\r\\n`` line ends are fine). A bad
line -- invalid UTF-8, no tab, too few columns, an empty side -- is an error naming ``file:line``;
with ``on_bad_line="skip"`` it is skipped instead, and one warning lists every skipped ``file:line``.

:func:`iter_tsv` reads the file one line at a time (a WMT-size file is never held in memory) and
yields each pair's text after :func:`normalize_text`: Unicode NFC, every run of white space --
including the no-break spaces U+00A0 and U+202F that French typography puts before ``! ? ; :`` and
inside guillemets -- one plain space, invisible characters (zero-width space, soft hyphen, a stray
byte-order mark, control codes) dropped, the ends stripped. :func:`load_tsv` builds on it and
returns word-tokenised :class:`~attnlab.data.corpus.splits.Pair` objects for the course's word-level
models; :mod:`attnlab.data.realcorpus` builds on it for subword models.
"""

from __future__ import annotations

import gzip
import re
import unicodedata
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from attnlab.core.checks import check_int
from attnlab.data.corpus.splits import Pair

__all__ = ["tokenize_en", "tokenize_fr", "normalize_text", "TsvLine", "iter_tsv", "load_tsv"]

_QUOTES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "´": "'", "“": '"', "”": '"', "„": '"'})
_PUNCT_RE = re.compile(r'([.,!?;:«»"…])')
_ELISION_RE = re.compile(r"^(l|d|j|m|t|s|n|c|qu|jusqu|lorsqu|puisqu|quoiqu)'(.+)$")
_ANKI_HEADER_RE = re.compile(r"^#[A-Za-z ]+:")  # "#separator:tab", "#html:false", "#notetype column:1"
_MAX_LISTED = 10  # skipped lines named in the warning
# Invisible characters: zero-width space, word joiner, byte-order mark, soft hyphen, C0/C1 controls
# that are not white space.
_INVISIBLE_RE = re.compile("[\u200b\u2060\ufeff\u00ad\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def normalize_text(text: str) -> str:
    """The canonical form of one side of a pair: what :func:`iter_tsv` yields and subword models see.

    NFC; every run of white space (the no-break spaces U+00A0 / U+202F of French typography
    included) becomes one plain space; zero-width and control characters and soft hyphens are
    dropped; the ends are stripped. Case, quotes and apostrophes are kept. Idempotent.

    Args:
        text: raw text.

    Returns:
        The normalised text ("" when nothing visible is left).
    """
    if text.isascii() and text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # the common case, already canonical: skip the three passes below
    text = unicodedata.normalize("NFC", text)
    if not text.isprintable():  # only then can there be invisible characters (or non-ASCII spaces)
        text = _INVISIBLE_RE.sub("", text)
    return " ".join(text.split())  # str.split() splits on every Unicode space, U+00A0 and U+202F included


def _normalise(text: str) -> list[str]:
    text = unicodedata.normalize("NFC", text).translate(_QUOTES).lower()
    return _PUNCT_RE.sub(r" \1 ", text).split()  # split() also collapses NBSP and other spaces


def tokenize_en(text: str) -> list[str]:
    """English tokens: NFC, lower case, punctuation ``.,!?;:«»"…`` split off; apostrophes kept ("don't").

    Args:
        text: raw text.

    Returns:
        A list of tokens.
    """
    return _normalise(text)


def tokenize_fr(text: str) -> list[str]:
    """French tokens: as :func:`tokenize_en`, and elided clitics split off ("l'homme" → "l'" "homme").

    Typographic apostrophes become "'". Words like "aujourd'hui" stay whole.

    Args:
        text: raw text.

    Returns:
        A list of tokens.
    """
    out = []
    for w in _normalise(text):
        m = _ELISION_RE.match(w)
        while m:
            out.append(m.group(1) + "'")
            w = m.group(2)
            m = _ELISION_RE.match(w)
        out.append(w)
    return out


class TsvLine(NamedTuple):
    """One good line of a corpus file: its 1-based line number and both sides, normalised."""

    lineno: int
    en: str
    fr: str


def _is_tatoeba_pairs(fields: list[str]) -> bool:
    """``id<TAB>English<TAB>id<TAB>French``: Tatoeba's sentence-pair download."""
    return len(fields) >= 4 and fields[0].strip().isdigit() and fields[2].strip().isdigit()


def _check_on_bad_line(on_bad_line) -> None:
    if on_bad_line not in ("raise", "skip"):
        raise ValueError(f"on_bad_line must be 'raise' or 'skip', got {on_bad_line!r}")


def _check_columns(columns) -> tuple[int, int] | None:
    if columns is None:
        return None
    if not isinstance(columns, tuple | list) or len(columns) != 2:
        raise TypeError(f"columns must be a pair (english_column, french_column), got {columns!r}")
    en_col, fr_col = (check_int(f"columns[{i}]", c, minimum=0) for i, c in enumerate(columns))
    if en_col == fr_col:
        raise ValueError(f"columns must name two different columns, got {columns!r}")
    return en_col, fr_col


def iter_tsv(
    source: str | Path | BinaryIO,
    *,
    on_bad_line: str = "raise",
    columns: tuple[int, int] | None = None,
    skipped: list[str] | None = None,
) -> Iterator[TsvLine]:
    """Stream the good lines of an English→French corpus file, one at a time.

    The file is read line by line (never whole), so memory does not grow with its size. Blank
    lines and the ``#key:value`` header lines of Anki exports (before the first pair) are passed
    over silently.

    Args:
        source: a path (``.gz`` is decompressed on the fly) or a file object opened in binary mode.
        on_bad_line: ``"raise"`` (default) or ``"skip"``.
        columns: ``(english_column, french_column)``, 0-based; None picks ``(0, 1)``, or ``(1, 3)``
            when the first line looks like Tatoeba's ``id<TAB>English<TAB>id<TAB>French`` download.
        skipped: with ``on_bad_line="skip"``, each skipped line is appended here as
            ``"file:line (why)"`` and no warning is given (use it when you may stop early); when
            None, one warning naming the skipped lines comes at the end of the file.

    Yields:
        :class:`TsvLine` ``(lineno, en, fr)``, both sides through :func:`normalize_text`.

    Raises:
        ValueError: a line that is not valid UTF-8, has too few columns or an empty side (naming
            ``file:line``), unless ``on_bad_line="skip"``; a UTF-16 file (always); an unknown
            ``on_bad_line``; columns naming one column twice.
        TypeError: a file object opened in text mode; malformed ``columns``.
    """
    _check_on_bad_line(on_bad_line)  # checked now, not at the first next()
    cols = _check_columns(columns)
    if not isinstance(source, str | Path) and not hasattr(source, "__iter__"):
        raise TypeError(f"source must be a path or a binary file object, got {type(source).__name__}")
    return _iter_file(source, on_bad_line, cols, skipped)


def _iter_file(source, on_bad_line: str, cols, skipped: list[str] | None) -> Iterator[TsvLine]:
    bad_lines: list[str] = [] if skipped is None else skipped
    if isinstance(source, str | Path):
        name = str(source)
        opener = gzip.open if name.endswith(".gz") else open
        with opener(source, "rb") as f:
            yield from _iter_lines(f, name, on_bad_line, cols, bad_lines)
    else:
        yield from _iter_lines(source, str(getattr(source, "name", "<stream>")), on_bad_line, cols, bad_lines)
    if skipped is None and bad_lines:
        warnings.warn(_skipped_message(bad_lines), stacklevel=3)


def _skipped_message(skipped: list[str]) -> str:
    listed = "; ".join(skipped[:_MAX_LISTED])
    more = f"; and {len(skipped) - _MAX_LISTED} more" if len(skipped) > _MAX_LISTED else ""
    return f"skipped {len(skipped)} bad line(s): {listed}{more}"


def _iter_lines(f, name: str, on_bad_line: str, cols, skipped: list[str]) -> Iterator[TsvLine]:
    def bad(lineno: int, why: str) -> None:
        where = f"{name}:{lineno}"
        if on_bad_line == "raise":
            raise ValueError(f"{where}: {why}")
        skipped.append(f"{where} ({why})")

    seen_pair = False
    for lineno, raw in enumerate(f, 1):
        if lineno == 1:
            if not isinstance(raw, bytes):
                raise TypeError(f"{name}: open the file in binary mode ('rb'), got lines of {type(raw).__name__}")
            if raw.startswith(_UTF16_BOMS):
                raise ValueError(f"{name}:1: the file looks like UTF-16 (it starts with a UTF-16 byte-order mark); "
                                 "save it as UTF-8")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            bad(lineno, f"not valid UTF-8 (byte {raw[err.start]:#04x} at column {err.start + 1})")
            continue
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        line = line.rstrip("\r\n")
        if not line.strip() or (not seen_pair and _ANKI_HEADER_RE.match(line)):
            continue
        fields = line.split("\t")
        if cols is None:
            cols = (1, 3) if _is_tatoeba_pairs(fields) else (0, 1)
        if len(fields) < 2:
            bad(lineno, "expected 'English<TAB>French', found no tab")
            continue
        if len(fields) <= max(cols):
            bad(lineno, f"expected at least {max(cols) + 1} columns (English in column {cols[0] + 1}, French in "
                        f"column {cols[1] + 1}), found {len(fields)}")
            continue
        en, fr = normalize_text(fields[cols[0]]), normalize_text(fields[cols[1]])
        if not en or not fr:
            bad(lineno, f"the {'English' if not en else 'French'} side is empty")
            continue
        seen_pair = True
        yield TsvLine(lineno, en, fr)


def load_tsv(
    path: str | Path,
    *,
    max_pairs: int | None = None,
    max_len: int | None = None,
    on_bad_line: str = "raise",
    columns: tuple[int, int] | None = None,
) -> list[Pair]:
    """Read a user-supplied ``English<TAB>French[<TAB>attribution…]`` corpus as word-tokenised pairs.

    The file is streamed through :func:`iter_tsv`; only the returned pairs are kept in memory.

    Args:
        path: the file (UTF-8; ``.gz`` allowed).
        max_pairs: stop after this many pairs.
        max_len: drop pairs with more than this many tokens on either side.
        on_bad_line: ``"raise"`` (default) or ``"skip"`` (skip it; warn once, naming every line).
        columns: the English and French columns, as in :func:`iter_tsv`.

    Returns:
        Pairs (tokens from :func:`tokenize_en` / :func:`tokenize_fr`) with ``align`` and ``content`` None.

    Raises:
        ValueError: a line that is not valid UTF-8, has no tab or has an empty side (naming
            ``file:line``), unless ``on_bad_line="skip"``; an unknown ``on_bad_line``.
    """
    if max_pairs is not None:
        check_int("max_pairs", max_pairs, minimum=0)
    if max_len is not None:
        check_int("max_len", max_len, minimum=0)
    _check_on_bad_line(on_bad_line)
    pairs: list[Pair] = []
    skipped: list[str] = []
    if max_pairs != 0:
        for line in iter_tsv(path, on_bad_line=on_bad_line, columns=columns, skipped=skipped):
            src, tgt = tokenize_en(line.en), tokenize_fr(line.fr)
            if max_len is not None and (len(src) > max_len or len(tgt) > max_len):
                continue
            pairs.append(Pair(tuple(src), tuple(tgt)))
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    if skipped:
        warnings.warn(_skipped_message(skipped), stacklevel=2)
    return pairs
