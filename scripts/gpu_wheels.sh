#!/usr/bin/env bash
# Download, on an internet-connected machine, the wheels that scripts/gpu_check.sh installs on a GPU
# machine that has PyTorch but no registry access (and no fastai, Jupyter or nbval).
#
#   scripts/gpu_wheels.sh [DEST]        # default DEST: build/gpu-wheels (ignored by git)
#
# Versions come from constraints.txt (the ones the course is tested with), so the GPU run uses the
# same fastai, nbval and kernel as CI. Wheels only (--only-binary), for CPython 3.12 on x86-64
# Linux (the GPU image's python3), each without its dependencies (--no-deps): the list below IS
# the dependency set, chosen as "what the course imports on the GPU path, minus what the GPU image
# already has" (see scripts/GPU.md). Left out on purpose:
#   torch, torchvision, triton, nvidia-*: the GPU machine's own CUDA build must stay;
#   spaCy (fastai requires it, but only fastai.text's tokenizers import it; the course's Learner
#   path does not) and everything only spaCy needs; matplotlib, numpy, pandas, scipy, scikit-learn,
#   safetensors, sentencepiece, accelerate, pytest, rich, ...: already in the GPU image;
#   python-fasthtml's server-side needs (uvicorn, oauthlib, beautifulsoup4, httpx2): fastprogress
#   imports fasthtml.common, which imports starlette, itsdangerous and python-multipart only;
#   what nbval's kernel can do without, 12.6 MB of the 28: debugpy (ipykernel checks for it and
#   runs without a debugger), jedi + parso (IPython completes without them), and
#   widgetsnbextension + jupyterlab_widgets (front-end files of the widgets; Python never imports them).
# A wheel whose pin has no cp312 build is a hard error (pick the nearest release by hand, pin it
# in EXTRA_PINS below and say so in GPU.md). The script prints each wheel, the total size, and the
# requirements of the downloaded wheels that neither the set nor the GPU image covers.
set -euo pipefail

cd "$(dirname "$0")/.."
DEST=${1:-build/gpu-wheels}
PY=${PYTHON:-.venv/bin/python}
PYVER=${GPU_PYTHON_VERSION:-3.12}  # the GPU image's python3 (another value: a local stand-in, see GPU.md)
ABI=cp${PYVER//./}
LIMIT_MB=60

# What the GPU image lacks, by the name constraints.txt pins it under.
PACKAGES=(
    # fastai and its own pure-Python stack
    fastai fastcore fastprogress fastdownload fasttransform plum-dispatch beartype
    python-fasthtml starlette itsdangerous python-multipart
    # nbval and a Jupyter kernel
    nbval nbformat fastjsonschema jsonschema jsonschema-specifications referencing rpds-py
    jupyter_client jupyter_core platformdirs pyzmq tornado traitlets
    ipykernel comm nest-asyncio2 matplotlib-inline
    ipython ipython_pygments_lexers pexpect ptyprocess prompt_toolkit wcwidth
    stack-data executing asttokens pure_eval
    # the lessons' widgets, Korean plot labels (a font, 8 MB), and the course's own BLEU version
    ipywidgets koreanize-matplotlib sacrebleu
)
# Pins that differ from constraints.txt (NAME==VERSION), for a pin without a cp312 wheel.
EXTRA_PINS=()

norm() { tr '[:upper:]_.' '[:lower:]--' <<<"$1"; }

pins=()
for name in "${PACKAGES[@]}"; do
    want=$(norm "$name")
    pin=""
    for extra in "${EXTRA_PINS[@]}"; do
        [[ $(norm "${extra%%==*}") == "$want" ]] && pin=$extra
    done
    if [[ -z $pin ]]; then
        while IFS= read -r line; do
            [[ $line == \#* || $line != *==* ]] && continue
            [[ $(norm "${line%%==*}") == "$want" ]] && pin=$line
        done <constraints.txt
    fi
    if [[ -z $pin ]]; then
        echo "gpu_wheels: $name is not pinned in constraints.txt (add it to EXTRA_PINS)" >&2
        exit 2
    fi
    pins+=("$pin")
done

rm -rf "$DEST"
mkdir -p "$DEST"
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "$ABI" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any \
    -d "$DEST" "${pins[@]}" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)

# The list, the total, and what the downloaded wheels require that nothing here provides.
"$PY" - "$DEST" "$LIMIT_MB" "$PYVER" <<'EOF'
import re
import sys
import zipfile
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

dest, limit_mb, pyver = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
# The GPU image's Python packages (KINDS.md of the device tool, read 2026-11-17): they stay as they are.
IMAGE = set("""accelerate aiofiles anyio attrs certifi charset-normalizer click cloudpickle colorama contourpy
coverage cycler filelock fonttools fsspec h11 httpcore httpx idna iniconfig jinja2 joblib kiwisolver lxml
markdown-it-py markupsafe matplotlib mdurl narwhals numpy packaging pandas pillow pluggy portalocker psutil
pygments pyparsing pytest pytest-xdist execnet python-dateutil pyyaml regex requests rich safetensors
scikit-learn scipy sentencepiece setuptools six tabulate threadpoolctl torch torchvision tqdm typing-extensions
urllib3 sacrebleu""".split())
# Required by a wheel here but not needed on the course's GPU path (see the header of gpu_wheels.sh).
NOT_NEEDED = {"spacy", "uvicorn", "oauthlib", "beautifulsoup4", "httpx2", "pip", "debugpy", "jedi",
              "widgetsnbextension", "jupyterlab-widgets"}
env = {"python_version": pyver, "python_full_version": f"{pyver}.0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
wheels = sorted(dest.glob("*.whl"))
have = {norm(w.name.split("-")[0]) for w in wheels}
missing = {}
for w in wheels:
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and not Marker(str(req.marker)).evaluate(env):
                continue
            n = norm(req.name)
            if n not in have and n not in IMAGE and n not in NOT_NEEDED:
                missing.setdefault(n, []).append(w.name.split("-")[0])
total = 0
for w in wheels:
    total += w.stat().st_size
    print(f"{w.stat().st_size / 1e6:7.2f} MB  {w.name}")
print(f"{len(wheels)} wheels, {total / 1e6:.1f} MB in {dest} (limit {limit_mb:.0f} MB)")
for n, by in sorted(missing.items()):
    print(f"UNMET: {n} (required by {', '.join(sorted(set(by)))}): neither downloaded nor in the GPU image")
if total > limit_mb * 1e6:
    sys.exit(f"gpu_wheels: {total / 1e6:.1f} MB is over the {limit_mb:.0f} MB limit")
sys.exit(1 if missing else 0)
EOF
