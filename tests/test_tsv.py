"""Real corpora: the TSV loader (Tatoeba/Anki exports, damaged files) and the tokenisers."""

import gzip
import io
import tracemalloc
import unicodedata
import warnings
from pathlib import Path

import pytest

from attnlab.data.corpus.tsv import iter_tsv, load_tsv, normalize_text, tokenize_en, tokenize_fr

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE = FIXTURES / "en_fr_sample.tsv"


def test_load_tsv_fixture():
    ps = load_tsv(SAMPLE)
    assert len(ps) == 21 and all(p.align is None and p.content is None and p.possible is None for p in ps)
    by_src = {" ".join(p.src): p.tgt for p in ps}
    assert by_src["go ."] == ("va", "!")
    assert by_src["run !"] == ("cours", "!")  # no-break space before "!"
    assert by_src["i'm hungry ."] == ("j'", "ai", "faim", ".")  # attribution column ignored
    assert by_src["that's the teacher's book ."] == ("c'", "est", "le", "livre", "du", "professeur", ".")  # ’ → '
    assert by_src["the old house , isn't it ?"] == ("la", "vieille", "maison", ",", "n'", "est-ce", "pas", "?")
    assert by_src["the student is at the school ."] == ("l'", "élève", "est", "à", "l'", "école", ".")  # NFC
    assert by_src['" stop ! " he said .'] == ("«", "arrête", "!", "»", "a-t-il", "dit", ".")
    assert by_src["today is monday ."][0] == "aujourd'hui"
    assert by_src["he said he'd come ."][3:5] == ("qu'", "il")
    assert len(load_tsv(SAMPLE, max_pairs=5)) == 5
    assert all(len(p.src) <= 4 and len(p.tgt) <= 4 for p in load_tsv(SAMPLE, max_len=4))
    assert len(load_tsv(SAMPLE, max_len=4)) == 6


def test_tatoeba_anki_three_column_export():
    ps = load_tsv(FIXTURES / "anki_three_columns.tsv")
    assert [(p.src, p.tgt) for p in ps] == [
        (("go", "."), ("va", "!")),
        (("hi", "."), ("salut", "!")),
        (("run", "!"), ("cours", "!")),
    ]


def test_anki_header_lines_are_skipped():
    ps = load_tsv(FIXTURES / "anki_with_header.tsv")
    assert [" ".join(p.src) for p in ps] == ["the cat sleeps .", "who ?"]


def test_byte_order_mark(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes("\ufeffHi.\tSalut !\n".encode())
    assert load_tsv(path)[0].src == ("hi", ".")


def test_invalid_utf8_names_file_and_line():
    path = FIXTURES / "invalid_utf8.tsv"
    with pytest.raises(ValueError, match=r"invalid_utf8\.tsv:3: not valid UTF-8 \(byte 0xe9 at column 8\)"):
        load_tsv(path)


@pytest.mark.parametrize(
    "bad_line, what",
    [
        ("no tab on this line", "no tab"),
        ("\tLe chat.", "English side is empty"),
        ("The cat.\t  ", "French side is empty"),
    ],
)
def test_load_tsv_malformed_line(tmp_path, bad_line, what):
    path = tmp_path / "corpus.tsv"
    path.write_text(f"Hi.\tSalut.\n\nGo.\tVa !\n{bad_line}\nRun.\tCours.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=what) as err:
        load_tsv(path)
    assert f"{path}:4" in str(err.value)


def test_skip_bad_lines_with_one_warning():
    path = FIXTURES / "bad_lines.tsv"
    with pytest.raises(ValueError, match=r"bad_lines\.tsv:2: expected"):
        load_tsv(path)
    with pytest.warns(UserWarning, match=r"skipped 4 bad line\(s\)") as record:
        ps = load_tsv(path, on_bad_line="skip")
    assert [" ".join(p.src) for p in ps] == ["hi .", "go .", "run .", "who ?"]
    entries = str(record[0].message).split(": ", 1)[1].split("; ")
    expected = ((2, "no tab"), (4, "English side is empty"), (6, "not valid UTF-8"), (7, "French side is empty"))
    assert len(entries) == len(expected)
    for entry, (lineno, why) in zip(entries, expected, strict=True):
        assert entry.startswith(f"{path}:{lineno} (") and why in entry, entry


def test_skip_lists_at_most_ten_lines(tmp_path):
    path = tmp_path / "many.tsv"
    path.write_text("".join(f"broken {i}\n" for i in range(12)) + "Hi.\tSalut.\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="and 2 more") as record:
        assert len(load_tsv(path, on_bad_line="skip")) == 1
    assert f"{path}:10 " in str(record[0].message) and f"{path}:11 " not in str(record[0].message)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(on_bad_line="ignore"), ValueError, "on_bad_line must be 'raise' or 'skip', got 'ignore'"),
        (dict(max_pairs=-1), ValueError, "max_pairs must be >= 0"),
        (dict(max_len=2.5), TypeError, "max_len must be an int"),
    ],
)
def test_load_tsv_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        load_tsv(SAMPLE, **kwargs)


def test_tokenizers():
    assert tokenize_fr("L’homme  n'aime   PAS l'été!") == ["l'", "homme", "n'", "aime", "pas", "l'", "été", "!"]
    assert tokenize_fr("Qu'il vienne; jusqu'à demain.") == ["qu'", "il", "vienne", ";", "jusqu'", "à", "demain", "."]
    assert tokenize_en("Don't\tSTOP:  «now»") == ["don't", "stop", ":", "«", "now", "»"]
    assert tokenize_fr("e\u0301te\u0301") == ["été"]


# --- streaming and normalisation (iter_tsv / normalize_text) -------------------------------------


def test_crlf_bom_nbsp_fixture():
    path = FIXTURES / "two_columns_crlf_bom.tsv"
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and raw.count(b"\r\n") == 6  # the fixture is what it claims to be
    lines = list(iter_tsv(path))
    assert [x.lineno for x in lines] == [1, 2, 3, 4, 5, 6]
    assert [(x.en, x.fr) for x in lines] == [
        ("Run!", "Cours !"),
        ("Who?", "Qui ?"),
        ("The student is at school.", "L'élève est à l'école."),
        ("\u201cStop!\u201d he said.", "« Arrête ! » a-t-il dit."),
        ("It's a wonderful day.", "C\u2019est une journée merveilleuse."),
        ("Too many spaces.", "Trop d'espaces."),
    ]
    assert all(unicodedata.is_normalized("NFC", x.fr) for x in lines)
    assert load_tsv(path)[2].tgt == ("l'", "élève", "est", "à", "l'", "école", ".")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Cours\u00a0!", "Cours !"),
        ("Qui\u202f?", "Qui ?"),
        ("e\u0301te\u0301", "été"),
        ("  a \t b\u3000c\u2028d  ", "a b c d"),
        ("soft\u00adhyphen, zero\u200bwidth, joiner\u2060, bom\ufeff", "softhyphen, zerowidth, joiner, bom"),
        ("bell\x07 and del\x7f", "bell and del"),
        ("\u00a0\u202f", ""),
        ("Déjà vu", "Déjà vu"),
        ("plain ascii", "plain ascii"),
    ],
)
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected
    assert normalize_text(expected) == expected  # idempotent


def test_tatoeba_four_column_download():
    path = FIXTURES / "tatoeba_pairs.tsv"
    lines = list(iter_tsv(path))
    assert [(x.en, x.fr) for x in lines][0] == ("Let's try something.", "Essayons quelque chose.")
    assert len(lines) == 3 and all(not x.en[0].isdigit() for x in lines)
    assert [p.src for p in load_tsv(path)][1] == ("i", "have", "to", "go", "to", "sleep", ".")
    # columns= overrides the detection: the ids become the "sentences"
    assert next(iter(iter_tsv(path, columns=(0, 2)))).fr == "3091"


def test_too_few_columns_names_file_and_line(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("1\tHi.\t2\tSalut.\n3\tGo.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"c\.tsv:2: expected at least 4 columns \(English in column 2, French in "
                                         r"column 4\), found 2"):
        list(iter_tsv(path))


@pytest.mark.parametrize(
    "columns, exc, match",
    [
        ((0, 0), ValueError, "columns must name two different columns"),
        ((0,), TypeError, r"columns must be a pair \(english_column, french_column\)"),
        ("01", TypeError, "columns must be a pair"),
        ((-1, 1), ValueError, r"columns\[0\] must be >= 0"),
        ((0, 1.0), TypeError, r"columns\[1\] must be an int"),
    ],
)
def test_iter_tsv_bad_columns(columns, exc, match):
    with pytest.raises(exc, match=match):
        iter_tsv(SAMPLE, columns=columns)  # checked at the call, before the first line is read


def test_iter_tsv_checks_arguments_at_the_call():
    with pytest.raises(ValueError, match="on_bad_line must be 'raise' or 'skip', got 'warn'"):
        iter_tsv(SAMPLE, on_bad_line="warn")
    with pytest.raises(TypeError, match="source must be a path or a binary file object, got int"):
        iter_tsv(3)


def test_utf16_file_is_refused_whatever_on_bad_line(tmp_path):
    path = tmp_path / "u16.tsv"
    path.write_bytes("Hi.\tSalut.\n".encode("utf-16"))
    for mode in ("raise", "skip"):
        with pytest.raises(ValueError, match=r"u16\.tsv:1: the file looks like UTF-16"):
            list(iter_tsv(path, on_bad_line=mode))


def test_text_mode_file_is_refused():
    with open(SAMPLE, encoding="utf-8") as f, pytest.raises(TypeError, match=r"open the file in binary mode"):
        list(iter_tsv(f))


def test_gzip_file(tmp_path):
    path = tmp_path / "corpus.tsv.gz"
    with gzip.open(path, "wb") as f:
        f.write(SAMPLE.read_bytes())
    assert list(iter_tsv(path)) == list(iter_tsv(SAMPLE))


def test_skip_collects_or_warns_at_the_end():
    path = FIXTURES / "bad_lines.tsv"
    skipped = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with skipped= there is no warning
        good = list(iter_tsv(path, on_bad_line="skip", skipped=skipped))
    assert [x.lineno for x in good] == [1, 3, 5, 8] and len(skipped) == 4 and skipped[0].startswith(f"{path}:2 (")
    with pytest.warns(UserWarning, match=r"skipped 4 bad line\(s\)"):
        assert len(list(iter_tsv(path, on_bad_line="skip"))) == 4


class _CountingRaw(io.RawIOBase):
    """A raw file over bytes that counts what is read and refuses a read of everything at once."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.bytes_read = data, 0, 0
        self.name = "counted.tsv"

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        self.bytes_read += n
        return n

    def readall(self):
        raise AssertionError("the whole file was read at once")

    def read(self, size=-1):
        if size is None or size < 0:
            raise AssertionError("the whole file was read at once")
        return super().read(size)


def _big_corpus(n: int) -> bytes:
    return "".join(f"Sentence number {i} is here.\tLa phrase numéro {i} est là\u00a0!\n" for i in range(n)).encode()


def test_iter_tsv_streams_a_file_object():
    raw = _CountingRaw(_big_corpus(50_000))
    f = io.BufferedReader(raw, buffer_size=8192)
    lines = iter_tsv(f)
    first = next(lines)
    assert first == (1, "Sentence number 0 is here.", "La phrase numéro 0 est là !")
    assert raw.bytes_read <= 8192 < len(raw.data) // 100  # one buffer, not the file
    assert sum(1 for _ in lines) == 49_999 and raw.bytes_read == len(raw.data)


def test_iter_tsv_memory_stays_flat(tmp_path):
    path = tmp_path / "big.tsv"
    path.write_bytes(_big_corpus(20_000))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_tsv(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 20_000
    assert peak < size / 20, f"peak {peak} B while streaming a {size} B file"


def test_load_tsv_stops_reading_at_max_pairs(tmp_path):
    path = tmp_path / "late_damage.tsv"
    path.write_bytes(b"Hi.\tSalut.\nGo.\tVa !\nno tab here\n")
    assert len(load_tsv(path, max_pairs=2)) == 2  # the bad third line is never read
    with pytest.raises(ValueError, match=r"late_damage\.tsv:3: expected"):
        load_tsv(path, max_pairs=3)
