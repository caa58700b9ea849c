"""The data the lessons train and score on: special tokens and vocabularies, the generated corpora with
gold alignments (:mod:`attnlab.data.corpus`), loaders, the real-corpus pipeline, and the scores of a
model's output against references and gold links (:mod:`attnlab.data.metrics`). Imports only
:mod:`attnlab.core`.
"""
