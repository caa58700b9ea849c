"""What the lessons show: attention heatmaps and metric plots, diagrams, and the widgets (each a plain,
tested update function plus a thin ipywidgets wrapper).
"""
