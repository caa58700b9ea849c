"""Real corpora: the TSV loader (Tatoeba/Anki exports, damaged files) and the tokenisers."""

from pathlib import Path

import pytest

from attnlab.corpus.tsv import load_tsv, tokenize_en, tokenize_fr

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
