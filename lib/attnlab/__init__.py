"""Attention Lab: the tested PyTorch library behind the course.

The library is six packages in layers. Read it bottom to top: each package imports only from the
packages below it (``tests/test_layers.py`` fails on an upward import, a function-local import of
the library, or an import cycle)::

    course     exercises: the stubs learners fill in and the checks that enforce them
      ^
    viz        plots, diagrams, widgets (the lessons' pictures and controls)
      ^
    training   fastai training, profiles' presets, experiments, checkpoints, results, evaluation
      ^        of whole models, explanation tests, the report and the command lines
    models     the RNN encoder-decoders and their attention variants, the Transformer, decoding,
      ^        and the later lessons' models (agreement, multi-source, vision, speech, documents)
    data       vocabularies, the generated corpora with gold alignments, loaders, the real-corpus
      ^        pipeline, and the scores against references and gold links (BLEU, chrF, AER)
    core       masks, attention (SDPA, multi-head, grouped-query), score functions, tiled and
               linear attention, input checks, the cpu/gpu profile: building blocks, torch only

* :mod:`attnlab.core` -- ``checks``, ``masks``, ``attention``, ``scores``, ``scale``,
  ``linear_attention``, ``profiles``;
* :mod:`attnlab.data` -- ``vocab``, ``corpus`` (grammar, realisers, splits, triples, scenes,
  signals, documents, TSV), ``loaders``, ``realcorpus``, ``gold``, ``metrics``, ``paths``;
* :mod:`attnlab.models` -- ``rnn``, ``variants``, ``transformer``, ``decoding``, ``losses``,
  ``agreement``, ``multisource``, ``vision``, ``speech``, ``hierarchical``;
* :mod:`attnlab.training` -- ``train``, ``experiments``, ``families``, ``checkpoint``, ``results``,
  ``evaluate``, ``explain``, ``estimate``, ``report``, ``cli`` (``python -m attnlab.training``), and
  the later lessons' runs (``multisource_experiments``, ``vision_experiments``,
  ``speech_experiments``, ``hierarchical_experiments``);
* :mod:`attnlab.viz` -- ``plots``, ``diagrams``, ``widgets``;
* :mod:`attnlab.course` -- ``exercises``.
"""

import warnings

# fastai (a dependency) still calls torch.jit.script and a pandas option that newer releases
# deprecate; the warnings say nothing about the learner's code, so keep lesson outputs clean.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*is deprecated", category=FutureWarning)
warnings.filterwarnings("ignore", message=r".*mode\.chained_assignment.*")

__version__ = "0.1.0"
