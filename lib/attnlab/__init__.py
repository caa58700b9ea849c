"""Attention Lab: the tested PyTorch library behind the course.

Modules, in lesson order:

* :mod:`attnlab.data` -- the synthetic English->French corpus with gold alignments, vocabularies,
  fastai DataLoaders, and a loader for real tab-separated corpora;
* :mod:`attnlab.masks` -- the mask convention and the NaN-free masked softmax;
* :mod:`attnlab.scores` -- attention score functions (dot, general, concat, location, scaled dot);
* :mod:`attnlab.rnn` -- GRU encoder-decoders without attention, with Bahdanau or Luong attention;
* :mod:`attnlab.attention` -- scaled dot-product and multi-head attention;
* :mod:`attnlab.train` -- the fastai training toolkit (masked loss, time budget, one-cycle);
* :mod:`attnlab.decoding` -- greedy decoding and beam search;
* :mod:`attnlab.evaluate` -- BLEU (sacrebleu), exact match, alignment agreement, results files;
* :mod:`attnlab.checkpoint` -- safetensors checkpoints with a JSON config;
* :mod:`attnlab.experiments` -- named training recipes per profile;
* :mod:`attnlab.plots` -- attention heatmaps and metric-by-length plots;
* :mod:`attnlab.profiles` -- the ``cpu`` / ``gpu`` profile.
"""

import warnings

# fastai (a dependency) still calls torch.jit.script and a pandas option that newer releases
# deprecate; the warnings say nothing about the learner's code, so keep lesson outputs clean.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*is deprecated", category=FutureWarning)
warnings.filterwarnings("ignore", message=r".*mode\.chained_assignment.*")

__version__ = "0.1.0"
