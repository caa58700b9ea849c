"""nbval settings for the lessons: skip outputs that cannot be compared byte for byte."""


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        # Widget views carry a random model id; HTML/JS outputs come from progress bars.
        collector.skip_compare += (
            "text/html",
            "application/javascript",
            "application/vnd.jupyter.widget-view+json",
        )
