"""scripts/run_stages.py, the runner behind `make test`: every stage runs, even after a failure."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "scripts" / "run_stages.py"
PY = shlex.quote(sys.executable)


def run_runner(*args, cwd):
    return subprocess.run([sys.executable, str(RUNNER), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def touch(name, code):
    """A stage that leaves a file behind (proof that it ran), then exits with `code`."""
    return f'{PY} -c \'import pathlib, sys; pathlib.Path("{name}").touch(); print("ran {name}"); sys.exit({code})\''


def test_every_stage_runs_after_a_failure_and_the_summary_names_it(tmp_path):
    out = tmp_path / "times.json"
    r = run_runner(
        "--json", str(out),
        "--stage", "first", touch("first", 1),
        "--stage", "second", touch("second", 0),
        "--stage", "third", "exit 3",
        "--stage", "fourth", touch("fourth", 0),
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert all((tmp_path / name).exists() for name in ("first", "second", "fourth"))
    # the stages' output streams through, in order, before the summary
    stdout = r.stdout
    assert stdout.index("ran first") < stdout.index("ran second") < stdout.index("ran fourth")
    summary = stdout[stdout.index("===== summary") :].splitlines()[1:]
    assert [line.split(" in ")[0] for line in summary[:4]] == [
        "stage first: failed",
        "stage second: passed",
        "stage third: failed",
        "stage fourth: passed",
    ]
    for line in summary[:4]:
        assert line.split(" in ")[1].split(" s")[0].replace(".", "").isdigit(), line
    assert summary[0].endswith("s (exit 1)") and summary[2].endswith("s (exit 3)")
    assert summary[4].startswith("total: 4 stages, 2 passed, 2 failed (first, third) in ")

    data = json.loads(out.read_text())
    assert [(s["name"], s["status"], s["returncode"]) for s in data["stages"]] == [
        ("first", "failed", 1),
        ("second", "passed", 0),
        ("third", "failed", 3),
        ("fourth", "passed", 0),
    ]
    assert all(s["seconds"] >= 0 for s in data["stages"])
    assert data["total_seconds"] >= sum(s["seconds"] for s in data["stages"]) - 0.1

    # --report prints each stage's time again
    rep = run_runner("--report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    for s in data["stages"]:
        (line,) = [ln for ln in lines if ln.split()[:2] == [s["name"], s["status"]]]
        assert line.endswith(f"{s['seconds']:.1f} s")
    assert lines[-1].startswith("total: 4 stages, 2 passed, 2 failed (first, third)")


def test_all_passed_exits_zero_and_a_stage_gets_its_environment(tmp_path):
    r = run_runner(
        "--stage", "lint", f"{PY} -c 'exit(0)'",
        "--stage", "numeric", f"X_STAGE=7 {PY} -c 'import os, sys; sys.exit(int(os.environ[\"X_STAGE\"]) - 7)'",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stage lint: passed in " in r.stdout and "stage numeric: passed in " in r.stdout
    assert "total: 2 stages, 2 passed, 0 failed in " in r.stdout


def test_pytest_selecting_no_test_is_a_failure_that_says_so(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    r = run_runner(
        "--stage", "numeric", f"{PY} -m pytest -p no:cacheprovider -q -m no_such_marker test_x.py", cwd=tmp_path
    )
    assert r.returncode == 1
    assert "stage numeric: failed in " in r.stdout
    assert "(exit 5: pytest: no test was selected" in r.stdout


def test_only_runs_the_named_stages(tmp_path):
    r = run_runner("--only", "b", "--stage", "a", touch("a", 1), "--stage", "b", touch("b", 0), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "a").exists() and (tmp_path / "b").exists()
    assert "stage a: not run" in r.stdout and "total: 1 stages, 1 passed, 0 failed in " in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give at least one --stage NAME COMMAND"),
        (["--stage", "a", "true", "--stage", "a", "true"], "each name must be unique, got a more than once"),
        (["--only", "zz", "--stage", "a", "true"], "--only: expected stage names among a, got zz"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(tmp_path, args, message):
    r = run_runner(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr
