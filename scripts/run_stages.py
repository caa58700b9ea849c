"""Run named test stages, every one of them even when one fails (`make test`).

    python scripts/run_stages.py --json build/stage_times.json \\
        --stage lint "ruff check lib" --stage unit "pytest -n 2 tests" \\
        --stage browser "pytest tests/browser" --stage notebooks "pytest -n 2 --nbval notebooks" \\
        --together browser,notebooks
    python scripts/run_stages.py --report build/stage_times.json

Each stage is a shell command (bash, so `VAR=value cmd` works). Stages run one after another in the
order given, and their output streams through as they run; the stages of a `--together` group start
at the same time (where the first of them stands in the order) and the next stage waits for all of
them. A stage that only keeps one core busy (a single process) can so share the machine with another
one. A stage of a group writes its output to `<log dir>/<name>.log`, printed whole when it ends, so
that two stages' lines never interleave. At the end one line per stage,
`stage <name>: passed|failed in <seconds> s` (its own wall time; `, beside <names>` for a group), and a
total line with the wall time of the whole run; the exit status is 1 when any stage failed (0 when all
passed). With --aim SECONDS, a last line compares the whole run's wall time with that aim (`aim: …
met, … s to spare` or `NOT met, … s over`); only when every stage ran, and it never changes the exit
status: a speed target is reported, not asserted. The figures go to the --json file, which --report
prints again later. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

# pytest's exit statuses that deserve a sentence in the summary.
PYTEST_EXIT = {
    2: "interrupted or a usage error",
    3: "internal error",
    4: "command line usage error",
    5: "no test was selected: a marker or path that selects nothing",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--stage",
        nargs=2,
        action="append",
        metavar=("NAME", "COMMAND"),
        default=[],
        help="a stage: its name and its shell command (repeat; stages run in the order given)",
    )
    p.add_argument("--json", metavar="PATH", help="write every stage's status and seconds to this JSON file")
    p.add_argument(
        "--only",
        metavar="NAMES",
        help="comma-separated stage names to run (the others are listed as not run); default: all",
    )
    p.add_argument(
        "--together",
        action="append",
        metavar="NAMES",
        default=[],
        help="comma-separated stage names that run at the same time (repeat for several groups)",
    )
    p.add_argument(
        "--log-dir", default="build/stage_logs", help="where the stages of a --together group write their output"
    )
    p.add_argument("--report", metavar="PATH", help="print the stage times saved in PATH by an earlier run, and exit")
    p.add_argument(
        "--aim",
        type=float,
        metavar="SECONDS",
        help="the wall time the whole run aims at: the summary says whether it was met (the exit status does not)",
    )
    args = p.parse_args(argv)
    if args.aim is not None and not args.aim > 0:
        p.error(f"--aim: expected a number of seconds > 0, got {args.aim:g}")
    if args.report is None and not args.stage:
        p.error("give at least one --stage NAME COMMAND (or --report PATH)")
    names = [name for name, _ in args.stage]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        p.error(f"--stage: each name must be unique, got {', '.join(duplicates)} more than once")
    if args.only is not None:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in only if n not in names]
        if unknown:
            p.error(f"--only: expected stage names among {', '.join(names)}, got {', '.join(unknown)}")
        args.only = only
    groups, grouped = [], set()
    for text in args.together:
        group = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in group if n not in names]
        if unknown:
            p.error(f"--together: expected stage names among {', '.join(names)}, got {', '.join(unknown)}")
        if len(set(group)) < 2:
            p.error(f"--together: a group needs two or more different stages, got {text!r}")
        twice = sorted(grouped & set(group))
        if twice:
            p.error(f"--together: a stage may be in one group only, got {', '.join(twice)} in two")
        grouped |= set(group)
        groups.append(group)
    args.together = groups
    return args


def failure_reason(command, returncode):
    """A few words on why a stage failed, from its exit status (pytest's statuses are named)."""
    if returncode < 0:
        return f"killed by signal {-returncode}"
    if returncode == 127:
        return "exit 127: command not found"
    if "pytest" in command and returncode in PYTEST_EXIT:
        return f"exit {returncode}: pytest: {PYTEST_EXIT[returncode]}"
    return f"exit {returncode}"


def summary_line(stage):
    if stage["status"] == "not run":
        return f"stage {stage['name']}: not run"
    line = f"stage {stage['name']}: {stage['status']} in {stage['seconds']:.1f} s"
    if stage.get("beside"):
        line += f", beside {', '.join(stage['beside'])}"
    if stage["status"] != "passed":
        line += f" ({stage['reason']})"
    return line


def total_line(stages, seconds):
    ran = [s for s in stages if s["status"] != "not run"]
    failed = [s["name"] for s in ran if s["status"] != "passed"]
    text = f"total: {len(ran)} stages, {len(ran) - len(failed)} passed, {len(failed)} failed"
    if failed:
        text += f" ({', '.join(failed)})"
    return text + f" in {seconds:.1f} s"


def aim_line(stages, seconds, aim):
    """The line that compares the run's wall time with ``aim`` seconds; None when there is no aim or
    some stage did not run or was interrupted (the aim is for the whole run)."""
    if aim is None or any(s["status"] in ("not run", "interrupted") for s in stages):
        return None
    if seconds <= aim:
        return f"aim: the whole run in {aim:g} s: met, {aim - seconds:.0f} s to spare"
    return f"aim: the whole run in {aim:g} s: NOT met, {seconds - aim:.0f} s over"


def banner(text):
    print(f"\n===== {text} =====", flush=True)


def _finish(entry, returncode, start):
    entry.update(returncode=returncode, seconds=round(time.monotonic() - start, 2))
    entry["status"] = "passed" if returncode == 0 else "failed"
    if returncode != 0:
        entry["reason"] = failure_reason(entry["command"], returncode)


def _run_group(entries, shell, log_dir):
    """Start the stages of ``entries`` at once, each writing to its log; print each log whole as it ends."""
    os.makedirs(log_dir, exist_ok=True)
    running = {}
    names = [e["name"] for e in entries]
    banner(f"stages {', '.join(names)} at the same time (each one's output follows when it ends)")
    try:
        for entry in entries:
            entry["beside"] = [n for n in names if n != entry["name"]]
            log_path = os.path.join(log_dir, f"{entry['name']}.log")
            log = open(log_path, "w")
            proc = subprocess.Popen(
                entry["command"], shell=True, executable=shell, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: Ctrl-C here stops all of it
            )  # fmt: skip
            running[entry["name"]] = (entry, proc, log, log_path, time.monotonic())
        while running:
            for name, (entry, proc, log, log_path, start) in list(running.items()):
                returncode = proc.poll()
                if returncode is None:
                    continue
                del running[name]
                log.close()
                _finish(entry, returncode, start)
                banner(f"stage {name}: {entry['command']} (output of {log_path})")
                with open(log_path) as f:
                    sys.stdout.write(f.read())
                print(f"----- {summary_line(entry)}", flush=True)
            time.sleep(0.5)
    except KeyboardInterrupt:
        for entry, proc, log, _, start in running.values():
            try:
                os.killpg(proc.pid, 2)
            except ProcessLookupError:
                pass
            proc.wait()
            log.close()
            entry.update(status="interrupted", returncode=130, seconds=round(time.monotonic() - start, 2))
            entry["reason"] = "Ctrl-C"
        return True
    return False


def run_stages(stages, only=None, shell="/bin/bash", together=(), log_dir="build/stage_logs"):
    """Run every stage (a list of (name, command)) in order, the stages of a ``together`` group at once.

    Returns one dict per stage. Ctrl-C stops the stages running and the ones after them (they are listed
    as not run).
    """
    shell = shell if os.path.exists(shell) else None
    group_of = {name: group for group in together for name in group}
    results = [
        {"name": name, "command": command, "status": "not run", "returncode": None, "seconds": None}
        for name, command in stages
    ]
    by_name = {e["name"]: e for e in results}
    started = set()
    interrupted = False
    for entry in results:
        name, command = entry["name"], entry["command"]
        if interrupted or name in started or (only is not None and name not in only):
            continue
        if name in group_of:
            members = [by_name[n] for n in group_of[name] if only is None or n in only]
            started |= {e["name"] for e in members}
            if len(members) > 1:
                interrupted = _run_group(members, shell, log_dir)
                continue
        banner(f"stage {name}: {command}")
        start = time.monotonic()
        try:
            returncode = subprocess.call(command, shell=True, executable=shell)
        except KeyboardInterrupt:
            interrupted = True
            entry.update(status="interrupted", returncode=130, seconds=round(time.monotonic() - start, 2))
            entry["reason"] = "Ctrl-C"
            continue
        _finish(entry, returncode, start)
        print(f"----- {summary_line(entry)}", flush=True)
    return results


def write_json(path, results, total_seconds, load_before, aim=None):
    data = {
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "total_seconds": round(total_seconds, 2),
        "aim_seconds": aim,
        "host": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": _loadavg(),
        },
        "stages": results,
    }
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # not on every platform
        return None


def report(path):
    """Print the stage times saved by an earlier run (exit status 0: a report, not a verdict)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        print(f"--report: no file {path}; `make test` (scripts/run_stages.py --json {path}) writes it", file=sys.stderr)
        return 2
    stages = data["stages"]
    host = data.get("host", {})
    load = host.get("load_average_before")
    print(
        f"stage times from {path} (finished {data.get('finished', '?')}, {host.get('cpus', '?')} CPUs, "
        f"load average before {load if load is not None else '?'}):"
    )
    width = max(len(s["name"]) for s in stages)
    for s in stages:
        seconds = "" if s["seconds"] is None else f"{s['seconds']:9.1f} s"
        beside = f"  (beside {', '.join(s['beside'])})" if s.get("beside") else ""
        print(f"  {s['name']:<{width}}  {s['status']:<11}{seconds}{beside}")
    print(total_line(stages, data["total_seconds"]))
    aim = aim_line(stages, data["total_seconds"], data.get("aim_seconds"))
    if aim:
        print(aim)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.report is not None:
        return report(args.report)
    load_before = _loadavg()
    start = time.monotonic()
    results = run_stages(args.stage, only=args.only, together=args.together, log_dir=args.log_dir)
    total = time.monotonic() - start
    banner("summary")
    for entry in results:
        print(summary_line(entry))
    print(total_line(results, total), flush=True)
    aim = aim_line(results, total, args.aim)
    if aim:
        print(aim, flush=True)
    if args.json:
        write_json(args.json, results, total, load_before, args.aim)
    if any(e["status"] == "interrupted" for e in results):
        return 130
    return 1 if any(e["status"] == "failed" for e in results) else 0


if __name__ == "__main__":
    sys.exit(main())
