"""Sphinx configuration of the course website (``make site``; built by ``scripts/build_site.py``).

``scripts/build_site.py`` copies this file, the README (as the landing page) and the committed
lessons into a staging folder under ``build/`` and runs Sphinx there. The lessons are rendered from
their saved outputs (never executed). Every script and font a page loads is a file of the site:
MathJax, RequireJS and the widget manager come from the npm registry at build time, so the pages
work with the network off.
"""

project = "Attention Lab"
author = "the Attention Lab authors"
copyright = "2026, the Attention Lab authors"

extensions = ["myst_nb"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# The committed notebooks carry their outputs and widget state: show them as they are.
nb_execution_mode = "off"
nb_merge_streams = True
# Widgets: RequireJS + the HTML widget manager, both from _static (see build_site.NPM_ASSETS).
# The manager fetches a widget library it does not bundle from "data-jupyter-widgets-cdn"; the
# course only uses ipywidgets' own controls (bundled), and a local folder keeps any miss on the
# machine instead of reaching a CDN.
nb_ipywidgets_js = {
    "require.js": {},
    "widgets/embed-amd.js": {"data-jupyter-widgets-cdn": "_static/widgets/no-cdn/"},
}

# MathJax 3 from _static (a relative path is relative to _static), not from a CDN.
mathjax_path = "mathjax/tex-chtml.js"

html_theme = "sphinx_book_theme"
html_title = "Attention Lab"
html_static_path = ["_static"]
html_css_files = ["course.css"]
# after MathJax (deferred scripts run in order): MathJax 2's Hub.Queue, which ipywidgets' views call
html_js_files = [("mathjax2-shim.js", {"defer": "defer", "priority": 510})]
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
}
html_last_updated_fmt = None
html_copy_source = False

exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
suppress_warnings = ["myst.header", "myst.xref_missing", "misc.highlighting_failure"]
