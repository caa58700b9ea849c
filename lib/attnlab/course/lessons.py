"""Helpers only the lessons use: the first cell's setup, and the bookkeeping behind a lesson's analyses.

What a lesson shows as an idea (the attention math, the training call, the check) stays in its cells;
what only repeats setup or counts things for a printed figure lives here, so that a cell stays short.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from attnlab.core.checks import check_choice, check_int, check_positive_int
from attnlab.core.profiles import use_course_threads
from attnlab.data import loaders, vocab
from attnlab.data.corpus import Pair, Splits
from attnlab.training import experiments, report, results

__all__ = [
    "seed_files",
    "seed_summary",
    "seed_verdict",
    "setup_lesson",
    "attention_peaks",
    "peak_offsets",
    "shipped_figures",
    "compare_seeds",
    "claim_verdict",
    "predicted_positions",
    "reversal_splits",
    "course_rows",
    "accuracy_by_position",
    "final_token_accuracy",
    "source_gradient",
    "seed_runs",
    "seed_runs_verdict",
    "collapse_signs",
    "course_models",
    "seed_summary",
    "course_verdicts",
]


def setup_lesson(*, seed: int = 0, dpi: int = 80, figsize: tuple[float, float] | None = None) -> None:
    """The setup every lesson's first cell repeats: seed, threads, print options, figure size.

    Seeds PyTorch with ``seed``, sets the course's CPU thread count (:func:`attnlab.core.profiles.use_course_threads`:
    one thread on the cpu profile, lesson 00 explains why), prints tensors with 4 decimals and no scientific
    notation, and draws figures at ``dpi`` (and ``figsize`` when given).
    """
    seed = check_int("seed", seed, minimum=0)
    dpi = check_positive_int("dpi", dpi)
    if figsize is not None and (len(figsize) != 2 or min(figsize) <= 0):
        raise ValueError(f"figsize must be (width, height) in inches, both > 0, got {figsize!r}")
    torch.manual_seed(seed)
    use_course_threads()
    torch.set_printoptions(precision=4, sci_mode=False)
    plt.rcParams["figure.dpi"] = dpi
    if figsize is not None:
        plt.rcParams["figure.figsize"] = tuple(figsize)


def _check_aligned(attns: Sequence, pairs: Sequence[Pair]) -> None:
    if len(attns) != len(pairs):
        raise ValueError(f"attns has {len(attns)} matrices for {len(pairs)} pairs")
    for i, (a, p) in enumerate(zip(attns, pairs, strict=True)):
        if p.align is None:
            raise ValueError(f"pairs[{i}] has no gold alignment (align is None)")
        if tuple(a.shape[:1]) != (len(p.tgt),):
            raise ValueError(f"attns[{i}] must be (T, S) with T = {len(p.tgt)} target tokens, got {tuple(a.shape)}")


def attention_peaks(attns: Sequence[torch.Tensor], pairs: Sequence[Pair], words=()) -> dict:
    """Where each target token's attention peak lands, against the gold alignment.

    Args:
        attns: one ``(T, S)`` attention matrix per pair (teacher-forced).
        pairs: the pairs, with their gold ``align``.
        words: target words to report apart (the determiners, say).

    Returns:
        ``{"words_on_gold": [bool per token in words], "misses_next_to_gold": [bool per token whose peak is
        not on a gold position: is it one position away from one?], "on_gold_by_word": {word: [bool per
        token with a gold link]}}``.
    """
    _check_aligned(attns, pairs)
    words = set(words)
    on_words, near, by_word = [], [], {}
    for a, p in zip(attns, pairs, strict=True):
        top = a.argmax(1)
        for t, (tok, gold) in enumerate(zip(p.tgt, p.align, strict=True)):
            j = int(top[t])
            if tok in words:
                on_words.append(j in gold)
            if j not in gold:
                near.append(any(abs(j - g) == 1 for g in gold))
            if gold:
                by_word.setdefault(tok, []).append(j in gold)
    return {"words_on_gold": on_words, "misses_next_to_gold": near, "on_gold_by_word": by_word}


def peak_offsets(attns: Sequence[torch.Tensor], pairs: Sequence[Pair]) -> dict[str, float]:
    """Shares of content words whose attention peak is on gold, one position before it, one after, or elsewhere.

    Only target tokens with a gold link that are content words (``pair.content``) count.
    """
    _check_aligned(attns, pairs)
    where = {"on gold": 0, "one before": 0, "one after": 0, "elsewhere": 0}
    for a, p in zip(attns, pairs, strict=True):
        if p.content is None:
            raise ValueError("pairs need content flags (pair.content is None)")
        top = a.argmax(1)
        for t, gold in enumerate(p.align):
            if not (gold and p.content[t]):
                continue
            j = int(top[t])
            key = ("on gold" if j in gold else "one before" if j + 1 in gold else
                   "one after" if j - 1 in gold else "elsewhere")
            where[key] += 1
    n = sum(where.values())
    if n == 0:
        raise ValueError("no content word with a gold link in pairs")
    return {k: v / n for k, v in where.items()}


def shipped_figures(name: str, pair: str, figures: Sequence[str]) -> tuple[dict, int]:
    """A run's figures and parameter count, from its shipped results file (else your own run's).

    ``"em_31_40"`` among ``figures`` is the exact match on 31-40-token sentences; any other figure is read
    from the top level of the results (``None`` where the file has none).
    """
    check_choice("pair", pair, ("fr", "ko"))
    r, _ = results.find_result(experiments.result_name(name, pair))
    return {fig: _figure(r, fig) for fig in figures}, r["params"]


_BUCKET_FIGURE = re.compile(r"(em|bleu)_(\d+)_(\d+)")


def _figure(r: Mapping, fig: str):
    """One figure of results ``r``: ``"em_A_B"`` / ``"bleu_A_B"`` is the exact match / BLEU on the A-B-token bucket
    (``"em_31_40"``, ``"bleu_21_30"``), any other name the top-level field."""
    m = _BUCKET_FIGURE.fullmatch(fig)
    if m is None:
        return r.get(fig)
    bucket = f"{m[2]}-{m[3]}"
    if bucket not in r["by_bucket"]:
        raise ValueError(f"fig {fig!r} names bucket {bucket!r}; the results have {sorted(r['by_bucket'])}")
    return r["by_bucket"][bucket]["exact_match" if m[1] == "em" else "bleu"]


def seed_files(name: str, pair: str = "fr", seeds: Sequence[int] = (0, 1, 2)) -> list[str]:
    """File names of ``name``'s runs on ``pair`` with ``seeds`` (:func:`attnlab.training.experiments.seed_result_name`):
    ``NAME[_ko]`` for seed 0, ``NAME_seedK[_ko]`` else."""
    return [experiments.seed_result_name(name, pair, k) for k in seeds]


def seed_summary(
    name: str, pair: str = "fr", figures: Sequence[str] = ("bleu", "em_31_40"), seeds: Sequence[int] = (0, 1, 2), *,
    require_all: bool = False,
) -> dict | None:
    """Mean and sample sd (``n - 1``) of ``figures`` over the *shipped* runs of ``name`` among ``seeds``.

    Seed 0 is the lesson's run, seed ``k`` the file ``<name>_seed<k>[_ko]`` (:func:`seed_files`); ``figures`` as
    in :func:`shipped_figures` (``"em_31_40"`` included). A Luong variant's seeds come from lesson 3's comparison
    file (``luong_<pair>``, where ``scripts/compare_luong.py`` keeps every seed) when it holds all of ``seeds``.

    Returns:
        ``{"mean": {fig: x}, "sd": {fig: x or None}, "n": runs found, "files": [...], "seeds": [...],
        "params": int}`` (the form :func:`compare_seeds` and :func:`attnlab.viz.tables.mean_sd_table` read;
        ``sd`` is ``None`` for one run), or ``None`` when no run is shipped -- or, with ``require_all``, when
        any of ``seeds`` is not.
    """
    check_choice("pair", pair, ("fr", "ko"))
    if name.startswith("luong_"):
        v = results.read_comparison(f"luong_{pair}")["variants"].get(name)
        if v is not None and set(seeds) <= set(v["seeds"]) and len(v["seeds"]) == len(seeds):
            return {"mean": {f: v["mean"][f] for f in figures}, "sd": {f: v["sd"][f] for f in figures},
                    "n": len(seeds), "files": [f"comparisons/luong_{pair}"], "seeds": list(v["seeds"]), "params": None}
    found = [(k, f) for k, f in zip(seeds, seed_files(name, pair, seeds), strict=True)
             if results.results_path(f, shipped=True).exists()]
    if not found or (require_all and len(found) < len(seeds)):
        return None
    runs = [results.read_result(f) for _, f in found]
    mean, sd = {}, {}
    for fig in figures:
        values = np.array([v for v in (_figure(r, fig) for r in runs) if v is not None], dtype=float)
        mean[fig] = float(values.mean()) if len(values) else None
        sd[fig] = float(values.std(ddof=1)) if len(values) > 1 else None
    return {"mean": mean, "sd": sd, "n": len(found), "files": [f for _, f in found], "seeds": [k for k, _ in found],
            "params": runs[0]["params"]}


def compare_seeds(a: Mapping, b: Mapping, fig: str, *, lower_is_better: bool = False) -> int:
    """+1 if ``a`` beats ``b`` on ``fig`` beyond both spreads (``|m_a - m_b| > sd_a + sd_b``), -1 if ``b`` beats ``a``,
    else 0.

    ``a`` and ``b`` are summaries over seeds: ``{"mean": {fig: value}, "sd": {fig: value}}``.
    """
    for name, s in (("a", a), ("b", b)):
        if fig not in s.get("mean", {}) or fig not in s.get("sd", {}):
            raise ValueError(f"{name} has no mean and sd of {fig!r}")
    gap = a["mean"][fig] - b["mean"][fig]
    if abs(gap) <= a["sd"][fig] + b["sd"][fig]:
        return 0
    return int(np.sign(-gap if lower_is_better else gap))


def seed_verdict(a: Mapping | None, b: Mapping | None, fig: str, *, lower_is_better: bool = False) -> str:
    """``a`` against ``b`` on ``fig`` by :func:`compare_seeds`'s rule, for summaries of :func:`seed_summary`.

    A side with a single run (``sd`` None) borrows the other side's sd -- the spread it would have if its
    seeds varied as much; with a single run on both sides the answer is ``"unknown (1 run each)"``, and
    ``"not trained"`` when either summary is ``None``. Otherwise ``"better"``, ``"worse"`` or ``"tie"``.
    """
    if a is None or b is None:
        return "not trained"
    sd_a, sd_b = a["sd"].get(fig), b["sd"].get(fig)
    if sd_a is None and sd_b is None:
        return "unknown (1 run each)"
    sd_a, sd_b = (sd_b if sd_a is None else sd_a), (sd_a if sd_b is None else sd_b)
    spread_a, spread_b = {"mean": a["mean"], "sd": {fig: sd_a}}, {"mean": b["mean"], "sd": {fig: sd_b}}
    sign = compare_seeds(spread_a, spread_b, fig, lower_is_better=lower_is_better)
    return {1: "better", -1: "worse", 0: "tie"}[sign]


def claim_verdict(signs: Sequence[int]) -> str:
    """A claim "better than each of n others" from one comparison per other (+1, 0 or -1, in the claim's direction).

    ``holds`` / ``against``: every comparison goes the claim's way / the other way; ``holds k/n``: k of n do and
    the rest are level; ``mixed``: some each way; ``tie``: all level.
    """
    signs = list(signs)
    if not signs:
        raise ValueError("signs is empty: a claim needs at least one comparison")
    if any(s not in (-1, 0, 1) for s in signs):
        raise ValueError(f"signs must be -1, 0 or +1, got {signs}")
    up, down, n = signs.count(1), signs.count(-1), len(signs)
    if up and down:
        return "mixed"
    if up or down:
        word, k = ("holds", up) if up else ("against", down)
        return word if k == n else f"{word} {k}/{n}"
    return "tie"


def predicted_positions(model: nn.Module, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """Local-p's predicted window centres ``p_t``, ``(B, T)``: ``model.position``'s outputs in a teacher-forced pass."""
    position = getattr(model, "position", None)
    if not isinstance(position, nn.Module):
        raise ValueError(f"model must have a .position module (a luong_local_p model), got {type(model).__name__}")
    predicted = []
    hook = position.register_forward_hook(lambda mod, inputs, out: predicted.append(out))
    try:
        with torch.no_grad():
            model(src, tgt_in)
    finally:
        hook.remove()
    return torch.stack(predicted, dim=1)


def reversal_splits(seed: int = 0, sizes: tuple[int, int, int] = (20_000, 100, 300), letters: str = "abcdefghij",
                    lengths: tuple[int, int] = (3, 6)) -> Splits:
    """A toy task: reverse a string of letters. Each pair's gold alignment links target i to source n - 1 - i.

    One ``random.Random(seed)`` draws the train, valid and test pairs in that order, each of a length in
    ``lengths`` (inclusive).
    """
    seed = check_int("seed", seed, minimum=0)
    sizes = [check_positive_int(f"sizes[{i}]", n) for i, n in enumerate(sizes)]
    if len(sizes) != 3:
        raise ValueError(f"sizes must be (train, valid, test), got {len(sizes)} numbers")
    lo, hi = (check_positive_int("lengths[0]", lengths[0]), check_positive_int("lengths[1]", lengths[1]))
    if lo > hi or not letters:
        raise ValueError(f"lengths must be (shortest, longest) and letters non-empty, got {lengths}, {letters!r}")
    rng = random.Random(seed)

    def reverse_pair() -> Pair:
        toks = tuple(rng.choice(letters) for _ in range(rng.randint(lo, hi)))
        return Pair(src=toks, tgt=toks[::-1], align=tuple((len(toks) - 1 - i,) for i in range(len(toks))))

    return Splits(*([reverse_pair() for _ in range(n)] for n in sizes))


def course_rows(models: Mapping[str, Mapping]) -> dict[str, Mapping]:
    """One row per lesson: 1 (no attention), 2 (Bahdanau), 3 (its best variant by BLEU) and 6 (Transformer).

    ``models`` is ``{experiment name: results}`` for one language pair; rows whose model is missing are left out.
    """
    return {label: models[n] for label, n in _row_names(models).items() if n in models}


def course_models(pair: str = "fr") -> dict[str, dict]:
    """``{preset name: results}`` of the shipped translation runs of ``pair`` that are a preset's own file (seed 0, the
    preset's name): the runs saved under another name (other seeds, budgets, sizes) are left out."""
    check_choice("pair", pair, ("fr", "ko"))
    found = {}
    for name, r in report.load_all_results().items():
        preset = r.get("experiment", name)
        if r.get("pair", "fr") == pair and name == experiments.result_name(preset, pair) and r.get("seed", 0) == 0:
            found[preset] = r
    return found


def course_verdicts(models: Mapping[str, Mapping], pair: str, fig: str = "bleu") -> list[str]:
    """Lesson 6's verdict on "the highest ``fig``" among the attention models of :func:`course_rows`, by lesson 3's
    difference rule (:func:`compare_seeds`, :func:`claim_verdict`) over seeds 0-2; one line per model, then the verdict.

    A model with fewer than three shipped seeds makes the verdict ``unknown``: one seed cannot separate a lead from
    seed noise.
    """
    rows = course_rows(models)
    names = {label: models_name for label, models_name in _row_names(models).items()
             if label in rows and label != "no attention"}
    summaries = {label: seed_summary(n, pair, require_all=True) for label, n in names.items()}
    seeded = {label: s for label, s in summaries.items() if s is not None}
    label_of = {"bleu": "BLEU", "em_31_40": "exact match on 31-40 tokens"}[fig]
    digits = 2 if fig == "bleu" else 3
    lines = []
    for label, s in summaries.items():
        seed0 = rows[label]["bleu"] if fig == "bleu" else rows[label]["by_bucket"]["31-40"]["exact_match"]
        spread = (f"seeds {s['seeds']}: {s['mean'][fig]:.{digits}f} ± {s['sd'][fig]:.{digits}f}" if s
                  else "fewer than 3 seeds shipped")
        lines.append(f"  {label:28s} seed 0: {seed0:.{digits}f}   {spread}   ({rows[label]['train_steps']:,} steps)")
    missing = [label for label in summaries if label not in seeded]
    if missing or len(seeded) < 2:
        verdict = f"unknown (no 3 seeds of {', '.join(missing)})"
    else:
        leader = max(seeded, key=lambda label: seeded[label]["mean"][fig])
        others = [o for o in seeded if o != leader]
        signs = [compare_seeds(seeded[leader], seeded[o], fig) for o in others]
        level = [o for o, sign in zip(others, signs, strict=True) if sign == 0]
        if claim_verdict(signs) == "holds":
            verdict = f"{leader}, ahead of every other model by more than both sds"
        elif len(level) == len(others):
            verdict = "a tie: no mean is ahead of another by more than both sds"
        else:
            verdict = f"a tie between {leader} and {', '.join(level)} (ahead of the rest by more than both sds)"
    return [f"highest {label_of} -- {verdict}", *lines]


def _row_names(models: Mapping[str, Mapping]) -> dict[str, str]:
    """``course_rows``' labels -> the preset names behind them."""
    best = max((n for n in models if n.startswith("luong_")), key=lambda n: models[n]["bleu"], default=None)
    return {"no attention": "rnn_noattn", "Bahdanau": "bahdanau", f"best Luong ({best})": best,
            "Transformer": "transformer"}


def _forced_hits(model: nn.Module, pairs: Sequence[Pair], src_vocab, tgt_vocab, batch: int = 250):
    """``(hit, real)`` per batch of ``pairs``: teacher-forced argmax equal to the gold token, and not padding."""
    for i in range(0, len(pairs), batch):
        s, ti, to = loaders.collate(loaders.encode_pairs(pairs[i : i + batch], src_vocab, tgt_vocab))
        with torch.no_grad():
            yield (model(s, ti).argmax(-1) == to) & (to != vocab.PAD), to != vocab.PAD  # (B, T) each


def accuracy_by_position(model: nn.Module, pairs: Sequence[Pair], src_vocab, tgt_vocab, max_pos: int = 50):
    """Next-token accuracy with the gold prefix fed in, by target position (lesson 01).

    Returns:
        ``(accuracy, count)``, two arrays of length ``max_pos``: the share of right predictions at each
        position and how many sentences reach it (accuracy 0 where none does).
    """
    max_pos = check_positive_int("max_pos", max_pos)
    correct, total = np.zeros(max_pos), np.zeros(max_pos)
    for hit, real in _forced_hits(model, pairs, src_vocab, tgt_vocab):
        n = min(max_pos, hit.size(1))
        correct[:n] += hit[:, :n].sum(0).numpy()
        total[:n] += real[:, :n].sum(0).numpy()
    return correct / np.maximum(total, 1), total


def final_token_accuracy(model: nn.Module, pairs: Sequence[Pair], src_vocab, tgt_vocab) -> float:
    """The share of ``pairs`` whose last target token (before ``<eos>``) is predicted right,
    gold prefix fed in."""
    hits = []
    for hit, real in _forced_hits(model, pairs, src_vocab, tgt_vocab):
        last = real.sum(1) - 2  # (B,): index of the last token before <eos>
        hits += hit[torch.arange(hit.size(0)), last].tolist()
    return float(np.mean(hits))


def source_gradient(model: nn.Module, pairs: Sequence[Pair], src_vocab, tgt_vocab, step: int, n_pos: int = 30):
    """How much of one target word's loss gradient reaches each source word (lesson 02).

    Teacher-forced, in eval mode: the loss of the gold word at target position ``step`` (``-1``: the
    last word before ``<eos>``) of every pair is back-propagated to the source embeddings, and the norm
    of the gradient at each source position is averaged over the pairs.

    Returns:
        An array of length ``n_pos``: the mean gradient norm at source positions ``0 .. n_pos - 1``
        (every pair must have at least ``n_pos`` source tokens).
    """
    check_int("step", step, minimum=-1)
    if min(len(p.src) for p in pairs) < n_pos:
        shortest = min(len(p.src) for p in pairs)
        raise ValueError(f"every pair must have at least n_pos={n_pos} source tokens, got {shortest}")
    s, ti, to = loaders.collate(loaders.encode_pairs(pairs, src_vocab, tgt_vocab))
    embedded = []

    def keep(module, inputs, out):
        out.retain_grad()
        embedded.append(out)

    hook = model.src_emb.register_forward_hook(keep)
    model.eval()
    try:
        logits = model(s, ti)  # (B, T, V)
    finally:
        hook.remove()
    rows = torch.arange(len(pairs))
    t = (to != vocab.PAD).sum(1) - 2 if step == -1 else torch.full((len(pairs),), step)  # (B,)
    logp = torch.log_softmax(logits[rows, t], dim=-1)  # (B, V)
    (-logp[rows, to[rows, t]]).sum().backward()
    return embedded[0].grad.norm(dim=-1)[:, :n_pos].mean(0).numpy()  # (n_pos,)


def seed_runs(files: Sequence[str], figures: Sequence[str] = ("bleu", "aer")) -> dict:
    """Mean and sample sd over shipped runs that differ only in their seed (lesson 08's tables).

    Args:
        files: results names, one per seed (at least one; a missing file is an error, not a smaller mean).
        figures: top-level results fields (``None`` in a file counts as missing: the figure is left out).

    Returns:
        ``{"mean": {fig: m}, "sd": {fig: sd or None for one run}, "params": int, "seeds": [seed, ...]}``,
        the form :func:`compare_seeds` and :func:`attnlab.viz.tables.mean_sd_table` read.
    """
    if not files:
        raise ValueError("files is empty: give the results names of at least one run")
    runs = [results.read_result(f) for f in files]
    out = {"mean": {}, "sd": {}, "params": int(runs[0]["params"]), "seeds": [r.get("seed") for r in runs]}
    for fig in figures:
        values = [r.get(fig) for r in runs]
        if any(v is None for v in values):
            continue
        out["mean"][fig] = float(np.mean(values))
        out["sd"][fig] = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return out


def collapse_signs(attns: Sequence[torch.Tensor]) -> dict[str, float]:
    """Signs of collapsed attention over sentences (``(T, S)`` rows of one sentence each).

    ``distinct peaks``: the mean share of a sentence's target steps whose argmax is a position of their own
    (1: every step reads another word); ``top position share``: the mean share of steps on the sentence's most
    read position; ``last position share``: the mean share of steps on the last source position (``<eos>``).
    """
    if not attns:
        raise ValueError("attns is empty")
    distinct, top, last = [], [], []
    for a in attns:
        peaks = torch.as_tensor(a).argmax(1)  # (T,)
        counts = torch.bincount(peaks, minlength=a.shape[1])  # (S,)
        distinct.append(len(set(peaks.tolist())) / len(peaks))
        top.append(float(counts.max()) / len(peaks))
        last.append(float(counts[-1]) / len(peaks))
    return {"distinct peaks": float(np.mean(distinct)), "top position share": float(np.mean(top)),
            "last position share": float(np.mean(last))}


def seed_runs_verdict(a: Mapping, b: Mapping, fig: str, *, lower_is_better: bool = False, min_seeds: int = 3) -> str:
    """The course's difference rule on two :func:`seed_runs` summaries, or ``unknown`` with too few seeds.

    Unlike :func:`seed_verdict`, a side with fewer than ``min_seeds`` runs never borrows the other's spread.

    Returns:
        ``"first better"`` / ``"second better"`` (means apart by more than the two sds added, see
        :func:`compare_seeds`), ``"level"``, or ``"unknown (n and m seeds)"`` when either has fewer than
        ``min_seeds`` runs.
    """
    check_positive_int("min_seeds", min_seeds)
    n, m = len(a["seeds"]), len(b["seeds"])
    if min(n, m) < min_seeds:
        return f"unknown ({n} and {m} seeds)"
    sign = compare_seeds(a, b, fig, lower_is_better=lower_is_better)
    return {1: "first better", -1: "second better", 0: "level"}[sign]
