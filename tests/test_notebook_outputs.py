"""Static check of the committed lessons: no output that nbval compares may depend on the last digits of floats.

nbval (``make notebooks``) re-executes every lesson and compares each cell's output with the stored one,
character for character after tests/nbval_sanitize.cfg. float32 (and float64) results differ in their last
bits between CPUs (AVX-512, AVX2 and the scalar code of ``ATEN_CPU_CAPABILITY=default`` sum in different
orders), so a compared output must not print digits that those bits reach. The rule, per number in a
compared output (integers are never flagged):

1. *full precision*: 8 or more significant digits (float32 holds about 7; ``print(x.item())``,
   ``tensor.tolist()``), or scientific notation with 4 or more (``1.4901e-08``). Never allowed.
2. *rounding-error magnitude*: a number in scientific notation below 1e-4 (zero included: ``0.0e+00``),
   or a nonzero decimal below 1e-4. These are the sizes of rounding errors (``max |a - b|``), whose every
   digit is the CPU's. Allowed as a bound: right after ``<``, ``<=``, ``≤``, ``>``, ``>=``, ``≥``,
   ``atol``, ``rtol``, ``tol``, ``within``, ``below``, ``at most`` (``max |diff| < 1e-06``).
3. *float32's last digits*: a decimal with 6 or 7 significant digits (trailing zeros do not count; an
   exact binary fraction such as 0.00390625 and an integer value such as 4481.0 are exact on any CPU).

A cell may allow rules 2 and 3 with a comment line ``# portable-output: <why>`` in its source (a float64
toy example, numbers read from a shipped results file). Cells whose output varies start with
``# NBVAL_IGNORE_OUTPUT`` (nbval does not compare them; test_notebooks_meta checks that they assert).
Decimals of at most 5 significant digits are not flagged: their last digit moves on another CPU only
when the value lies within the CPU's error (1e-7 to 1e-5 relative) of a rounding boundary. Measured
with ATEN_CPU_CAPABILITY=default against AVX-512: the 5-digit prints of lessons 03 and 04 came out the
same; lesson 07's 6-digit gradient-norm ratio did not (22.3649 against 22.3647, 22.3648 stored).
"""

import re
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
SANITIZE_CFG = ROOT / "tests" / "nbval_sanitize.cfg"

# What nbval does not compare: its own defaults plus notebooks/conftest.py's additions.
NOT_COMPARED = {
    "image/png",
    "image/jpeg",
    "text/html",
    "application/javascript",
    "application/vnd.jupyter.widget-view+json",
}
NBVAL_NOT_COMPARED_MARKERS = {"NBVAL_IGNORE_OUTPUT", "PYTEST_VALIDATE_IGNORE_OUTPUT", "NBVAL_SKIP"}
NBVAL_NOT_COMPARED_TAGS = {"nbval-ignore-output", "nbval-skip"}
PORTABLE = re.compile(r"^\s*#\s*portable-output:\s*(\S.{9,})$", re.MULTILINE)  # a reason of 10+ characters

NUMBER = re.compile(r"(?<![\w.])[-+]?(?P<mant>\d+\.\d*|\.\d+|\d+)(?P<exp>[eE][-+]?\d+)?(?![\w]|\.\d)")
BOUND_BEFORE = re.compile(r"(<=?|>=?|≤|≥|\batol|\brtol|\btol(?:erance)?|\bwithin|\bbelow|\bat most)\s*[=:]?\s*$")
FULL_PRECISION_DIGITS = 8
FLOAT32_TAIL_DIGITS = 6
ROUNDING_SCALE = 1e-4


def sanitize_patterns(cfg=SANITIZE_CFG):
    """The (regex, replacement) pairs of an nbval sanitize file, parsed the way nbval parses them."""
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", Path(cfg).read_text(encoding="utf-8"), flags=re.MULTILINE)


def is_compared(cell):
    """Whether nbval compares this code cell's output (the same markers and tags that nbval reads)."""
    comments = {line.strip().lstrip("#").strip() for line in cell.source.splitlines() if line.strip().startswith("#")}
    tags = set(cell.get("metadata", {}).get("tags", []))
    return not (comments & NBVAL_NOT_COMPARED_MARKERS or tags & NBVAL_NOT_COMPARED_TAGS)


def compared_texts(cell, patterns):
    """The text nbval compares for one cell: streams and non-image, non-HTML data, sanitized."""
    texts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type in ("display_data", "execute_result"):
            texts += [v for k, v in out.get("data", {}).items() if k not in NOT_COMPARED and isinstance(v, str)]
    for regex, replace in patterns:
        texts = [re.sub(regex, replace, t) for t in texts]
    return texts


def significant_digits(mantissa):
    """Significant digits as written; trailing zeros after the point do not count (2.0000 is 2 printed long)."""
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits.rstrip("0") if "." in mantissa else digits)


def classify(match, text):
    """None if the number is portable, else the rule it breaks."""
    mant, exp = match.group("mant"), match.group("exp")
    if exp is None and "." not in mant:
        return None  # an integer
    value = abs(float(match.group(0)))
    sig = significant_digits(mant)
    if sig >= FULL_PRECISION_DIGITS or (exp is not None and sig >= 4):
        return "full precision"
    if (exp is not None and value < ROUNDING_SCALE) or 0 < value < ROUNDING_SCALE:
        if BOUND_BEFORE.search(text[max(0, match.start() - 20) : match.start()]):
            return None
        return "rounding-error magnitude"
    exact = Fraction(match.group(0))
    if exact.denominator == 1 or exact.denominator & (exact.denominator - 1) == 0:
        return None  # an integer value or an exact binary fraction
    if exp is None and sig >= FLOAT32_TAIL_DIGITS:
        return "float32's last digits"
    return None


def violations(nb, patterns=None):
    """(code cell index as nbval counts it, rule, number, line) for every machine-dependent number."""
    patterns = sanitize_patterns() if patterns is None else patterns
    found = []
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for index, cell in enumerate(code_cells):
        if not is_compared(cell):
            continue
        allowed = {"rounding-error magnitude", "float32's last digits"} if PORTABLE.search(cell.source) else set()
        for text in compared_texts(cell, patterns):
            for m in NUMBER.finditer(text):
                rule = classify(m, text)
                if rule and rule not in allowed:
                    line = text[text.rfind("\n", 0, m.start()) + 1 :].split("\n", 1)[0]
                    found.append((index, rule, m.group(0), line.strip()[:140]))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_compared_outputs_do_not_depend_on_the_last_digits_of_floats(path):
    found = violations(nbformat.read(path, as_version=4))
    report = "\n".join(f"  Cell {i} ({rule}): {num!r} in {line!r}" for i, rule, num, line in found)
    assert not found, (
        f"{path.name}: outputs that nbval compares print CPU-dependent digits (another CPU prints others):\n{report}\n"
        "Print a bound with an assert (max |diff| < 1e-06), round to at most 5 significant digits, or start the "
        "cell with # NBVAL_IGNORE_OUTPUT and assert what must hold (tests/test_notebook_outputs.py explains the rule)."
    )


# The checker itself, on synthetic notebooks: it must fail on what broke nbval on an AVX-512 CPU.


def one_cell(source, text, name="stdout"):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name=name, text=text)]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    return nb


def rules_hit(source, text):
    return [rule for _, rule, _, _ in violations(one_cell(source, text))]


@pytest.mark.parametrize(
    "text, rule",
    [
        ("1.5377421379089355\n", "full precision"),  # print(torch.rand(3).sum().item())
        ("max |difference| of the weights: 1.4901161193847656e-08\n", "full precision"),  # lesson 02 before
        ("a/l=[[1.9125194718600635, 2.9125194718600635]]\n", "full precision"),  # lesson 12, float64 .tolist()
        ("torch.float32, mask: max |out - SDPA| 3.6e-07, max |grad - SDPA grad| 1.0e-06\n", "rounding-error magnitude"),
        ("H_kv=4: max |ours - SDPA(enable_gqa)| = 2.4e-07\n", "rounding-error magnitude"),
        ("MATH ran on cpu: max |out - MultiHeadAttention| = 0.0e+00\n", "rounding-error magnitude"),
        ("tensor([1.4901e-08, 2.0000e+00])\n", "full precision"),
        ("mean change 0.0000071\n", "rounding-error magnitude"),
        ("ratio 22.3648\n", "float32's last digits"),
    ],
)
def test_checker_flags_machine_dependent_numbers(text, rule):
    assert rule in rules_hit("print(x)", text)


@pytest.mark.parametrize(
    "text",
    [
        "max |out - SDPA| < 1e-05 and max |grad - SDPA grad| <= 1e-05\n",
        "encoder layer == nn.TransformerEncoderLayer (atol 1e-5)\n",
        "bucket  BLEU\n 1-10  99.35\n 31-40  98.48\n",  # at most 5 significant digits
        "tensor([0.2090, 0.2696, -1.8636])\n",
        "ALiBi slopes for H=4: [0.25, 0.0625, 0.015625, 0.00390625]\n",  # exact binary fractions
        "rnn_noattn  4481.0  1000.0  82117.0\n",  # integer values shown by pandas as floats
        "163,840 B, torch 2.14.1, N^2.30, lr 3e-03, gradient 3.1e-01\n",
        "1000 steps in 197.123456 s\n",  # sanitized as a duration, like nbval does
    ],
)
def test_checker_accepts_portable_numbers(text):
    assert rules_hit("print(x)", text) == []


def test_checker_skips_cells_that_nbval_does_not_compare_and_reads_the_marker():
    planted = "1.5377421379089355\n"
    assert rules_hit("# NBVAL_IGNORE_OUTPUT\nprint(torch.rand(3).sum().item())", planted) == []
    assert rules_hit("print(torch.rand(3).sum().item())", planted) == ["full precision"]
    # The marker allows float64's 6-digit values and tiny magnitudes, with a reason, never full precision.
    why = "# portable-output: float64 toy example, 1e-15 relative error\n"
    assert rules_hit(why + "print(x)", "11.7884 and 4.4e-16\n") == []
    assert rules_hit("# portable-output:\nprint(x)", "11.7884\n") == ["float32's last digits"]
    assert rules_hit(why + "print(x)", planted) == ["full precision"]
    # stderr is compared too; an HTML rendering is not
    assert [r for _, r, _, _ in violations(one_cell("x", "loss 0.1234567\n", name="stderr"))] == [
        "float32's last digits"
    ]
    nb = one_cell("x", "")
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<td>1.5377421379089355</td>"})]
    assert violations(nb) == []


def test_sanitize_file_is_read_like_nbval():
    pats = sanitize_patterns()
    assert pats and all(re.compile(regex) for regex, _ in pats)
    assert any(re.sub(regex, rep, "0x7f3a2b1c") == "0xADDRESS" for regex, rep in pats)
