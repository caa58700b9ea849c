"""Drive the course in JupyterLab from Playwright: start the server, open a lesson, run it, move its widgets.

Everything here talks to JupyterLab through what a learner sees (the menu, the status bar, the cells'
prompts, the widgets' DOM); nothing reaches into JupyterLab's JavaScript objects.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "install it with `apt-get install -y chromium` (Debian/Ubuntu; `.ci/run` does this) "
    "or point ATTNLAB_CHROMIUM at a Chromium/Chrome binary"
)


def find_chromium() -> str | None:
    """Path of the system Chromium: ``$ATTNLAB_CHROMIUM`` if set, else the first of CHROMIUM_NAMES on PATH."""
    override = os.environ.get("ATTNLAB_CHROMIUM")
    if override:
        return shutil.which(override) or (override if os.access(override, os.X_OK) else None)
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def skip_reason() -> str | None:
    """Why the browser tests cannot run here (one line), or ``None`` when they can."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Each xdist worker would start its own JupyterLab and lessons; the suite runs in one process.
        return "BROWSER TESTS SKIPPED under pytest-xdist: run them in one process with `make browser`"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "BROWSER TESTS SKIPPED: Playwright for Python is not installed in this venv "
            "(pip install -c constraints.txt -e '.[dev]')"
        )
    if find_chromium() is None:
        where = os.environ.get("ATTNLAB_CHROMIUM") or "PATH (" + ", ".join(CHROMIUM_NAMES) + ")"
        return f"BROWSER TESTS SKIPPED: no Chromium found on {where}; {INSTALL_HINT}"
    return None


def launch_options() -> dict:
    """Playwright launch options for the system Chromium (``--no-sandbox`` when running as root)."""
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return {"executable_path": find_chromium(), "args": args}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Settings a learner could set too, given to JupyterLab through a scratch settings folder: no autosave
# (the lessons run here are scratch copies anyway) and no news or update check (no request leaves
# the machine, and no pop-up covers a widget).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


@dataclass
class LabServer:
    """A running JupyterLab: ``url`` (no trailing slash), ``token``, the scratch ``root`` and the process."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen
    log: Path

    def lesson_url(self, notebook: str, workspace: str) -> str:
        # A workspace of its own per page, reset, so that no tab of an earlier test is restored.
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?reset&token={self.token}"

    def shutdown_kernel(self, notebook: str) -> None:
        """Shut down the kernel of ``notebook`` (its session), as closing the lesson and its kernel would."""
        sessions = json.loads(self._request("GET", "/api/sessions"))
        for session in sessions:
            if session.get("path") == notebook:
                self._request("DELETE", f"/api/sessions/{session['id']}")

    def _request(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()

    def stop(self) -> None:
        """Shut the server and its kernels down (SIGTERM, then SIGKILL to its process group)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def scratch_course(root: Path) -> dict[str, str]:
    """Lay out a scratch copy of the course under ``root`` and return the environment for JupyterLab.

    ``root/notebooks`` holds copies of the lessons (JupyterLab may write to what it opens; the
    committed lessons are never touched). Every other top-level entry of the repository is linked,
    so a lesson that reads ``Path.cwd().parent / "benchmarks"`` finds it. ``root/data`` links the
    shipped checkpoints, results and corpus cache but has its own ``runs/``: live runs started from
    the browser land there, not in the repository's ``data/runs``.
    """
    (root / "notebooks").mkdir(parents=True)
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        shutil.copy2(nb, root / "notebooks" / nb.name)
    trust(sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or entry.name in ("notebooks", "data"):
            continue
        (root / entry.name).symlink_to(entry)
    data = root / "data"
    data.mkdir()
    for entry in (REPO / "data").iterdir():
        if entry.name != "runs":
            (data / entry.name).symlink_to(entry)
    (data / "runs").mkdir()
    for rel, settings in LAB_SETTINGS.items():
        path = root / "lab-settings" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    for sub in ("lab-workspaces", "jupyter-config", "jupyter-runtime"):
        (root / sub).mkdir()
    return {
        # What lesson 00 tells a learner who wants to read rather than wait: experiments.run loads
        # the shipped model of a run instead of training it.
        "ATTNLAB_USE_SHIPPED": "1",
        "ATTNLAB_DATA_DIR": str(data),
        "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
    }


def trust(notebooks: list[Path]) -> None:
    """Trust the lessons as ``make lab`` does (``jupyter trust``): JupyterLab shows the saved widgets of an
    untrusted notebook as raw ``VBox(children=…`` text until its cells are run again."""
    jupyter = Path(sys.executable).parent / "jupyter"
    subprocess.run([str(jupyter), "trust", *map(str, notebooks)], check=True, capture_output=True)


def start_lab(root: Path, *, timeout: float = 90.0) -> LabServer:
    """Start JupyterLab the way ``make lab`` does, on a scratch copy of the course, and wait until it answers.

    ``make lab`` runs ``.venv/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --no-browser``
    (plus ``--allow-root`` as root); this adds only a random token, a free port and the scratch
    settings and workspaces folders.
    """
    env = {**os.environ, **scratch_course(root)}
    token = secrets.token_hex(16)
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [
        str(jupyter),
        "lab",
        f"--notebook-dir={root / 'notebooks'}",
        "--ip=127.0.0.1",
        "--no-browser",
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--LabApp.user_settings_dir={root / 'lab-settings'}",
        f"--LabApp.workspaces_dir={root / 'lab-workspaces'}",
    ]
    log = root / "jupyterlab.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    server = LabServer(url=url, token=token, root=root, process=process, log=log)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


# ----------------------------------------------------------------------------------------------
# In the page
# ----------------------------------------------------------------------------------------------

# Installed once per page: what a widget shows (its "signature"), and a probe that times how long
# the widget takes to show something new after a control changes.
PAGE_JS = r"""
() => {
  if (window.__attnlab) return;
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const sig = root => {
    // What the learner sees change: pictures (Image widgets, images in Output widgets), HTML text,
    // Output widgets' content. Only what is displayed counts (a hidden tab does not).
    const parts = [];
    root.querySelectorAll('img').forEach(el => { if (visible(el)) parts.push('img:' + el.src); });
    root.querySelectorAll('.widget-html-content, .jupyter-widgets-output-area').forEach(el => {
      if (visible(el)) parts.push('html:' + el.innerHTML);
    });
    return parts.join('\n');
  };
  window.__attnlab = {
    sig,
    arm(root) {
      const pictures = () => [...root.querySelectorAll('img')].filter(visible).length;
      // fewest pictures in any frame painted during the change (sampled before each paint): below
      // the count before, the learner saw the widget without its picture (a cleared Output refilled
      // in two messages). A swap within one task (a Stack changing its child view) is never painted.
      const probe = {before: sig(root), t0: null, t1: null, last: performance.now(), changes: 0,
                     pictures_before: pictures(), pictures_min: pictures()};
      probe.frame = () => {
        probe.pictures_min = Math.min(probe.pictures_min, pictures());
        probe.raf = requestAnimationFrame(probe.frame);
      };
      probe.raf = requestAnimationFrame(probe.frame);
      const stamp = () => { if (probe.t1 === null) probe.t0 = performance.now(); };
      probe.abort = new AbortController();
      for (const ev of ['keydown', 'input', 'change', 'click', 'pointerdown', 'pointermove', 'pointerup']) {
        root.addEventListener(ev, stamp, {capture: true, signal: probe.abort.signal});
      }
      probe.draws = new Map();  // picture -> how many new PNGs it was given
      probe.observer = new MutationObserver(records => {
        probe.last = performance.now();
        for (const r of records) {
          if (r.type === 'attributes' && r.attributeName === 'src' && r.target.tagName === 'IMG') {
            probe.draws.set(r.target, (probe.draws.get(r.target) || 0) + 1);
          }
        }
        if (probe.t1 === null && sig(root) !== probe.before) probe.t1 = performance.now();
        probe.changes += 1;
      });
      probe.observer.observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
      window.__attnlabProbe = probe;
    },
    idle() {
      const s = document.querySelector('#jp-main-statusbar');
      return !!s && /\|\s*Idle/.test(s.innerText);
    },
    // Settled: something new is shown, the kernel answered every message, nothing moved for quietMs.
    settled(quietMs) {
      const p = window.__attnlabProbe;
      return p.t1 !== null && performance.now() - p.last > quietMs && window.__attnlab.idle();
    },
    async disarm(root) {
      const p = window.__attnlabProbe;
      p.observer.disconnect(); p.abort.abort(); cancelAnimationFrame(p.raf);
      const differs = sig(root) !== p.before;
      return {latency_ms: p.t1 === null || p.t0 === null ? null : p.t1 - p.t0, changed: p.t1 !== null && differs,
              draws: Math.max(0, ...p.draws.values()), images: await window.__attnlab.images(root),
              lost_picture: p.pictures_min < p.pictures_before};
    },
    async images(root) {
      // Every displayed picture: decoded size and byte count (a broken PNG has no natural size).
      const out = [];
      for (const el of root.querySelectorAll('img')) {
        if (!visible(el)) continue;
        try { await el.decode(); } catch (e) { /* reported as naturalWidth 0 */ }
        let bytes = null;
        try { bytes = (await (await fetch(el.src)).blob()).size; } catch (e) { bytes = null; }
        out.push({width: el.naturalWidth, height: el.naturalHeight, bytes});
      }
      return out;
    },
  };
}
"""

KERNEL_IDLE_JS = "() => { const s = document.querySelector('#jp-main-statusbar'); return !!s && /\\|\\s*Idle/.test(s.innerText); }"

RUN_FINISHED_JS = r"""
() => {
  const s = document.querySelector('#jp-main-statusbar');
  if (!s || !/\|\s*Idle/.test(s.innerText)) return false;
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')].map(e => e.textContent);
  return prompts.length > 0 && !prompts.some(p => p.includes('*'));
}
"""

NOTEBOOK_STATE_JS = r"""
() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  const unrun = cells.filter(c => !/\[\d+\]/.test(c.querySelector('.jp-InputPrompt').textContent)).length;
  const errors = [];
  document.querySelectorAll('.jp-Notebook .jp-OutputArea-output').forEach(o => {
    const text = o.innerText || '';
    if (/Traceback \(most recent call last\)|Error displaying widget/.test(text)) errors.push(text.slice(0, 2000));
  });
  // Printed tables that JupyterLab wraps (its text outputs wrap long lines) and HTML tables wider
  // than the output area: at the window's width a learner sees them broken or cut off.
  const wrapped = [];
  if (!document.getElementById('attnlab-lay-out-all')) {  // off-screen cells are not laid out (content-visibility)
    const style = document.createElement('style');
    style.id = 'attnlab-lay-out-all';
    style.textContent = '.jp-Notebook .jp-Cell { content-visibility: visible !important; }';
    document.head.appendChild(style);
  }
  // A printed table: three or more lines with columns (two or more spaces between words). Long
  // prose lines (an example sentence) may wrap; a table's rows may not.
  document.querySelectorAll('.jp-Notebook .jp-RenderedText pre').forEach(pre => {
    const rows = pre.textContent.split('\n').filter(l => /\S {2,}\S/.test(l));
    if (rows.length < 3) return;
    const probe = pre.cloneNode(false);
    probe.textContent = rows.join('\n');
    Object.assign(probe.style, {whiteSpace: 'pre', position: 'absolute', visibility: 'hidden', width: 'auto'});
    pre.parentNode.appendChild(probe);
    if (probe.scrollWidth > pre.clientWidth + 1) {
      const line = rows.reduce((a, b) => (b.length > a.length ? b : a), '');
      wrapped.push(`table wraps (${probe.scrollWidth} px in ${pre.clientWidth} px): ${line.slice(0, 100)}`);
    }
    probe.remove();
  });
  document.querySelectorAll('.jp-Notebook .jp-RenderedHTMLCommon table').forEach(t => {
    const area = t.closest('.jp-OutputArea-output');
    if (area && t.scrollWidth > area.clientWidth + 1) {
      wrapped.push(`table wider than its output (${t.scrollWidth} px in ${area.clientWidth} px): ${t.innerText.slice(0, 100)}`);
    }
  });
  // Outputs of experiments.run that loaded a shipped model (ATTNLAB_USE_SHIPPED=1 reached the kernel).
  const shipped = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')]
    .filter(o => (o.textContent || '').includes('ATTNLAB_USE_SHIPPED=1: loaded the shipped')).length;
  return {cells: cells.length, unrun, errors, wrapped, shipped};
}
"""

# The lesson's top-level widget outputs (one per displayed widget), and what each shows when it did
# not render: the widget manager's error, or the text/plain fallback ("VBox(children=(...").
WIDGET_OUTPUTS_JS = r"""
() => {
  const outs = [...document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output')];
  const found = [];
  outs.forEach((o, i) => {
    const text = (o.innerText || '').trim();
    const widget = o.querySelector(':scope > .jupyter-widgets');
    const raw = /^(VBox|HBox|Tab|Box|Output|Accordion|GridBox)\(/.test(text);
    const error = /Error displaying widget/.test(text);
    if (widget || raw || error) {
      o.setAttribute('data-attnlab-widget', String(found.length));
      found.push({index: found.length, rendered: !!widget && !error, raw, error, text: text.slice(0, 300)});
    }
  });
  return found;
}
"""


@dataclass
class Update:
    """One control change: what was changed and how long the widget took to show the result."""

    widget: str
    control: str
    latency_ms: float | None
    changed: bool
    draws: int = 0  # new PNGs one picture received for this one change (a widget should draw once)
    lost_picture: bool = False  # at some moment of the change the widget showed fewer pictures than before


@dataclass
class Recorder:
    """What a lesson's page logged: console errors (with their source) and the updates timed."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)

    def attach(self, page) -> None:
        def on_console(msg):
            if msg.type == "error":
                url = (msg.location or {}).get("url", "")
                self.console_errors.append(f"{msg.text} [{url}]")

        page.on("console", on_console)
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

    def widget_manager_errors(self) -> list[str]:
        """Console errors and uncaught exceptions that come from the widget manager or a widget view."""
        pattern = re.compile(r"widget|ipywidgets|\bcomm\b|jupyter\.widget", re.IGNORECASE)
        return [e for e in self.console_errors + self.page_errors if pattern.search(e)]


def open_lesson(page, server: LabServer, notebook: str, *, timeout_ms: int = 120_000) -> None:
    """Open ``notebook`` in JupyterLab and wait until its kernel is idle."""
    page.goto(server.lesson_url(notebook, workspace=f"w{secrets.token_hex(4)}"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_ms)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout_ms, polling=250)
    page.evaluate(PAGE_JS)


def start_run_all(page) -> None:
    """Run menu -> "Run All Cells" (the kernel is the fresh one the lesson opened with); returns once
    the cells are queued."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # Queued cells show [*]; wait for that, or the idle kernel of before would pass for the end.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')].some(p => p.textContent.includes('*'))",
        timeout=60_000,
        polling=100,
    )


def wait_run_finished(page, *, timeout_ms: int = 600_000) -> None:
    """Wait until no cell is queued or running and the kernel is idle (a failing cell ends Run All early)."""
    page.wait_for_function(RUN_FINISHED_JS, timeout=timeout_ms, polling=500)


class LessonRuns:
    """The lessons of a session, each in a page of its own, opened and Run All started ahead of need.

    :meth:`start` opens a lesson and starts Run All without waiting; :meth:`finished` starts it if
    needed, waits for the end of Run All and returns ``(page, recorder, seconds)``. Starting the next
    lesson while this one's widgets are driven keeps both cores of a small machine busy.
    """

    def __init__(self, browser, context_args: dict, server: LabServer, widgets: dict[str, int] | None = None):
        self.browser, self.context_args, self.server = browser, context_args, server
        self.widgets = widgets or {}  # lesson -> how many widgets its saved outputs display
        self.pages: dict[str, tuple] = {}  # lesson -> (page, recorder, start time)
        self.saved: dict[str, list[str]] = {}  # lesson -> problems of its saved widgets, seen before Run All

    def start(self, lesson: str) -> None:
        if lesson in self.pages:
            return
        page = self.browser.new_context(**self.context_args).new_page()
        recorder = Recorder()
        recorder.attach(page)
        begin = time.monotonic()
        open_lesson(page, self.server, lesson)
        if self.widgets.get(lesson):  # what a learner sees before running anything
            self.saved[lesson] = saved_widget_problems(page, self.widgets[lesson])
        start_run_all(page)
        self.pages[lesson] = (page, recorder, begin)

    def finished(self, lesson: str):
        self.start(lesson)
        page, recorder, begin = self.pages[lesson]
        wait_run_finished(page)
        return page, recorder, time.monotonic() - begin

    def close(self, lesson: str) -> None:
        """Close the lesson's page and shut its kernel down (a finished lesson's kernel holds ~1 GB)."""
        if lesson in self.pages:
            page = self.pages.pop(lesson)[0]
            page.context.close()
        self.server.shutdown_kernel(lesson)

    def close_all(self) -> None:
        for lesson in list(self.pages):
            self.close(lesson)


# Every saved widget rendered (not raw text, not an error) and showing a decoded picture.
SAVED_WIDGETS_JS = r"""
(n) => {
  const outs = [...document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output')];
  const shown = outs.filter(o => o.querySelector(':scope > .jupyter-widgets'));
  if (shown.length < n) return false;
  return shown.every(o => {
    const imgs = [...o.querySelectorAll('img')].filter(el => el.getClientRects().length > 0);
    return imgs.length > 0 && imgs.every(el => el.complete && el.naturalWidth > 0);
  });
}
"""


def saved_widget_problems(page, expected: int, *, timeout_ms: int = 30_000) -> list[str]:
    """Problems of a freshly opened (not yet run) lesson's widgets: each of the ``expected`` widgets
    must render from the widget state saved in the notebook and show its saved picture."""
    try:
        page.wait_for_function(SAVED_WIDGETS_JS, arg=expected, timeout=timeout_ms, polling=200)
        return []
    except Exception as exc:  # playwright's TimeoutError: say what was shown instead
        if "Timeout" not in type(exc).__name__:
            raise
        return [f"saved widgets not shown within {timeout_ms / 1000:.0f} s: {widget_outputs(page)}"]


def notebook_state(page) -> dict:
    """``cells`` (code cells), ``unrun`` (code cells without an execution count), ``errors`` (tracebacks shown),
    ``wrapped`` (tables too wide), ``shipped`` (outputs that say a shipped model was loaded, not trained)."""
    return page.evaluate(NOTEBOOK_STATE_JS)


def widget_outputs(page) -> list[dict]:
    """The lesson's displayed widgets, in notebook order; marks each with ``data-attnlab-widget``."""
    return page.evaluate(WIDGET_OUTPUTS_JS)


def widget_locator(page, index: int):
    return page.locator(f'[data-attnlab-widget="{index}"] > .jupyter-widgets').first


def signature(widget) -> str:
    return widget.evaluate("el => window.__attnlab.sig(el)")


def images(widget) -> list[dict]:
    return widget.evaluate("el => window.__attnlab.images(el)")


def timed_change(page, widget, name: str, control: str, action, *, timeout_ms: int = 30_000, quiet_ms: int = 150):
    """Do ``action()`` (one change of one control) and wait until the widget shows something new and settles.

    The latency is measured in the page: from the last user event on the widget (key, click,
    input, change) to the first DOM change of what it shows. Returns ``(Update, images)``:
    ``Update.changed`` is False when nothing new was shown within ``timeout_ms``, ``Update.draws``
    counts the new PNGs a picture got; ``images`` are the pictures shown afterwards (see :func:`images`).
    """
    widget.evaluate("el => window.__attnlab.arm(el)")
    action()
    try:
        page.wait_for_function(f"() => window.__attnlab.settled({quiet_ms})", timeout=timeout_ms, polling=50)
    except Exception as exc:  # playwright's TimeoutError: reported below as "did not change"
        if "Timeout" not in type(exc).__name__:
            raise
    result = widget.evaluate("el => window.__attnlab.disarm(el)")
    update = Update(
        widget=name,
        control=control,
        latency_ms=result["latency_ms"],
        changed=result["changed"],
        draws=result["draws"],
        lost_picture=result["lost_picture"],
    )
    return update, result["images"]
