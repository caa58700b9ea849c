"""The toy runs that lessons 1, 3, 5 and 6 train in their own cells, trained live or loaded from the shipped files.

* ``head_tasks``: lesson 5's :class:`attnlab.models.toys.HeadPerTask`, 150 Adam steps (lr 1e-2, batches of
  64 random sequences); ``head_tasks_nopos``: the same without position embeddings (the ablation of
  lesson 5's exercise).
* ``reversal_none`` / ``reversal_sinusoidal``: lesson 6's tiny Transformers (1 + 1 layers, width 32, 2
  heads) that learn to reverse 3-6 letters (:func:`attnlab.course.lessons.reversal_splits`), 200 one-cycle
  steps through the course's fastai toolkit, without positions or with sinusoids (its exercise's ablation).
* the small GRU encoder-decoders of the "predict, ablate, explain" exercises of lessons 1 and 3, on the same
  reversal task with 3-8 letters (:func:`reversal_rnn_data`), through the same toolkit:
  ``bottleneck_every_step`` / ``bottleneck_initial_only`` (lesson 1: no attention, the summary ``c`` fed to every
  decoder step as Cho et al. 2014 do, or only as the first state as Sutskever et al. 2014 do; 200 steps) and
  ``reversal_luong_global`` / ``reversal_luong_local_m`` (lesson 3: global attention or local-m with a window
  of one word on each side; 150 steps).

:func:`run` trains one and writes its checkpoint and results like every run of the course (``data/runs``,
or the shipped ``data/checkpoints`` / ``data/results`` with ``ship=True``; ``scripts/lesson05_06_toys.py``
ships them). With ``ATTNLAB_USE_SHIPPED=1`` it loads the shipped run instead and prints the line of
:func:`attnlab.training.experiments.load_shipped_run` ("loaded the shipped ..., not trained"), which the
browser tests count. The results carry a ``task``, so the course's translation tables leave them out.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_choice, check_int, check_positive_int
from attnlab.core.profiles import num_threads, train_threads
from attnlab.course.lessons import reversal_splits
from attnlab.data.loaders import collate, encode_pairs, make_dataloaders
from attnlab.data.metrics import exact_match
from attnlab.data.vocab import PAD, build_vocabs
from attnlab.models.decoding import translate
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN
from attnlab.models.toys import HEAD_TASKS, HeadPerTask, HeadTasksConfig, head_task_sources, make_head_batch
from attnlab.models.transformer import Transformer, TransformerConfig
from attnlab.training import experiments, results
from attnlab.training.evaluate import count_params
from attnlab.training.train import fit_budget, set_seed

__all__ = [
    "TOYS", "ToyRun", "run", "load", "model_config", "find_run", "head_tasks_scores", "reversal_scores",
    "reversal_data", "reversal_rnn_data",
]

HEAD_TASKS_VERSION = "head-tasks-1"  # random sequences of HeadTasksConfig's sizes, torch.Generator seeds
REVERSAL_VERSION = "reversal-1"  # reversal_splits(seed=0, sizes=(20_000, 100, 300)), letters a-j, 3-6 of them
REVERSAL_SIZES = (20_000, 100, 300)
REVERSAL_RNN_VERSION = "reversal-rnn-1"  # reversal_splits(seed=0, sizes=(20_000, 100, 300), lengths=(3, 8))
REVERSAL_RNN_LENGTHS = (3, 8)
_VERSIONS = {"head_tasks": HEAD_TASKS_VERSION, "reversal": REVERSAL_VERSION, "reversal_rnn": REVERSAL_RNN_VERSION}
_FAMILIES = {"head_tasks": "head_tasks", "reversal": "transformer", "reversal_rnn": "rnn"}
HINT = "run `python scripts/lesson05_06_toys.py` (or the lesson without ATTNLAB_USE_SHIPPED)"


@dataclass(frozen=True)
class ToyRun:
    """One toy run: its task (``"head_tasks"`` or ``"reversal"``), step budget, learning rate and model option."""

    task: str
    steps: int
    lr: float
    option: object  # head_tasks: positions (bool); reversal: TransformerConfig.positions; reversal_rnn: RNNConfig


TOYS = {
    "head_tasks": ToyRun("head_tasks", 150, 1e-2, True),
    "head_tasks_nopos": ToyRun("head_tasks", 150, 1e-2, False),
    "reversal_none": ToyRun("reversal", 200, 1e-2, "none"),
    "reversal_sinusoidal": ToyRun("reversal", 200, 1e-2, "sinusoidal"),
    "bottleneck_every_step": ToyRun("reversal_rnn", 200, 1e-2, {"hid_dim": 64, "attention": None}),
    "bottleneck_initial_only": ToyRun(
        "reversal_rnn", 200, 1e-2, {"hid_dim": 64, "attention": None, "context_every_step": False}
    ),
    "reversal_luong_global": ToyRun(
        "reversal_rnn", 150, 1e-2, {"hid_dim": 32, "attention": "luong", "score": "general"}
    ),
    "reversal_luong_local_m": ToyRun(
        "reversal_rnn", 150, 1e-2, {"hid_dim": 32, "attention": "luong", "score": "general", "local": "m", "window": 1}
    ),
}


def reversal_data():
    """Lesson 6's reversal task: ``(splits, src_vocab, tgt_vocab)``."""
    toy = reversal_splits(seed=0, sizes=REVERSAL_SIZES)
    return (toy, *build_vocabs(toy))


def reversal_rnn_data():
    """Lessons 1 and 3's reversal task (3-8 letters): ``(splits, src_vocab, tgt_vocab)``."""
    toy = reversal_splits(seed=0, sizes=REVERSAL_SIZES, lengths=REVERSAL_RNN_LENGTHS)
    return (toy, *build_vocabs(toy))


def head_tasks_scores(model: HeadPerTask, n: int = 1000, seed: int = 1) -> dict:
    """Per task (head): the accuracy on ``n`` fresh sequences and the mean weight on the right position."""
    cfg = model.config
    model.eval()
    with torch.no_grad():
        tokens, targets = make_head_batch(n, torch.Generator().manual_seed(seed), cfg)  # (N, T), (N, H, T)
        logits, weights = model(tokens, need_weights=True)  # (N, H, T, V), (N, H, T, T)
    accuracy = (logits.argmax(-1) == targets).float().mean(dim=(0, 2))  # (H,)
    mean_w = weights.mean(0)  # (H, T, T)
    pos, sources = torch.arange(cfg.length), head_task_sources(cfg.length)
    on_target = torch.stack([mean_w[h, pos, sources[h]].mean() for h in range(cfg.num_heads)])  # (H,)
    return {"accuracy": dict(zip(HEAD_TASKS, accuracy.tolist(), strict=True)),
            "on_target": dict(zip(HEAD_TASKS, on_target.tolist(), strict=True))}


def reversal_scores(model: torch.nn.Module, data=None) -> dict:
    """Exact match of the reversed test strings (greedy), the share with the right letters in some order, and
    the next-letter accuracy with the gold prefix fed in (``token_accuracy``, ``<eos>`` included)."""
    toy, src_vocab, tgt_vocab = data or reversal_data()
    hyps, _, _ = translate(model.eval(), [p.src for p in toy.test], src_vocab, tgt_vocab)
    same = sum(sorted(h) == sorted(p.tgt) for h, p in zip(hyps, toy.test, strict=True)) / len(hyps)
    src, tgt_in, tgt_out = collate(encode_pairs(toy.test, src_vocab, tgt_vocab))  # (B, S), (B, T), (B, T)
    with torch.no_grad():
        right = (model(src, tgt_in).argmax(-1) == tgt_out) & (tgt_out != PAD)  # (B, T)
    return {"exact_match": exact_match(hyps, [p.tgt for p in toy.test]), "same_letters": same,
            "token_accuracy": right.sum().item() / (tgt_out != PAD).sum().item()}


def _train_head_tasks(spec: ToyRun, steps: int, seed: int):
    cfg = HeadTasksConfig(positions=spec.option)
    torch.manual_seed(seed)
    model = HeadPerTask(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr)
    data = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(steps):
        tokens, targets = make_head_batch(64, data, cfg)  # (N, T), (N, H, T)
        logits, _ = model(tokens)  # (N, H, T, V): fast path while training
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    return model, {"final_loss": loss.item(), "train_seconds": seconds, **head_tasks_scores(model)}, {}


def _config(spec: ToyRun, src_vocab, tgt_vocab):
    if spec.task == "reversal":
        return TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=32, num_heads=2, num_encoder_layers=1,
                                 num_decoder_layers=1, dim_feedforward=64, positions=spec.option)
    return RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=16, **spec.option)


def model_config(name: str):
    """The model config toy run ``name`` trains (a ``TransformerConfig`` or ``RNNConfig``; not for ``head_tasks``)."""
    spec = TOYS[check_choice("name", name, tuple(TOYS))]
    if spec.task == "head_tasks":
        return HeadTasksConfig(positions=spec.option)
    return _config(spec, *_vocabs(spec.task))


@functools.cache
def _vocabs(task: str):
    """The (source, target) vocabularies of a reversal task (built once: :func:`find_run` asks for every toy run)."""
    _, src_vocab, tgt_vocab = reversal_data() if task == "reversal" else reversal_rnn_data()
    return src_vocab, tgt_vocab


def find_run(config) -> str:
    """The name of the toy run of :data:`TOYS` that trains a model of exactly ``config`` (the exercises' ablations).

    Raises:
        ValueError: no toy run trains this config; the message names the fields that differ from the closest run.
    """
    best, fewest = None, None
    for name in TOYS:
        other = model_config(name)
        if type(other) is not type(config):
            continue
        diff = [f.name for f in dataclasses.fields(other) if getattr(other, f.name) != getattr(config, f.name)]
        if not diff:
            return name
        if fewest is None or len(diff) < len(fewest):
            best, fewest = name, diff
    if best is None:
        raise ValueError(f"config must be the model config of a toy run, got a {type(config).__name__}")
    raise ValueError(
        f"no toy run trains this model: it differs from {best!r} in {', '.join(fewest)} "
        f"(an ablation changes one thing; check which field you changed)"
    )


def _train_reversal(spec: ToyRun, steps: int, seed: int):
    toy, src_vocab, tgt_vocab = data = reversal_data()
    set_seed(seed)
    model = Transformer(_config(spec, src_vocab, tgt_vocab))
    dls = make_dataloaders(toy, src_vocab, tgt_vocab, bs=64, device="cpu", seed=seed)
    _, stats = fit_budget(model, dls, steps=steps, lr=spec.lr, progress=False)
    res = {"final_loss": stats.final_loss, "train_seconds": stats.seconds, **reversal_scores(model, data)}
    return model, res, {"src_vocab": src_vocab, "tgt_vocab": tgt_vocab}


def _train_reversal_rnn(spec: ToyRun, steps: int, seed: int):
    toy, src_vocab, tgt_vocab = data = reversal_rnn_data()
    set_seed(seed)
    model = Seq2SeqRNN(_config(spec, src_vocab, tgt_vocab))
    dls = make_dataloaders(toy, src_vocab, tgt_vocab, bs=64, device="cpu", seed=seed)
    _, stats = fit_budget(model, dls, steps=steps, lr=spec.lr, progress=False)
    res = {"final_loss": stats.final_loss, "train_seconds": stats.seconds, **reversal_scores(model, data)}
    return model, res, {"src_vocab": src_vocab, "tgt_vocab": tgt_vocab}


_TRAIN = {"head_tasks": _train_head_tasks, "reversal": _train_reversal, "reversal_rnn": _train_reversal_rnn}


def run(name: str, *, steps: int | None = None, seed: int = 0, ship: bool = False) -> tuple[torch.nn.Module, dict]:
    """Train toy run ``name`` of :data:`TOYS` (its budget, or ``steps``) and record it; with ``ATTNLAB_USE_SHIPPED=1``
    (and the run's own budget and seed 0) load the shipped one instead.

    Returns:
        ``(model, results)``; the results hold ``train_steps``, ``train_seconds``, ``final_loss`` and the task's
        scores (``accuracy`` and ``on_target`` per head, or ``exact_match`` and ``same_letters``).
    """
    spec = TOYS[check_choice("name", name, tuple(TOYS))]
    seed = check_int("seed", seed, minimum=0)
    if experiments.use_shipped() and steps is None and seed == 0 and not ship:
        model, res = experiments.load_shipped_run(name, load, HINT)
        return model.cpu().eval(), res
    steps = spec.steps if steps is None else check_positive_int("steps", steps)
    load_before = results.load_average()
    threads = train_threads("cpu")
    with num_threads(threads):
        model, scores, vocabs = _TRAIN[spec.task](spec, steps, seed)
    model.eval()
    version = _VERSIONS[spec.task]
    res = {
        "model": name,
        "experiment": name,
        "task": spec.task,
        "option": spec.option,
        "corpus_version": version,
        "params": count_params(model),
        "seed": seed,
        "lr": spec.lr,
        "train_steps": steps,
        **scores,
        **results.provenance(
            produced_by="python scripts/lesson05_06_toys.py" if ship else "live run",
            profile="cpu", threads=threads, load_before=load_before,
        ),
    }
    res = results.json_ready(res)
    extra = {"experiment": {"name": name, "task": spec.task, "steps": spec.steps}, "task": spec.task}
    experiments.save_run(model, name, res, ship=ship, device="cpu", corpus_version=version, extra=extra, **vocabs)
    return model, res


def load(name: str, *, prefer_live: bool = True, device="cpu"):
    """The trained toy run ``name``: ``(model, meta, source)``, the learner's run first unless ``prefer_live=False``."""
    spec = TOYS[check_choice("name", name, tuple(TOYS))]
    version = _VERSIONS[spec.task]
    return experiments.find_trained(
        name, expected=lambda meta: version, data="toy task", hint=HINT,
        family=_FAMILIES[spec.task], prefer_live=prefer_live, device=device,
    )
