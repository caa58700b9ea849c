"""Build the course website into ``site/`` (``make site``), offline, from the committed lessons.

Steps:

1. **Front-end files from the npm registry** (:data:`NPM_ASSETS`): ``npm pack`` fetches each pinned
   tarball once into ``build/npm/``, its sha512 is checked against the pin, and the files a page
   needs are copied into ``_static``: MathJax 3, RequireJS and ipywidgets' HTML widget manager.
   No page refers to a CDN.
2. **Staging** (``build/site-src/``): Sphinx's configuration (``site_src/``), the README as the
   landing page (with the lessons' table of contents), and a copy of every ``notebooks/NN_*.ipynb``.
   A note is added under each widget: on the website a widget shows the state saved when the
   lesson was executed, and only the ones precomputed in the browser (tagged ``static-frames``)
   move without Python.
3. **Sphinx + MyST-NB** renders the notebooks from their saved outputs (no execution) into ``site/``,
   with MathJax, figures, saved widget state and full-text search.

Run ``python scripts/build_site.py [--out site]``; open ``site/index.html`` in a browser (or serve it
with ``python -m http.server -d site``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class NpmAsset:
    """A pinned npm package and the files of it that the site serves from ``_static``."""

    name: str
    version: str
    integrity: str  # the registry's sha512, as in a package-lock.json
    files: dict[str, str]  # path inside the package (a folder ends with "/") -> path under _static

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


NPM_ASSETS = (
    NpmAsset(
        "mathjax",
        "3.2.2",
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        # tex-chtml.js loads its fonts (and any extension) relative to itself
        {
            "es5/tex-chtml.js": "mathjax/tex-chtml.js",
            "es5/output/chtml/fonts/woff-v2/": "mathjax/output/chtml/fonts/woff-v2/",
            "es5/input/tex/extensions/": "mathjax/input/tex/extensions/",
        },
    ),
    NpmAsset(
        "requirejs",
        "2.3.8",
        "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        {"require.js": "require.js"},
    ),
    NpmAsset(
        "@jupyter-widgets/html-manager",
        "1.0.15",  # the manager of ipywidgets 8 (widget state schema 2, controls 2.0.0)
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        # the bundle (source maps left out); its icon fonts go next to the pages, see FONT_DIR
        {"dist/embed-amd.js": "widgets/embed-amd.js", "dist/embed.js.LICENSE.txt": "widgets/LICENSE.txt",
         "dist/*.woff2": "widgets/fonts/", "dist/*.woff": "widgets/fonts/", "dist/*.ttf": "widgets/fonts/"},
    ),
)

# The widget manager's icon fonts are fetched relative to the page, under the module's name (RequireJS
# resolves "@jupyter-widgets/html-manager" against the page's folder): every lesson page lives in
# notebooks/, so the fonts are copied there after the build.
FONT_DIR = "notebooks/@jupyter-widgets/html-manager/dist"

WIDGET_NOTE = (
    "```{{note}}\n{text}\n```\n"
)
NOTE_SAVED = (
    "On this page the widget above shows the picture saved when the lesson was executed (its tabs, if it has "
    "any, still switch). Its sliders, menus and number fields need the lesson's Python kernel: open the lesson "
    "in JupyterLab (`make lab`) to move them."
)
NOTE_FRAMES = (
    "This widget moves on this page too: its frames were computed ahead, so the slider needs no Python."
)


def sri(path: Path) -> str:
    """The ``sha512-…`` integrity string of a file, as npm writes it."""
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch_npm(asset: NpmAsset, cache: Path) -> Path:
    """The pinned tarball of ``asset`` in ``cache`` (``npm pack`` once), with its sha512 checked."""
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / asset.tarball
    if not tgz.exists():
        if shutil.which("npm") is None:
            raise SystemExit(f"make site needs npm to fetch {asset.spec} from the npm registry (install Node.js)")
        subprocess.run(["npm", "pack", "--silent", asset.spec, "--pack-destination", str(cache)], check=True,
                       stdout=subprocess.DEVNULL)
    found = sri(tgz)
    if found != asset.integrity:
        tgz.unlink()
        raise SystemExit(f"{asset.spec}: the tarball's sha512 is {found}, expected the pinned {asset.integrity}")
    return tgz


def unpack(asset: NpmAsset, tgz: Path, static: Path) -> int:
    """Copy the files of ``asset`` named in ``asset.files`` from ``tgz`` into ``static``; returns bytes copied."""
    copied = 0
    with tarfile.open(tgz) as tar:
        members = {m.name.removeprefix("package/"): m for m in tar.getmembers() if m.isfile()}
        for source, target in asset.files.items():
            if source.endswith("/") or "*" in source:
                pattern = re.escape(source).replace(r"\*", "[^/]*") + ("" if "*" in source else ".*")
                chosen = {name: target + name[len(source):] if source.endswith("/") else target + Path(name).name
                          for name in members if re.fullmatch(pattern, name)}
            else:
                chosen = {source: target} if source in members else {}
            if not chosen:
                raise SystemExit(f"{asset.spec} has no file matching {source!r}")
            for name, dest in chosen.items():
                out = static / dest
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(tar.extractfile(members[name]).read())
                copied += out.stat().st_size
    return copied


def widget_cells(nb) -> list[int]:
    """Indices of the code cells of ``nb`` that display a widget."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any(WIDGET_VIEW in out.get("data", {}) for out in cell.get("outputs", []))]


def stage_notebook(src: Path, dest: Path) -> int:
    """Copy a lesson to ``dest`` with a note under each widget; returns the number of widgets."""
    nb = nbformat.read(src, as_version=4)
    cells = widget_cells(nb)
    for i in reversed(cells):
        frames = "static-frames" in nb.cells[i].metadata.get("tags", [])
        note = nbformat.v4.new_markdown_cell(WIDGET_NOTE.format(text=NOTE_FRAMES if frames else NOTE_SAVED))
        note.metadata["tags"] = ["site-note"]
        nb.cells.insert(i + 1, note)
    nbformat.write(nb, dest)
    return len(cells)


def landing_page(readme: str, lessons: list[str]) -> str:
    """The README as the site's first page, followed by the lessons' table of contents."""
    toc = "\n".join(f"notebooks/{Path(name).stem}" for name in lessons)
    return readme.rstrip() + "\n\n```{toctree}\n:hidden:\n:maxdepth: 1\n:caption: Lessons\n\n" + toc + "\n```\n"


def stage(staging: Path, cache: Path) -> dict:
    """Fill ``staging`` with Sphinx's sources; returns what was staged (for the build summary)."""
    if staging.exists():
        shutil.rmtree(staging)
    static = staging / "_static"
    static.mkdir(parents=True)
    shutil.copy(ROOT / "site_src" / "conf.py", staging / "conf.py")
    for name in ("course.css", "mathjax2-shim.js"):
        shutil.copy(ROOT / "site_src" / name, static / name)
    asset_bytes = sum(unpack(a, fetch_npm(a, cache), static) for a in NPM_ASSETS)
    (static / "widgets" / "no-cdn").mkdir(parents=True, exist_ok=True)
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    (staging / "notebooks").mkdir()
    widgets = {name: stage_notebook(ROOT / "notebooks" / name, staging / "notebooks" / name) for name in lessons}
    (staging / "index.md").write_text(landing_page((ROOT / "README.md").read_text(encoding="utf-8"), lessons),
                                      encoding="utf-8")
    return {"lessons": lessons, "widgets": widgets, "asset_bytes": asset_bytes}


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(out: Path, work: Path) -> dict:
    """Stage and build the site into ``out``; returns a summary (lessons, widgets, seconds, bytes)."""
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    staged = stage(work / "site-src", work / "npm")
    # MyST-NB writes a jupyter_execute/ folder next to Sphinx's output folder: build under work/, then move
    html = work / "site-html" / "html"
    if html.exists():
        shutil.rmtree(html)
    code = build_main(["-b", "html", "-q", "-d", str(work / "site-doctrees"), str(work / "site-src"), str(html)])
    if code:
        raise SystemExit(f"sphinx-build failed with exit code {code}")
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(html, out)
    fonts = out / FONT_DIR
    fonts.mkdir(parents=True)
    for font in (out / "_static" / "widgets" / "fonts").iterdir():
        shutil.copy(font, fonts / font.name)
    missing = [name for name in staged["lessons"] if not (out / "notebooks" / (Path(name).stem + ".html")).exists()]
    if missing:
        raise SystemExit(f"the site has no page for {missing}")
    return {**staged, "seconds": round(time.perf_counter() - start, 1), "bytes": folder_bytes(out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="output folder (default: site/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build", help="staging and npm cache (default: build/)")
    args = parser.parse_args(argv)
    summary = build(args.out.resolve(), args.work.resolve())
    widgets = ", ".join(f"{name[:2]}: {n}" for name, n in summary["widgets"].items() if n)
    print(f"site built in {summary['seconds']:.0f} s: {len(summary['lessons'])} lessons, widgets per lesson {widgets}; "
          f"{summary['bytes'] / 2**20:.1f} MiB in {args.out} (npm files {summary['asset_bytes'] / 2**20:.1f} MiB)")
    print(f"open {args.out / 'index.html'}  (or: python -m http.server -d {args.out})")
    print(json.dumps({k: summary[k] for k in ("seconds", "bytes")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
