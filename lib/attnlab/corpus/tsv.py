"""Real corpora: a tab-separated English→French file, and the tokenisers that match our corpus.

The format is one pair per line, ``English<TAB>French``; further columns are ignored, so the
three-column exports of Tatoeba/Anki (``English<TAB>French<TAB>CC-BY 2.0 (France) Attribution:
tatoeba.org #...``) load as they are, and so do the ``#separator:tab``-style header lines of newer
Anki exports. The file must be UTF-8 (a byte-order mark is allowed). A bad line -- invalid UTF-8,
no tab, an empty side -- is an error naming ``file:line``; with ``on_bad_line="skip"`` it is
skipped instead, and one warning lists every skipped ``file:line``.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from pathlib import Path

from ..checks import check_int
from .splits import Pair

__all__ = ["tokenize_en", "tokenize_fr", "load_tsv"]

_QUOTES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "´": "'", "“": '"', "”": '"', "„": '"'})
_PUNCT_RE = re.compile(r'([.,!?;:«»"…])')
_ELISION_RE = re.compile(r"^(l|d|j|m|t|s|n|c|qu|jusqu|lorsqu|puisqu|quoiqu)'(.+)$")
_ANKI_HEADER_RE = re.compile(r"^#[A-Za-z ]+:")  # "#separator:tab", "#html:false", "#notetype column:1"
_MAX_LISTED = 10  # skipped lines named in the warning


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


def load_tsv(
    path: str | Path,
    *,
    max_pairs: int | None = None,
    max_len: int | None = None,
    on_bad_line: str = "raise",
) -> list[Pair]:
    """Read a user-supplied ``English<TAB>French[<TAB>attribution…]`` corpus.

    Args:
        path: the file (UTF-8).
        max_pairs: stop after this many pairs.
        max_len: drop pairs with more than this many tokens on either side.
        on_bad_line: ``"raise"`` (default) or ``"skip"`` (skip it; warn once, naming every line).

    Returns:
        Pairs with ``align`` and ``content`` None.

    Raises:
        ValueError: a line that is not valid UTF-8, has no tab or has an empty side (naming
            ``file:line``), unless ``on_bad_line="skip"``; an unknown ``on_bad_line``.
    """
    if max_pairs is not None:
        check_int("max_pairs", max_pairs, minimum=0)
    if max_len is not None:
        check_int("max_len", max_len, minimum=0)
    if on_bad_line not in ("raise", "skip"):
        raise ValueError(f"on_bad_line must be 'raise' or 'skip', got {on_bad_line!r}")
    pairs: list[Pair] = []
    skipped: list[str] = []

    def bad(lineno: int, why: str) -> None:
        where = f"{path}:{lineno}"
        if on_bad_line == "raise":
            raise ValueError(f"{where}: {why}")
        skipped.append(f"{where} ({why})")

    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                bad(lineno, f"not valid UTF-8 (byte {raw[err.start]:#04x} at column {err.start + 1})")
                continue
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if not line.strip() or (not pairs and _ANKI_HEADER_RE.match(line)):
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                bad(lineno, "expected 'English<TAB>French', found no tab")
                continue
            src, tgt = tokenize_en(fields[0]), tokenize_fr(fields[1])
            if not src or not tgt:
                bad(lineno, f"the {'English' if not src else 'French'} side is empty")
                continue
            if max_len is not None and (len(src) > max_len or len(tgt) > max_len):
                continue
            pairs.append(Pair(tuple(src), tuple(tgt)))
    if skipped:
        listed = "; ".join(skipped[:_MAX_LISTED])
        more = f"; and {len(skipped) - _MAX_LISTED} more" if len(skipped) > _MAX_LISTED else ""
        warnings.warn(f"skipped {len(skipped)} bad line(s): {listed}{more}", stacklevel=2)
    return pairs
