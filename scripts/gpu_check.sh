#!/usr/bin/env bash
# The gpu profile on a GPU machine, in one go (scripts/GPU.md says how to run it and what it writes):
#   1. installs fastai, nbval and a Jupyter kernel from build/gpu-wheels (scripts/gpu_wheels.sh),
#      each with --no-deps, so the machine's own torch stays; then attnlab itself (editable);
#   2. runs the training lessons under pytest --nbval-lax with ATTNLAB_PROFILE=gpu, side by side
#      (one process per lesson, each with its own timeout), and prints each lesson's wall time;
#   3. benchmarks the gpu presets' training (scripts/gpu_bench.py: steps/s, tokens/s, peak memory
#      against attnlab.training.estimate.estimate, fp32 and bf16), and every benchmarks/ script that has a
#      --device option;
#   4. leaves under $OUT: gpu_check.log, summary.json, gpu_check_files.tar.gz (per-lesson logs and
#      JUnit files, the runs' results renamed data/results/<name>_gpu.json, the benchmark's JSON).
# The whole script stays inside --total seconds (default 470, for an 8-minute slot): every stage's
# timeout is cut to the time left, keeping a reserve for writing the results.
#
#   scripts/gpu_check.sh [--rehearse] [--strict] [--lessons "01 02 03 06 08"] [--jobs N] [--total S]
#                        [--lesson-limit S] [--bench-steps N] [--bench-limit S]
#
# --rehearse: the same script on a machine without a GPU (ATTNLAB_PROFILE=gpu forced, every step
#   budget capped by ATTNLAB_MAX_STEPS=3, no installs, the course venv's python, one lesson at a
#   time on one thread, a one-step benchmark with a longer limit).
# --strict: compare every cell's output as `make test` does (--nbval) instead of --nbval-lax; the
#   saved outputs are the cpu profile's, so a gpu run differs wherever a cell prints a model size.
# shellcheck disable=SC2317  # the stages' functions run through `stage` (bash -c), which shellcheck cannot see
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2

REHEARSE=0 STRICT=0 LESSONS="01 02 03 06 08" JOBS="" TOTAL=470 LESSON_LIMIT=330 BENCH_STEPS=60
RESERVE=15 BENCH_LIMIT=""
ARGS=("$@")
while (($#)); do
    case $1 in
        --rehearse) REHEARSE=1 ;;
        --strict) STRICT=1 ;;
        --lessons) LESSONS=$2; shift ;;
        --jobs) JOBS=$2; shift ;;
        --total) TOTAL=$2; shift ;;
        --lesson-limit) LESSON_LIMIT=$2; shift ;;
        --bench-steps) BENCH_STEPS=$2; shift ;;
        --bench-limit) BENCH_LIMIT=$2; shift ;;
        -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

if ((REHEARSE)); then
    OUT=${OUT:-$ROOT/build/gpu-rehearsal}
    PY=${PYTHON:-$ROOT/.venv/bin/python}
else
    OUT=${OUT:-$ROOT/build/gpu-check}
    PY=${PYTHON:-python3}
fi
mkdir -p "$OUT"

# The whole run under one timeout, its output kept in $OUT/gpu_check.log even if it is killed.
if [[ -z ${GPU_CHECK_CHILD:-} ]]; then
    GPU_CHECK_CHILD=1 timeout -k 10 $((TOTAL + 20)) bash "$0" "${ARGS[@]}" 2>&1 | tee "$OUT/gpu_check.log"
    rc=${PIPESTATUS[0]}
    ((rc == 124 || rc == 137)) && echo "gpu_check: killed by its total timeout ($((TOTAL + 20)) s)" | tee -a "$OUT/gpu_check.log"
    exit "$rc"
fi

DEADLINE=$((SECONDS + TOTAL))
left() { echo $((DEADLINE - SECONDS - RESERVE)); }
WORK=$ROOT/build/gpu-check-work  # everything that goes into the tarball
rm -rf "$WORK"
mkdir -p "$WORK/results" "$WORK/lessons"
STAGES=$WORK/stages.tsv
: >"$STAGES"

# stage NAME LIMIT CMD...: run CMD (a command, or a function of this script) under a timeout cut to
# the time left; one line in stages.tsv.
stage() {
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    (($(left) < limit)) && limit=$(left)
    if ((limit < 5)); then
        echo "== $name: skipped, no time left"
        printf '%s\t%s\t%s\n' "$name" skipped 0 >>"$STAGES"
        return 124
    fi
    echo "== $name (limit ${limit} s): $*"
    if declare -F "$1" >/dev/null; then  # timeout runs programs: a function goes through bash -c
        timeout -k 5 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")"
    else
        timeout -k 5 "$limit" "$@"
    fi
    rc=$?
    echo "== $name: rc=$rc in $((SECONDS - t0)) s"
    printf '%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) >>"$STAGES"
    return "$rc"
}

export ATTNLAB_PROFILE=gpu PYTHONUNBUFFERED=1 MPLBACKEND=Agg ROOT PY REHEARSE
if ((REHEARSE)); then
    # One thread, as the cpu profile: on a busy 2-core machine two threads made a step ~10x slower.
    export ATTNLAB_MAX_STEPS=3 CUDA_VISIBLE_DEVICES="" ATTNLAB_THREADS=1
    JOBS=${JOBS:-1} BENCH_LIMIT=${BENCH_LIMIT:-300}
else
    unset ATTNLAB_MAX_STEPS
    JOBS=${JOBS:-$(wc -w <<<"$LESSONS")} BENCH_LIMIT=${BENCH_LIMIT:-80}
    ((JOBS > 0)) || JOBS=1
    CORES=$(nproc)
    export ATTNLAB_THREADS=$((CORES / JOBS > 0 ? CORES / JOBS : 1))
fi

# The runs write below a data/ folder of their own: the shipped checkpoints and results (which the
# lessons read) are linked in, so the repository's data/runs (a learner's runs) is never touched.
DATA=$WORK/data
mkdir -p "$DATA/runs"
for d in checkpoints results; do ln -s "$ROOT/data/$d" "$DATA/$d"; done
if [[ -d $ROOT/data/corpus ]]; then ln -s "$ROOT/data/corpus" "$DATA/corpus"; else mkdir -p "$DATA/corpus"; fi
export ATTNLAB_DATA_DIR=$DATA

echo "gpu_check: rehearse=$REHEARSE strict=$STRICT lessons='$LESSONS' jobs=$JOBS threads=$ATTNLAB_THREADS" \
    "total=${TOTAL}s python=$PY out=$OUT"

# ---------------------------------------------------------------- 1. the machine, then the installs
machine() {
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PY" - "$REHEARSE" <<'EOF'
import platform, sys
import torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    print(f"device: {torch.cuda.get_device_name()}, bf16: {torch.cuda.is_bf16_supported()}")
elif sys.argv[1] != "1":
    sys.exit("gpu_check: no CUDA device here; use --rehearse for the CPU rehearsal")
EOF
}

install() {
    local wheels=("$ROOT"/build/gpu-wheels/*.whl) site
    if [[ ! -e ${wheels[0]} ]]; then
        echo "no wheels in build/gpu-wheels: run scripts/gpu_wheels.sh where pip can download, and carry build/gpu-wheels"
        return 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
        "${wheels[@]}" || return
    if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e "$ROOT"; then
        site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "editable install failed (an old setuptools?): putting $ROOT/lib on the path instead"
        echo "$ROOT/lib" >"$site/attnlab-dev.pth" || return
    fi
    "$PY" -m ipykernel install --sys-prefix --name attnlab --display-name "Attention Lab" >/dev/null || return
}

imports() {
    "$PY" -c '
import attnlab.training.experiments, attnlab.training.train, fastai, fastprogress, ipykernel, ipywidgets, nbformat, nbval, sacrebleu
import torch
print("imports ok: fastai", fastai.__version__, "| nbval", nbval.__version__, "| ipykernel", ipykernel.__version__,
      "| sacrebleu", sacrebleu.__version__, "| torch", torch.__version__, "| attnlab from", attnlab.__file__)'
}

corpus() {  # both pairs, side by side; a cache that is there already is only read
    local fr ko rc=0
    "$PY" -c 'from attnlab import corpus; corpus.load_splits(target="fr")' &
    fr=$!
    "$PY" -c 'from attnlab import corpus; corpus.load_splits(target="ko")' &
    ko=$!
    wait "$fr" || rc=$?
    wait "$ko" || rc=$?
    return "$rc"
}

stage machine 60 machine || exit 2
if ((!REHEARSE)); then
    stage install 120 install || exit 2
fi
stage imports 60 imports || exit 2
stage corpus 150 corpus || exit 2

# ---------------------------------------------------------------- 2. the lessons
NBVAL=(--nbval-lax)
((STRICT)) && NBVAL=(--nbval)
NBVAL+=(--nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg)

lesson() {  # lesson N LIMIT: one notebook in its own pytest; writes lessons/N.{log,xml,rc}
    local n=$1 limit=$2 t0=$SECONDS rc nb
    nb=(notebooks/"$n"_*.ipynb)
    if [[ ! -e ${nb[0]} ]]; then
        echo "no notebook notebooks/${n}_*.ipynb" >"$WORK/lessons/$n.log"
        printf '%s\t%s\t%s\n' "$n" 2 0 >"$WORK/lessons/$n.rc"
        return
    fi
    timeout -k 5 "$limit" "$PY" -m pytest -p no:cacheprovider -q "${NBVAL[@]}" --nbval-cell-timeout "$limit" \
        --junitxml "$WORK/lessons/$n.xml" "${nb[0]}" >"$WORK/lessons/$n.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\n' "$n" "$rc" $((SECONDS - t0)) >"$WORK/lessons/$n.rc"
}

lessons_t0=$SECONDS
for n in $LESSONS; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
    limit=$(($(left) - BENCH_LIMIT))
    ((limit > LESSON_LIMIT)) && limit=$LESSON_LIMIT
    if ((limit < 10)); then
        echo "== lesson $n: skipped, no time left"
        printf '%s\t%s\t%s\n' "$n" skipped 0 >"$WORK/lessons/$n.rc"
        continue
    fi
    echo "== lesson $n started (limit ${limit} s)"
    lesson "$n" "$limit" &
done
wait
LESSONS_FAILED=0
echo "== lessons: $((SECONDS - lessons_t0)) s of wall time for '$LESSONS' ($JOBS at a time)"
printf '%-7s %5s %8s\n' lesson rc wall_s
for n in $LESSONS; do
    IFS=$'\t' read -r _ rc wall <"$WORK/lessons/$n.rc"
    printf '%-7s %5s %8s\n' "$n" "$rc" "$wall"
    printf '%s\t%s\t%s\n' "lesson_$n" "$rc" "$wall" >>"$STAGES"
    if [[ $rc != 0 ]]; then
        LESSONS_FAILED=1
        echo "---- lesson $n: the end of its log"
        tail -n 60 "$WORK/lessons/$n.log"
    fi
done

# The runs' results, named by profile: data/runs/results/bahdanau.json -> data/results/bahdanau_gpu.json.
for f in "$DATA"/runs/results/*.json; do
    [[ -e $f ]] && cp "$f" "$WORK/results/$(basename "$f" .json)_gpu.json"
done

# ---------------------------------------------------------------- 3. benchmarks
BENCH_FAILED=0
if ((REHEARSE)); then bench_args=(--steps 1 --warmup 1); else bench_args=(--steps "$BENCH_STEPS"); fi
stage gpu_bench "$BENCH_LIMIT" "$PY" scripts/gpu_bench.py "${bench_args[@]}" --out "$WORK/results/bench_train_gpu.json" ||
    BENCH_FAILED=1
for b in benchmarks/bench_*.py; do
    name=$(basename "$b" .py)
    if "$PY" "$b" --help 2>/dev/null | grep -q -- '--device'; then
        # shellcheck disable=SC2016  # expanded by the inner bash
        stage "$name" 60 bash -c '"$1" "$2" --device "$3" >"$4"' _ "$PY" "$b" \
            "$( ((REHEARSE)) && echo cpu || echo cuda)" "$WORK/results/${name}_gpu.txt" || BENCH_FAILED=1
    else
        echo "== $name: skipped (no --device option: it measures the CPU only)"
        printf '%s\t%s\t%s\n' "$name" "skipped (no --device)" 0 >>"$STAGES"
    fi
done

# ---------------------------------------------------------------- 4. what comes back
"$PY" - "$WORK" "$OUT/summary.json" "$REHEARSE" "$STRICT" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
stages = [dict(zip(("stage", "rc", "wall_s"), line.split("\t"))) for line in (work / "stages.tsv").read_text().splitlines()]
lessons = {}
for xml in sorted((work / "lessons").glob("*.xml")):
    suite = ET.parse(xml).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    cells = suite.findall("testcase")
    slow = sorted(cells, key=lambda c: -float(c.get("time", 0)))[:3]
    lessons[xml.stem] = {
        "cells": len(cells),
        "failed": sum(1 for c in cells if c.find("failure") is not None or c.find("error") is not None),
        "cells_s": round(sum(float(c.get("time", 0)) for c in cells), 1),
        "slowest": [f"{c.get('name')}: {float(c.get('time', 0)):.1f} s" for c in slow],
        "failures": [c.get("name") for c in cells if c.find("failure") is not None or c.find("error") is not None],
    }
runs = {}
for f in sorted((work / "results").glob("*_gpu.json")):
    r = json.loads(f.read_text())
    if "bleu" not in r:
        continue
    secs = r.get("train_seconds") or 0
    keys = ("bleu", "exact_match", "train_steps", "train_seconds", "tokens_per_second", "peak_memory_bytes",
            "profile", "budget", "budget_capped_by")  # peak_memory_bytes: once experiments.run records it
    runs[f.stem] = {k: r.get(k) for k in keys}
    runs[f.stem]["steps_per_second"] = round(r["train_steps"] / secs, 2) if secs else None
bench = work / "results" / "bench_train_gpu.json"
summary = {"rehearse": sys.argv[3] == "1", "strict": sys.argv[4] == "1", "stages": stages, "lessons": lessons,
           "runs": runs, "bench": json.loads(bench.read_text()) if bench.exists() else None}
out.write_text(json.dumps(summary, indent=1) + "\n")
for name, r in runs.items():
    print(f"{name:28s} BLEU {r['bleu']:6.2f}  exact {r['exact_match']:.3f}  {r['train_steps']} steps "
          f"in {r['train_seconds']} s ({r['steps_per_second']} steps/s, {r['tokens_per_second']} tokens/s)")
for name, l in lessons.items():
    print(f"lesson {name}: {l['cells']} cells, {l['failed']} failed, {l['cells_s']} s in cells; slowest: "
          + "; ".join(l["slowest"]))
EOF
tar -czf "$OUT/gpu_check_files.tar.gz" -C "$WORK" --exclude data . &&
    echo "gpu_check: wrote $OUT/summary.json and $OUT/gpu_check_files.tar.gz ($(du -h "$OUT/gpu_check_files.tar.gz" | cut -f1))"
echo "gpu_check: done in $SECONDS s; lessons $([[ $LESSONS_FAILED == 0 ]] && echo green || echo FAILED)," \
    "benchmarks $([[ $BENCH_FAILED == 0 ]] && echo ok || echo FAILED)"
exit $((LESSONS_FAILED || BENCH_FAILED))
