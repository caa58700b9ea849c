"""Lesson 10's pointer networks on sorting: trained on short lists, tested on lists up to twice as long.

Two runs (:data:`POINTER_RUNS`), each with the seeds of :data:`POINTER_SEEDS`:

* ``pointer_sort`` -- :class:`attnlab.models.pointer_net.PointerNet` (Vinyals, Fortunato & Jaitly 2015),
  trained by :func:`train_pointer` on fresh lists of 5-10 numbers every step (the data are endless,
  as in the paper's generated tasks, so a plain Adam loop with the one-cycle schedule replaces
  fastai's epochs);
* ``seq2seq_sort`` -- the course's lesson-02 Bahdanau model (preset ``bahdanau``, unchanged) that must
  *emit* the sorted values from an output vocabulary of the 100 numbers, trained through
  :func:`attnlab.training.experiments.record_run` on a fixed split of the same lists.

Both are scored with :func:`attnlab.data.sorting.exact_order` on test lists of every length from 5 to
:data:`TEST_LENGTHS`' last (twice the longest training list). Files ``<name>`` (seed 0) or
``<name>_seed<k>``; with ``ATTNLAB_USE_SHIPPED=1`` the shipped run is loaded instead of trained.
"""

from __future__ import annotations

import dataclasses
import time

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_int, check_positive_int
from attnlab.core.profiles import get_profile
from attnlab.data.corpus import Splits
from attnlab.data.loaders import make_dataloaders
from attnlab.data.sorting import exact_order, pointer_batch, sorting_batches, sorting_examples, sorting_pairs
from attnlab.data.vocab import build_vocabs
from attnlab.models.decoding import translate
from attnlab.models.pointer_net import PointerNet, PointerNetConfig
from attnlab.training import experiments, results
from attnlab.training.evaluate import count_params
from attnlab.training.train import set_seed

__all__ = [
    "POINTER_RUNS",
    "POINTER_SEEDS",
    "POINTER_STEPS",
    "SORT_VERSION",
    "TRAIN_LENGTHS",
    "TEST_LENGTHS",
    "TASK",
    "run_name",
    "held_out_lists",
    "train_pointer",
    "evaluate_pointer",
    "evaluate_seq2seq",
    "run",
    "shipped_by_length",
    "load_trained",
]

POINTER_RUNS = {"pointer_sort": "pointer", "seq2seq_sort": "bahdanau"}
POINTER_SEEDS = (0, 1, 2)
POINTER_STEPS = 1000
SORT_VERSION = "sorting-1"  # lists of distinct values 0..99 (attnlab.data.sorting)
TRAIN_LENGTHS = (5, 10)
TEST_LENGTHS = tuple(range(5, 21))  # up to twice the longest training list
TEST_PER_LENGTH = 200
TASK = "sorting"
_HINT = "run scripts/lesson10_pointers_parsing.py pointer"


def run_name(name: str, seed: int = 0) -> str:
    """The file name of run ``name`` with ``seed``: ``name`` for seed 0, else ``name_seed<k>``."""
    if not isinstance(name, str) or name not in POINTER_RUNS:
        raise KeyError(f"unknown sorting run {name!r}; known: {sorted(POINTER_RUNS)}")
    seed = check_int("seed", seed, minimum=0)
    return name if seed == 0 else f"{name}_seed{seed}"


def held_out_lists(per_length: int = TEST_PER_LENGTH) -> dict[int, list]:
    """``{length: [(values, order), ...]}``: the fixed test lists of every length of :data:`TEST_LENGTHS`."""
    return {n: sorting_examples(per_length, lengths=(n, n), seed=10_000 + n) for n in TEST_LENGTHS}


def train_pointer(
    steps: int = POINTER_STEPS,
    seed: int = 0,
    *,
    config: PointerNetConfig | None = None,
    bs: int = 128,
    lr: float = 1e-2,
    lengths: tuple[int, int] = TRAIN_LENGTHS,
) -> tuple[PointerNet, dict]:
    """Train a pointer network to sort: cross-entropy of the gold position at every step, teacher forcing.

    Adam with the one-cycle learning-rate schedule over ``steps``, gradients clipped at norm 1.

    Returns:
        ``(model, info)``: the model (eval mode) and ``{"steps", "seconds", "final_loss", "loss_curve"}``.
    """
    steps = check_positive_int("steps", steps)
    check_int("seed", seed)
    set_seed(seed)
    model = PointerNet(config or PointerNetConfig())
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    batches = sorting_batches(bs, lengths=lengths, seed=seed)
    curve, start, loss = [], time.perf_counter(), torch.tensor(float("nan"))
    model.train()
    for step in range(1, steps + 1):
        x, order = next(batches)  # (B, N, 1), (B, N)
        logits = model(x, order)  # (B, N, N)
        loss = F.cross_entropy(logits.flatten(0, 1), order.flatten())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % max(1, steps // 20) == 0 or step == steps:
            curve.append({"step": step, "loss": round(float(loss.detach()), 4)})
    model.eval()
    seconds = round(time.perf_counter() - start, 2)
    return model, {
        "steps": steps,
        "seconds": seconds,
        "final_loss": round(float(loss.detach()), 4),
        "loss_curve": curve,
    }


def evaluate_pointer(model: PointerNet, lists: dict[int, list] | None = None) -> dict:
    """Exact order of greedy pointers per test length; ``exact_order_2x`` at the longest length."""
    lists = held_out_lists() if lists is None else lists
    by_length = {}
    for n, examples in lists.items():
        x, order = pointer_batch(examples)  # (B, N, 1), (B, N)
        pointers, _ = model.decode(x)  # (B, N)
        by_length[str(n)] = round(exact_order(pointers.tolist(), order.tolist()), 4)
    longest = str(max(lists))
    return {"exact_order_2x": by_length[longest], "test_length_2x": int(longest), "by_length": by_length}


def evaluate_seq2seq(model, src_vocab, tgt_vocab, lists: dict[int, list] | None = None) -> dict:
    """Exact sorted values of greedy output per test length (a value outside the vocabulary never matches)."""
    lists = held_out_lists() if lists is None else lists
    by_length = {}
    for n, examples in lists.items():
        pairs = sorting_pairs(examples)
        hyps, _, _ = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab, max_len=n + 5)
        by_length[str(n)] = round(exact_order(hyps, [p.tgt for p in pairs]), 4)
    longest = str(max(lists))
    return {"exact_order_2x": by_length[longest], "test_length_2x": int(longest), "by_length": by_length}


def _seq2seq_data(seed: int = 0):
    """The seq2seq run's fixed lists: 50,000 training and 1,000 validation lists of 5-10 numbers."""
    train = sorting_pairs(sorting_examples(50_000, lengths=TRAIN_LENGTHS, seed=seed))
    valid = sorting_pairs(sorting_examples(1_000, lengths=TRAIN_LENGTHS, seed=5_000 + seed))
    test = [p for examples in held_out_lists().values() for p in sorting_pairs(examples)]
    splits = Splits(train, valid, test)
    return splits, *build_vocabs(splits)


def _run_pointer(out: str, seed: int, steps: int, ship: bool, save: bool, produced_by: str) -> tuple:
    load_before = results.load_average()
    model, info = train_pointer(steps, seed)
    res = {
        "model": out,
        "task": TASK,
        "run": "pointer_sort",
        "description": "Ptr-Net (Vinyals et al. 2015): LSTM encoder-decoder, attention = output",
        **evaluate_pointer(model),
        "params": count_params(model),
        "seed": seed,
        "budget": f"{steps:,} steps",
        "batch_size": 128,
        "train_lengths": list(TRAIN_LENGTHS),
        "train_steps": info["steps"],
        "train_seconds": info["seconds"],
        "final_loss": info["final_loss"],
        "loss_curve": info["loss_curve"],
        "corpus_version": SORT_VERSION,
        **results.provenance(
            produced_by=produced_by, profile=get_profile(), threads=torch.get_num_threads(), load_before=load_before
        ),
    }
    if save:
        experiments.save_run(model, out, res, ship=ship, device="cpu", corpus_version=SORT_VERSION)
    return model, res


def _run_seq2seq(out: str, seed: int, steps: int | None, ship: bool, save: bool, produced_by: str) -> tuple:
    profile = get_profile()
    exp = experiments.preset("bahdanau", profile)
    exp = dataclasses.replace(exp, name="seq2seq_sort", description=f"{exp.description}; emits the sorted values")
    exp, capped = experiments.capped_budget(exp.with_budget(steps=steps))
    splits, src_vocab, tgt_vocab = _seq2seq_data()
    plan = experiments.RunPlan(
        exp=exp,
        out=out,
        dataloaders=lambda device: make_dataloaders(splits, src_vocab, tgt_vocab, bs=exp.bs, device=device, seed=seed),
        build=lambda: experiments.build_model(exp, src_vocab, tgt_vocab),
        evaluate=lambda model: evaluate_seq2seq(model, src_vocab, tgt_vocab),
        header={"model": out, "task": TASK, "run": "seq2seq_sort", "experiment": "bahdanau"},
        record={"train_lengths": list(TRAIN_LENGTHS), "corpus_version": SORT_VERSION},
        checkpoint=dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            extra={"experiment": dataclasses.asdict(exp), "task": TASK},
            corpus_version=SORT_VERSION,
        ),
        profile=profile,
        seed=seed,
        ship=ship,
        save=save,
        progress=False,
        produced_by=produced_by,
        capped=capped,
    )
    return experiments.record_run(plan)


def run(
    name: str = "pointer_sort",
    *,
    seed: int = 0,
    steps: int | None = None,
    ship: bool = False,
    save: bool = True,
    produced_by: str | None = None,
):
    """Train sorting run ``name`` with ``seed``, score it on every test length, write checkpoint and results.

    Args:
        name: a run of :data:`POINTER_RUNS`.
        seed: seed of the weights and the training data's order.
        steps: optimiser steps (default: :data:`POINTER_STEPS` for the pointer network, the ``bahdanau``
            preset's budget for the seq2seq model).
        ship: write the committed ``data/checkpoints`` / ``data/results`` instead of ``data/runs``.
        save: write the files at all.
        produced_by: the command recorded in the results.

    Returns:
        ``(model, results)`` with ``exact_order_2x`` (lists of :data:`TEST_LENGTHS`' last length) and
        ``by_length``.
    """
    out = run_name(name, seed)
    if steps is not None:
        check_positive_int("steps", steps)
    if experiments.use_shipped() and steps is None and not ship:
        return experiments.load_shipped_run(out, load_trained, _HINT)
    produced_by = produced_by or ("python scripts/lesson10_pointers_parsing.py pointer" if ship else "live run")
    if name == "pointer_sort":
        budget, capped = steps or POINTER_STEPS, experiments.max_steps()
        return _run_pointer(out, seed, min(budget, capped or budget), ship, save, produced_by)
    return _run_seq2seq(out, seed, steps, ship, save, produced_by)


def shipped_by_length(name: str, seeds=POINTER_SEEDS) -> list[dict]:
    """The ``by_length`` exact-order tables of run ``name``'s shipped seeds (those of ``seeds`` that exist)."""
    files = [run_name(name, k) for k in seeds]
    return [results.read_result(f)["by_length"] for f in files if results.results_path(f, shipped=True).exists()]


def load_trained(name: str, *, prefer_live: bool = True, device="cpu"):
    """Load a trained sorting run by file name (``pointer_sort``, ``seq2seq_sort_seed1``, ...).

    Returns:
        ``(model, meta, source)`` with ``source`` either ``"live run"`` or ``"shipped"``.
    """
    return experiments.find_trained(
        name,
        expected=lambda meta: SORT_VERSION,
        data="sorting lists",
        hint=_HINT,
        prefer_live=prefer_live,
        device=device,
    )
