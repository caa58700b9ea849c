"""The course website (``make site``): built offline from the committed lessons, then read in headless
Chromium with the network blocked: every request must be served by the site itself.

Checks, on two lesson pages: the math is typeset by MathJax (no raw ``$...$`` left), every image
loads, the saved widgets render from their state (pictures included), the precomputed d_k flipbook
moves without a kernel, nothing is fetched from outside the site; and the full-text search finds a
lesson.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading

import pytest

from .conftest import SKIP_REASON

if SKIP_REASON:
    pytest.skip(SKIP_REASON, allow_module_level=True)

from ..modules import load_file  # noqa: E402
from .lab import REPO  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
    # the theme and MyST's Sphinx extensions use an API that Sphinx 11 will remove: theirs to change
    pytest.mark.filterwarnings("ignore:.*is deprecated. Check CHANGES for Sphinx API modifications"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``scripts/build_site.py`` into a scratch folder (npm tarballs cached in build/npm), served on 127.0.0.1."""
    build_site = load_file("build_site", REPO / "scripts" / "build_site.py", register=True)
    cached = all((REPO / "build" / "npm" / a.tarball).exists() for a in build_site.NPM_ASSETS)
    if not cached and shutil.which("npm") is None:
        pytest.skip("SITE TEST SKIPPED: make site needs npm (apt-get install -y npm) to fetch MathJax and the widget manager")
    out = tmp_path_factory.mktemp("site") / "site"
    summary = build_site.build(out, REPO / "build")
    print(f"site built in {summary['seconds']:.0f} s, {summary['bytes'] / 2**20:.1f} MiB")
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", summary
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def offline_page(browser, browser_context_args, site):
    """A page whose every request outside the site is refused (and recorded)."""
    base, _ = site
    context = browser.new_context(**browser_context_args)
    refused, failed, errors = [], [], []

    def route(r):
        if r.request.url.startswith(base + "/") or r.request.url.startswith("data:"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("requestfailed", lambda req: failed.append(req.url))
    page.on("response", lambda resp: failed.append(f"{resp.status} {resp.url}") if resp.status >= 400 else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page, base, refused, failed, errors
    context.close()


PAGE_STATE_JS = r"""
() => {
  const imgs = [...document.querySelectorAll('article img')];
  const widgetViews = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  return {
    math: document.querySelectorAll('mjx-container').length,
    raw_math: [...document.querySelectorAll('article p')].filter(p => /\$[^$\s][^$]*\$/.test(p.innerText)).length,
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 120)),
    widget_views: widgetViews,
    widgets: document.querySelectorAll('.jupyter-widgets.widget-vbox, .jupyter-widgets.widget-tab').length,
    widget_errors: [...document.querySelectorAll('.jupyter-widgets')].filter(w => /Error/.test(w.innerText)).length,
    notes: document.querySelectorAll('.admonition.note').length,
  };
}
"""


def _load(page, url):
    page.goto(url, wait_until="load")
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
    page.evaluate("() => MathJax.startup.promise")
    # the widget manager renders every saved view once the page has loaded
    page.wait_for_function(
        "() => document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length === 0"
        " || document.querySelectorAll('.jupyter-widgets img').length > 0",
        timeout=30_000,
        polling=200,
    )
    return page.evaluate(PAGE_STATE_JS)


@pytest.mark.parametrize(
    "lesson, widgets",
    [("02_bahdanau_attention", 1), ("03_luong_attention", 3)],
)
def test_lesson_page_offline(offline_page, lesson, widgets):
    """Math typeset, images loaded, saved widgets rendered (with their pictures), a note under each
    widget, and no request leaving the site."""
    page, base, refused, failed, errors = offline_page
    state = _load(page, f"{base}/notebooks/{lesson}.html")
    assert state["math"] > 10 and state["raw_math"] == 0, state
    assert state["images"] > 3 and not state["broken"], state
    assert state["widget_views"] == widgets and state["widgets"] >= widgets and not state["widget_errors"], state
    assert state["notes"] >= widgets, state
    assert not refused, f"requests that left the site: {refused}"
    assert not failed, f"requests that failed: {failed}"
    assert not errors, errors


def test_flipbook_moves_without_a_kernel(offline_page):
    """Lesson 03's d_k flipbook: moving its slider on the static page shows another precomputed frame."""
    page, base, refused, _, _ = offline_page
    _load(page, f"{base}/notebooks/03_luong_attention.html")
    book = page.locator(".attnlab-flipbook").first
    shown = "el => [...el.querySelectorAll('img')].filter(i => i.getClientRects().length > 0).map(i => i.src)"
    before = book.evaluate(shown)
    assert len(before) == 1, before
    book.locator(".noUi-handle").first.focus()
    page.keyboard.press("End")
    page.wait_for_function(
        "([el, src]) => [...el.querySelectorAll('img')].some(i => i.getClientRects().length > 0 && i.src !== src)",
        arg=[book.element_handle(), before[0]],
        timeout=10_000,
    )
    assert not refused


def test_search_works_offline(offline_page):
    """Sphinx's full-text search finds the lesson that teaches the scaled dot product."""
    page, base, refused, _, _ = offline_page
    page.goto(f"{base}/search.html?q=Luong", wait_until="load")
    page.wait_for_selector("#search-results li", timeout=30_000)
    hits = page.locator("#search-results li a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    assert any("03_luong_attention" in h for h in hits), hits
    assert not refused
