"""The wiring every lesson widget shares: controls -> pure update -> text + picture.

Each widget builds its controls and layout, then hands three small functions to :func:`live`:
``compute()`` reads the controls and calls the widget's pure ``update_*`` function,
``describe(result)`` turns the result into text, ``draw(result)`` returns a matplotlib figure made
with :func:`new_figure`.

Pictures are drawn with matplotlib's object-oriented API (a :class:`~matplotlib.figure.Figure` on
the Agg canvas) into PNG bytes shown by an ``ipywidgets.Image``: no pyplot and no ``Output``
capture inside a callback. ipykernel 7 may deliver a widget event on another thread than the one
running cells; pyplot's global state and an ``Output`` widget's capture are not safe there, and a
cleared-then-refilled ``Output`` shows half-drawn frames while a slider is dragged. A new PNG
replaces the old one in one message, and a lock keeps two events from interleaving their updates.
"""

from __future__ import annotations

import html
import io
import threading
from collections.abc import Callable, Iterable

__all__ = ["live", "new_figure", "figure_png", "picture", "flipbook"]


def new_figure(figsize: tuple[float, float], **kwargs):
    """A matplotlib ``Figure`` of ``figsize`` inches on its own Agg canvas (not known to pyplot).

    ``kwargs`` go to :class:`matplotlib.figure.Figure` (e.g. ``layout="constrained"``).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig, *, dpi: int = 100) -> bytes:
    """PNG bytes of ``fig`` (tight bounding box, ``dpi`` dots per inch)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=dpi)
    return buf.getvalue()


def picture():
    """An empty ``ipywidgets.Image`` for a widget's PNG, shown at its own size (a flex box would stretch it)."""
    import ipywidgets as widgets

    return widgets.Image(format="png", layout=widgets.Layout(align_self="flex-start"))


def live(
    root,
    text,
    plot,
    controls: Iterable,
    compute: Callable[[], dict],
    describe: Callable[[dict], str],
    draw: Callable[[dict], object],
):
    """Refresh ``root`` now and whenever one of ``controls`` changes; returns ``root``.

    Every change of a control refreshes once: ``compute()`` and ``draw``, then the text and the picture.

    Args:
        root: the widget's outer box; ``root.result`` always holds the latest ``compute()`` dict.
        text: an ``ipywidgets.HTML`` that shows ``describe(result)`` as preformatted text.
        plot: an ``ipywidgets.Image`` (see :func:`picture`) that shows the PNG of ``draw(result)``.
        controls: widgets whose ``value`` triggers a refresh.
        compute, describe, draw: see the module docstring.
    """
    import ipywidgets as widgets

    if not isinstance(plot, widgets.Image):
        raise TypeError(f"plot must be an ipywidgets.Image (see picture()), got {type(plot).__name__}")
    lock = threading.RLock()

    def refresh(_change=None) -> None:
        with lock:
            result = compute()
            root.result = result
            fig = draw(result)
            if getattr(fig.canvas, "manager", None) is not None:
                raise TypeError("draw returned a pyplot figure: make it with attnlab.viz.widgets._live.new_figure()")
            png = figure_png(fig)
            # text and picture are sent one right after the other, once both are ready: the text
            # never runs ahead of its picture while a slow figure is drawn
            text.value = "<pre>" + html.escape(describe(result)) + "</pre>"
            plot.value = png

    for control in controls:
        control.observe(refresh, names="value")
    refresh()
    return root


def flipbook(options, frames, *, description: str):
    """A slider over precomputed pictures that moves without Python (so also on the static website).

    The slider's position selects one of ``frames`` in the browser: a ``jslink`` ties the slider's
    index to an ``ipywidgets.Stack`` of images, so moving it sends nothing to the kernel and works
    on a page with no kernel at all, from the saved widget state.

    Args:
        options: the slider's choices, one per frame (e.g. the values of ``d_k``).
        frames: PNG bytes, one per option, in the same order.
        description: the slider's label.

    Returns:
        an ``ipywidgets.VBox`` (slider above the pictures); ``.frames`` holds the PNGs.
    """
    import ipywidgets as widgets

    options, frames = list(options), list(frames)
    if not options or len(options) != len(frames):
        raise ValueError(f"flipbook needs one frame per option, got {len(options)} options and {len(frames)} frames")
    if not all(isinstance(png, bytes) and png.startswith(b"\x89PNG") for png in frames):
        raise TypeError("flipbook frames must be PNG bytes (see figure_png())")
    slider = widgets.SelectionSlider(options=options, value=options[0], description=description)
    stack = widgets.Stack(children=[widgets.Image(value=png, format="png") for png in frames], selected_index=0)
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    root = widgets.VBox([slider, stack])
    root.add_class("attnlab-flipbook")  # how the website's test finds it
    root.frames = frames
    return root
