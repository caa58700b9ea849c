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
        "--stage",
        "numeric",
        # no plugin autoload: the installed plugins (playwright, nbval, xdist, ...) took most of this test's time
        f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -p no:cacheprovider -q -m no_such_marker test_x.py",
        cwd=tmp_path,
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


def sleeper(name, seconds, code=0):
    """A stage that prints, sleeps, leaves its file and exits with ``code``."""
    return (
        f"{PY} -c 'import pathlib, sys, time; print(\"start {name}\", flush=True); time.sleep({seconds}); "
        f"pathlib.Path(\"{name}\").touch(); print(\"end {name}\"); sys.exit({code})'"
    )


def test_a_together_group_runs_at_once_and_each_stage_keeps_its_own_output_and_time(tmp_path):
    out = tmp_path / "times.json"
    r = run_runner(
        "--json", str(out), "--log-dir", str(tmp_path / "logs"),
        "--stage", "first", touch("first", 0),
        "--stage", "slow", sleeper("slow", 2.0, 1),
        "--stage", "quick", sleeper("quick", 0.2),
        "--stage", "last", touch("last", 0),
        "--together", "slow,quick",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    stdout = r.stdout
    # the group ran at once: the quick stage ended (and its whole output was printed) before the slow one
    assert stdout.index("ran first") < stdout.index("start quick") < stdout.index("end quick")
    assert stdout.index("end quick") < stdout.index("start slow") < stdout.index("end slow") < stdout.index("ran last")
    assert stdout.index("start quick") < stdout.index("end quick") < stdout.index("start slow")  # never interleaved
    assert (tmp_path / "logs" / "slow.log").read_text().splitlines() == ["start slow", "end slow"]
    data = {s["name"]: s for s in json.loads(out.read_text())["stages"]}
    assert data["slow"]["status"] == "failed" and data["quick"]["status"] == "passed"
    assert data["slow"]["beside"] == ["quick"] and data["quick"]["beside"] == ["slow"] and "beside" not in data["last"]
    assert data["slow"]["seconds"] >= 2.0 > data["quick"]["seconds"]
    # the whole run took about the slow stage's time, not the sum of the two
    assert json.loads(out.read_text())["total_seconds"] < data["slow"]["seconds"] + data["quick"]["seconds"] + 1.5
    summary = stdout[stdout.index("===== summary") :]
    assert "stage slow: failed in " in summary and ", beside quick (exit 1)" in summary
    assert "stage quick: passed in " in summary and ", beside slow" in summary
    rep = run_runner("--report", str(out), cwd=tmp_path)
    assert "(beside quick)" in rep.stdout


def test_only_one_stage_of_a_group_runs_alone_and_streams(tmp_path):
    r = run_runner(
        "--only", "a", "--log-dir", str(tmp_path / "logs"),
        "--stage", "a", touch("a", 0), "--stage", "b", touch("b", 0), "--together", "a,b",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "logs").exists()
    assert "stage a: passed in " in r.stdout and "beside" not in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--stage", "a", "true", "--together", "a,zz"], "--together: expected stage names among a, got zz"),
        (["--stage", "a", "true", "--together", "a"], "--together: a group needs two or more different stages"),
        (
            ["--stage", "a", "true", "--stage", "b", "true", "--stage", "c", "true", "--together", "a,b",
             "--together", "b,c"],
            "--together: a stage may be in one group only, got b in two",
        ),
    ],
)
def test_bad_groups_are_refused_with_a_clear_message(tmp_path, args, message):
    r = run_runner(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr


def test_the_aim_line_says_met_or_not_met_and_never_changes_the_exit_status(tmp_path):
    out = tmp_path / "times.json"
    met = run_runner("--json", str(out), "--aim", "600", "--stage", "a", touch("a", 0), cwd=tmp_path)
    assert met.returncode == 0, met.stdout + met.stderr
    last = met.stdout.strip().splitlines()[-1]
    assert last.startswith("aim: the whole run in 600 s: met, ") and last.endswith(" s to spare"), last
    assert json.loads(out.read_text())["aim_seconds"] == 600
    assert run_runner("--report", str(out), cwd=tmp_path).stdout.strip().splitlines()[-1] == last
    # over the aim: said, but the run passed all the same
    slow = run_runner("--aim", "0.2", "--stage", "slow", sleeper("slow", 0.5), cwd=tmp_path)
    assert slow.returncode == 0, slow.stdout + slow.stderr
    assert slow.stdout.strip().splitlines()[-1].startswith("aim: the whole run in 0.2 s: NOT met, ")
    # the aim is for the whole run: no line when some stages did not run, nor without --aim
    part = run_runner("--aim", "600", "--only", "a", "--stage", "a", touch("a", 0), "--stage", "b", touch("b", 0), cwd=tmp_path)
    assert part.returncode == 0 and "aim:" not in part.stdout
    assert "aim:" not in run_runner("--stage", "a", touch("a", 0), cwd=tmp_path).stdout


@pytest.mark.parametrize("aim", ["0", "-5"])
def test_an_aim_that_is_not_positive_is_refused(tmp_path, aim):
    r = run_runner("--aim", aim, "--stage", "a", touch("a", 0), cwd=tmp_path)
    assert r.returncode == 2 and "--aim: expected a number of seconds > 0" in r.stderr, r.stderr


def test_make_test_reports_the_twelve_minute_aim():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "TEST_AIM_SECONDS := 720" in makefile and "$(RUN_STAGES) --aim $(TEST_AIM_SECONDS)" in makefile
