"""scripts/build_site.py without a browser: the staging of the lessons, the pinned npm files, and a
configuration that never points a page at a CDN (tests/browser/test_site.py builds and reads the site)."""

from __future__ import annotations

import io
import runpy
import tarfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from .modules import load_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def build_site():
    return load_file("build_site", ROOT / "scripts" / "build_site.py", register=True)


def _widget_output():
    return new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "abc"},
                                            "text/plain": "VBox(...)"})


def test_a_note_follows_each_widget_and_says_whether_it_moves(build_site, tmp_path):
    frames = new_code_cell("book", outputs=[_widget_output()])
    frames.metadata["tags"] = ["static-frames"]
    nb = new_notebook(cells=[new_markdown_cell("# Lesson"), new_code_cell("w", outputs=[_widget_output()]),
                             new_code_cell("print(1)", outputs=[new_output("stream", name="stdout", text="1")]), frames])
    nbformat.write(nb, tmp_path / "in.ipynb")
    assert build_site.stage_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb") == 2
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "code", "markdown", "code", "code", "markdown"]
    assert build_site.NOTE_SAVED in cells[2].source and "make lab" in cells[2].source
    assert build_site.NOTE_FRAMES in cells[5].source and build_site.NOTE_SAVED not in cells[5].source


def test_the_landing_page_is_the_readme_with_every_lesson(build_site):
    page = build_site.landing_page("# Attention Lab\n\ntext\n", ["00_welcome.ipynb", "01_seq.ipynb"])
    assert page.startswith("# Attention Lab\n\ntext")
    assert "```{toctree}" in page and "notebooks/00_welcome\nnotebooks/01_seq\n```" in page


def _fake_tarball(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_tarball_that_is_not_the_pinned_one_is_refused(build_site, tmp_path):
    asset = build_site.NPM_ASSETS[1]
    _fake_tarball(tmp_path / asset.tarball, {"require.js": b"evil()"})
    with pytest.raises(SystemExit, match=f"{asset.spec}: the tarball's sha512 is .*expected the pinned"):
        build_site.fetch_npm(asset, tmp_path)
    assert not (tmp_path / asset.tarball).exists()  # removed, so the next build fetches it again


def test_unpack_copies_what_the_pages_need(build_site, tmp_path):
    asset = build_site.NpmAsset("x", "1.0.0", "sha512-unused", {"dist/a.js": "w/a.js", "dist/*.woff2": "w/fonts/",
                                                               "fonts/": "f/"})
    _fake_tarball(tmp_path / "x.tgz", {"dist/a.js": b"a", "dist/1.woff2": b"12", "dist/2.woff": b"3",
                                        "fonts/sub/b.woff": b"bb"})
    assert build_site.unpack(asset, tmp_path / "x.tgz", tmp_path / "static") == 1 + 2 + 2
    got = sorted(str(p.relative_to(tmp_path / "static")) for p in (tmp_path / "static").rglob("*") if p.is_file())
    assert got == ["f/sub/b.woff", "w/a.js", "w/fonts/1.woff2"]
    missing = build_site.NpmAsset("x", "1.0.0", "sha512-unused", {"dist/none.js": "n.js"})
    with pytest.raises(SystemExit, match="x@1.0.0 has no file matching 'dist/none.js'"):
        build_site.unpack(missing, tmp_path / "x.tgz", tmp_path / "static")


def test_no_page_is_pointed_at_a_cdn(build_site):
    """Every script the configuration adds is a file under _static (a relative path), and so is MathJax."""
    conf = runpy.run_path(str(ROOT / "site_src" / "conf.py"))
    scripts = [*conf["nb_ipywidgets_js"], conf["mathjax_path"], *(js for js, _ in conf["html_js_files"])]
    assert scripts and not [s for s in scripts if "//" in s or s.startswith("/")], scripts
    served = {target for a in build_site.NPM_ASSETS for target in a.files.values()} | {"mathjax2-shim.js"}
    assert set(scripts) <= served, set(scripts) - served
    assert conf["nb_execution_mode"] == "off"  # the committed outputs are shown, never re-executed
