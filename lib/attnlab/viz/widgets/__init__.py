"""Interactive widgets of the lessons.

Each widget is split in two: a plain ``update``-style function (pure, fast, tested headless
in ``tests/``) and a thin ipywidgets wrapper that only wires controls to that function.
"""
