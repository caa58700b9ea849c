"""Attention Lab: the tested PyTorch library behind the course.

Modules, in lesson order:

* :mod:`attnlab.corpus` -- the generated corpus: one grammar, one realiser per language
  (English, French, Korean), gold sure/possible alignments, splits, and a loader for real
  tab-separated corpora;
* :mod:`attnlab.vocab` -- special tokens and vocabularies;
* :mod:`attnlab.loaders` -- token tensors and fastai DataLoaders (length-sorted batches);
* :mod:`attnlab.data` -- the old home of the three above, kept as an alias for one release;
* :mod:`attnlab.checks` -- the input checks every public entry point uses, and ``eval_mode``;
* :mod:`attnlab.masks` -- the mask convention and the NaN-free masked softmax;
* :mod:`attnlab.scores` -- attention score functions (dot, general, concat, location, scaled dot);
* :mod:`attnlab.rnn` -- GRU encoder-decoders without attention, with Bahdanau or Luong attention;
* :mod:`attnlab.attention` -- scaled dot-product and multi-head attention (and grouped-query);
* :mod:`attnlab.scale` -- attention at scale: tiled online-softmax attention, memory measurement,
  key/value cache sizes, sliding windows and a ring-buffer cache;
* :mod:`attnlab.linear_attention` -- linear attention (elu + 1 features), parallel and recurrent;
* :mod:`attnlab.train` -- the fastai training toolkit (masked loss, step budget, one-cycle);
* :mod:`attnlab.decoding` -- greedy decoding and beam search;
* :mod:`attnlab.evaluate` -- BLEU and chrF (sacrebleu), exact match, alignment agreement, AER;
* :mod:`attnlab.models` -- the model families (RNN, Transformer), each named once;
* :mod:`attnlab.checkpoint` -- safetensors checkpoints with a JSON config and the weights' sha256;
* :mod:`attnlab.results` -- where checkpoints and results live (shipped, else the learner's run);
* :mod:`attnlab.experiments` -- named training recipes per profile and language pair;
* :mod:`attnlab.report` -- the README's results tables, generated from the results files;
* :mod:`attnlab.plots` -- attention heatmaps and metric-by-length plots;
* :mod:`attnlab.profiles` -- the ``cpu`` / ``gpu`` profile.
"""

import warnings

# fastai (a dependency) still calls torch.jit.script and a pandas option that newer releases
# deprecate; the warnings say nothing about the learner's code, so keep lesson outputs clean.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*is deprecated", category=FutureWarning)
warnings.filterwarnings("ignore", message=r".*mode\.chained_assignment.*")

__version__ = "0.1.0"
