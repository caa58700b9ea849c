"""The wiring every lesson widget shares: controls -> pure update -> text + figure.

Each widget builds its controls and layout, then hands three small functions to :func:`live`:
``compute()`` reads the controls and calls the widget's pure ``update_*`` function,
``describe(result)`` turns the result into text, ``draw(result)`` returns a matplotlib figure.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable

__all__ = ["live"]


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

    Args:
        root: the widget's outer box; ``root.result`` always holds the latest ``compute()`` dict.
        text: an ``ipywidgets.HTML`` that shows ``describe(result)`` as preformatted text.
        plot: an ``ipywidgets.Output`` that shows the figure ``draw(result)`` returns.
        controls: widgets whose ``value`` triggers a refresh.
        compute, describe, draw: see the module docstring.
    """
    import matplotlib.pyplot as plt

    def refresh(_change=None) -> None:
        result = compute()
        root.result = result
        text.value = "<pre>" + html.escape(describe(result)) + "</pre>"
        plot.clear_output(wait=True)
        with plot:
            fig = draw(result)
            plt.show()
            plt.close(fig)

    for control in controls:
        control.observe(refresh, names="value")
    refresh()
    return root
