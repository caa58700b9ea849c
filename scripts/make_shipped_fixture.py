"""Write ``tests/fixtures/shipped_models.json``: what every shipped checkpoint does on 100 test sentences.

Usage::

    python scripts/make_shipped_fixture.py [--check | --update] [--out PATH]

The fixture freezes today's behaviour of each model in ``data/checkpoints/`` so that
``tests/test_shipped_models.py`` fails when a refactor renames a parameter, changes a forward
pass or breaks decoding. For a fixed set of sentences (every 20th of the default test split of the
model's language pair, i.e. 25 per length bucket) it stores, per model:

* ``ref_logprobs``: per sentence, the log-probability of its reference under teacher forcing
  (numbers that move with any change of the forward pass, even one that leaves every argmax
  alone), and ``ref_nll``, their mean per reference token (``<eos>`` included);
* ``outputs_sha256``: a digest of the greedy translations (one per line, fixture order) of the
  sentences not listed in ``near_ties``, and ``bleu`` and ``exact_match`` of those translations
  (sacrebleu, as :mod:`attnlab.training.evaluate`);
* ``near_ties``: the sentences left out of those three, the ones with a greedy choice that wins
  by less than :data:`MARGIN` nats (it could go the other way on another CPU; see there), and
  ``min_margin``, the smallest lead of a greedy choice in the sentences that count;
* ``weights_sha256``: the digest of the safetensors file the numbers came from.

Everything is computed in float64: the checkpoint's float32 weights are cast with ``.double()``
(exactly), so the last bits that differ between CPUs (AVX-512, AVX2 or no vector unit, MKL's code
path) are float64 rounding, ~1e-12 of a log-probability instead of the ~1e-4 to 4e-2 of float32
(luong_general_ko, for one). :func:`compare` allows :data:`LOGPROB_TOL`, derived from runs under
every dispatch setting (see there); a changed model moves these numbers by far more (the tests
scale one weight tensor by 0.999 and check that :func:`compare` refuses the result).

The sentences themselves (source and reference tokens, per pair) are stored too, so the models are
checked on exactly these inputs even if the corpus generator changes; a separate test checks that
the default split still contains them. A checkpoint's pair is its JSON's ``pair`` (English->French
when absent, as in every checkpoint shipped before the second pair).

Lesson 10's trained models are covered the same way, each on a set of its own task's test items
(:data:`SETS`, stored under ``sets``; an entry's ``set`` names it, a translation entry's ``pair``):
the copy models (family ``copy``: pointer-generator, no-copy baseline, convolutional copy network) on
every 10th pair of the copy corpus's test split of their language pair (``copy_fr``, ``copy_ko``: 40,
10 per bucket), scored by :func:`score_copy` over each sentence's extended vocabulary; the parsers on
every 50th sentence of the parse test split (``parse``: 40), scored as translation models; the sorting
models on every 40th held-out list (``sort``: 5 of each length 5-20), the pointer networks by
:func:`score_pointer` (log-probability of the gold pointers, greedy pointers), the seq2seq sorter as a
translation model. :func:`score` picks the scoring function by the checkpoint's family. Every family
runs in float64 and is held to the same :data:`LOGPROB_TOL` and :data:`MARGIN`; the copy and pointer
models even decode in float64, so their leads move by float64 rounding alone.

Regenerate only when a shipped checkpoint was retrained on purpose (``make checkpoints``); run with
``--check`` to compare the current code and checkpoints with the stored fixture instead (with
:func:`compare`, the test's comparison; it prints the largest deviation of each kind). ``--update``
scores only the checkpoints that are new or whose weights changed (a retrained model, a new seed)
and drops the entries of checkpoints no longer shipped; every other entry is kept as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "shipped_models.json"
CHECKPOINTS = ROOT / "data" / "checkpoints"
STRIDE = 20  # every 20th test sentence: 100 of the 2000, 25 per bucket (the split is stored bucket by bucket)
N_SENTENCES = 100
BATCH = 25  # sentences per batch: one length bucket (less padding: ~20% less float64 work than 100 at once)

#: Largest |difference| allowed in a reference log-probability (and in ``ref_nll``), in nats.
#: Measured (float64, the 58 models x 100 sentences of this fixture, against a run on AVX-512):
#: ATEN_CPU_CAPABILITY=avx2 7.2e-12, =default 2.8e-11 (``--check``); with the sentences in one
#: batch of 100, avx2 7.0e-12 (also with MKL_ENABLE_INSTRUCTIONS=AVX2), default 3.2e-11 (also
#: with MKL_ENABLE_INSTRUCTIONS=SSE4_2); every maximum is bahdanau_fertility_ko's, the
#: worst-conditioned model (its float32 numbers move by 0.038).
#: The bound is 300 times the largest spread measured. Scaling one weight tensor by 0.999 moves
#: some log-probability by 4.5e-5 or more (every tensor of bahdanau, luong_general and transformer
#: tried, except a Transformer's key-projection biases, which softmax ignores: 4e-15), 4500 times
#: the bound. Lesson 10's 20 models (their own sets; float64 decoding too), measured the same way: avx2
#: (with MKL_ENABLE_INSTRUCTIONS=AVX2) 2.8e-14, default (with SSE4_2) 5.0e-14; scaling one weight tensor by
#: 0.999 moves some log-probability by 9.5e-6 or more (every tensor of pointer_gen, pointer_nocopy,
#: conv_copy, parse_bahdanau, parse_noattn, pointer_sort and seq2seq_sort, except conv_copy's conv_alpha
#: and conv_kappa biases, a shift that their softmax ignores: 3e-14), 950 times the bound.
LOGPROB_TOL = 1e-8

#: A greedy choice that leads the runner-up by less than this (nats) is a near tie. The decoder
#: takes the float32 log-softmax of the float64 logits and adds it to a float32 running score, so a
#: choice is settled up to a few float32 ulps of the score: ~1e-5 at |score| 100, 1e-4 at 1000.
#: Measured: the largest change of a lead between dispatch settings is 4.3e-7; no greedy
#: translation differed between them; the smallest lead is 2.3e-5.
#: Leads below 1e-3 occur in 29 of the 5800 sentences (0 to 4 per model). Lesson 10's models: no lead moved
#: by 5e-5 (the fourth decimal of ``min_margin``) between dispatch settings, no output differed; leads below
#: 1e-3 in 5 of their 1,040 items.
MARGIN = 1e-3


def sentence_ids() -> list[int]:
    """Indices into the default test split of the sentences the fixture uses."""
    return list(range(0, STRIDE * N_SENTENCES, STRIDE))


#: Lesson 10's sets: where the items come from (today's default test data of the task, as the lesson
#: evaluates on) and the indices used: 40 copy pairs (the copy test split is 4 buckets x 100), 40 parse
#: sentences (4 buckets x 500), 80 sorting lists (16 lengths, 5-20, x 200), all stored bucket (length) by
#: bucket, so each bucket (length) gets the same share. Fewer than the translation models' 100: the copy
#: and parse models decode slowly, and the test must stay quick (a weight scaled by 0.999 still fails it).
SETS = {
    "copy_fr": ("make_copy_splits(target='fr', n_train=0, n_valid=0).test", list(range(0, 400, 10))),
    "copy_ko": ("make_copy_splits(target='ko', n_train=0, n_valid=0).test", list(range(0, 400, 10))),
    "parse": ("make_parse_test_split(seed=0)", list(range(0, 2000, 50))),
    "sort": ("sorting_pairs of pointer_experiments.held_out_lists(), in length order", list(range(0, 3200, 40))),
}


def set_items(name: str) -> list:
    """Every item (with ``src`` and ``tgt`` tokens) of today's default test data of sentence set ``name``."""
    if name in ("fr", "ko"):
        from attnlab.data.corpus import make_test_split

        return make_test_split(seed=0, target=name)  # == make_splits(target=pair).test, what the lessons evaluate on
    if name in ("copy_fr", "copy_ko"):
        from attnlab.data.corpus.copying import make_copy_splits

        # == copy_experiments.copy_data(pair, test_only=True), the lesson's test split (its sizes are the defaults)
        return make_copy_splits(target=name.removeprefix("copy_"), n_train=0, n_valid=0).test
    if name == "parse":
        from attnlab.data.parsing import make_parse_test_split

        return make_parse_test_split(seed=0)
    if name == "sort":
        from attnlab.data.sorting import sorting_pairs
        from attnlab.training.pointer_experiments import held_out_lists

        return [p for examples in held_out_lists().values() for p in sorting_pairs(examples)]
    raise ValueError(f"unknown sentence set {name!r}: expected 'fr', 'ko' or one of {sorted(SETS)}")


def default_test_sentences(pair: str = "fr") -> list[tuple[list[str], list[str]]]:
    """``(source tokens, reference tokens)`` of the fixture's items of today's default test data of ``pair``
    (a language pair: :func:`sentence_ids` of its translation test split; or a set of :data:`SETS`)."""
    items = set_items(pair)
    ids = sentence_ids() if pair in ("fr", "ko") else SETS[pair][1]
    return [(list(items[i].src), list(items[i].tgt)) for i in ids]


TEXT_FAMILIES = ("rnn", "transformer", "decoder_only")  # lesson 13's image models are checked by their lesson and tests


def sentence_set(meta: dict) -> str | None:
    """The sentence set a checkpoint (its JSON ``meta``) is checked on, or None for one the fixture leaves out.

    A translation model: its language pair. Lesson 10's: ``copy_<pair>`` for a copy model, ``parse`` for a
    parser, ``sort`` for a sorting model (:data:`SETS`). The toy runs of :mod:`attnlab.course.toys` (other
    tasks) and lesson 13's image models are checked by their lessons and tests.
    """
    kind, task, pair = meta.get("kind"), meta.get("task"), meta.get("pair", "fr")
    if kind in TEXT_FAMILIES and not task:
        return pair
    if kind == "copy" and task == "copy":
        return f"copy_{pair}"
    if kind == "rnn" and task == "parsing":
        return "parse"
    sorting_lists = str(meta.get("corpus_version", "")).startswith("sorting")  # a pointer network records no task
    if (kind == "rnn" and task == "sorting") or (kind == "pointer_net" and sorting_lists):
        return "sort"
    return None


def fixture_checkpoints() -> list[str]:
    """Names of the shipped checkpoints this fixture covers (translation and lesson 10's models), sorted."""
    return [
        p.stem
        for p in sorted(CHECKPOINTS.glob("*.safetensors"))
        if sentence_set(json.loads(p.with_suffix(".json").read_text())) is not None
    ]


def checkpoint_set(name: str) -> str | None:
    """The sentence set of shipped checkpoint ``name`` (:func:`sentence_set`)."""
    return sentence_set(json.loads((CHECKPOINTS / f"{name}.json").read_text()))


def entry_set(entry: dict) -> str:
    """The sentence set of a fixture entry: its ``set`` (lesson 10's) or its ``pair`` (a translation model's)."""
    return entry.get("set", entry.get("pair"))


def outputs_digest(hyps: list[list[str]]) -> str:
    """sha256 of the decoded sentences, space-joined tokens, one per line."""
    return hashlib.sha256("\n".join(" ".join(h) for h in hyps).encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@torch.no_grad()
def reference_logprobs(model, sentences, src_vocab, tgt_vocab) -> tuple[list[float], int]:
    """Per sentence the log-probability of its reference (``<eos>`` included), gold prefix fed in.

    The sentences go in batches of :data:`BATCH` in fixture order (a length bucket each), so the
    padding (and the arithmetic) is the same every time. The log-softmax runs in the model's dtype
    (float64 here: :func:`load_model`). Returns the list and the number of reference tokens.
    """
    from attnlab.data.vocab import BOS, EOS, PAD

    pad = torch.nn.utils.rnn.pad_sequence
    logprobs, n_tokens = [], 0
    for i in range(0, len(sentences), BATCH):
        batch = sentences[i : i + BATCH]
        src = pad([torch.tensor(src_vocab.encode(s, eos=True)) for s, _ in batch], batch_first=True, padding_value=PAD)
        tgt = [tgt_vocab.encode(t, eos=False) for _, t in batch]
        tgt_in = pad([torch.tensor([BOS, *t]) for t in tgt], batch_first=True, padding_value=PAD)  # (B, T)
        tgt_out = pad([torch.tensor([*t, EOS]) for t in tgt], batch_first=True, padding_value=PAD)  # (B, T)
        logp = torch.log_softmax(model(src, tgt_in).double(), dim=-1)  # (B, T, V)
        real = tgt_out != PAD  # (B, T)
        per_token = logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1) * real  # (B, T)
        logprobs += per_token.sum(dim=1).tolist()
        n_tokens += int(real.sum())
    return logprobs, n_tokens


@torch.no_grad()
def greedy_margins(model, sources, src_vocab) -> list[float]:
    """Per sentence, the smallest lead of the chosen token over the runner-up along its greedy path.

    The decoding is the library's own (:func:`attnlab.models.decoding.beam_steps` with ``k = 1``), on the
    batches :func:`attnlab.models.decoding.translate` makes with ``bs=BATCH`` (length-sorted, its length
    limit per batch); a lead is a difference of the step's log-probabilities (nats), ``inf`` after
    ``<eos>``.
    """
    from attnlab.data.vocab import PAD
    from attnlab.models.decoding import beam_steps, length_batches

    pad = torch.nn.utils.rnn.pad_sequence
    ids = [torch.tensor(src_vocab.encode(s, eos=True)) for s in sources]
    margins = [float("inf")] * len(ids)
    for rows in length_batches(len(ids), [len(x) for x in ids], BATCH):  # the batches translate makes
        src = pad([ids[i] for i in rows], batch_first=True, padding_value=PAD)  # (B, S)
        lead = torch.full((len(rows),), float("inf"), dtype=torch.float64)  # (B,)
        for step in beam_steps(model, src, beam=1, max_len=2 * src.size(1) + 10):
            top2 = step.logp.topk(2, dim=-1).values.double()  # (B, 2); a finished row: 0 and -inf
            lead = torch.minimum(lead, top2[:, 0] - top2[:, 1])  # (B,)
        for i, m in zip(rows, lead.tolist(), strict=True):
            margins[i] = m
    return margins


def load_model(name: str):
    """Shipped checkpoint ``name`` as a float64 model (eval mode) and its metadata."""
    from attnlab.training.checkpoint import load_checkpoint

    model, meta = load_checkpoint(CHECKPOINTS / name)
    return model.double(), meta


def _entry(hyps, refs, logprobs: list[float], n_tokens: int, near_ties: list[int], margins=None, *, bleu=True) -> dict:
    """A fixture entry from every sentence's output and reference log-probability; ``near_ties`` left out of
    the outputs' digest and scores; ``min_margin`` when the ``margins`` are known; no ``bleu`` with ``bleu=False``."""
    from attnlab.data.metrics import corpus_bleu, exact_match

    decisive = [i for i in range(len(hyps)) if i not in near_ties]
    hyps, refs = [hyps[i] for i in decisive], [refs[i] for i in decisive]
    entry = {"bleu": round(corpus_bleu(hyps, refs), 4)} if bleu else {}
    entry.update(
        exact_match=round(exact_match(hyps, refs), 4),
        outputs_sha256=outputs_digest(hyps),
        ref_nll=-sum(logprobs) / n_tokens,
        near_ties=near_ties,
    )
    if margins is not None:
        entry["min_margin"] = round(min(margins[i] for i in decisive), 4)
    return {**entry, "ref_logprobs": logprobs}


def _near_ties_of(margins: list[float]) -> list[int]:
    return [i for i, m in enumerate(margins) if not m >= MARGIN]


def _logprobs_only(logprobs: list[float], n_tokens: int) -> dict:
    return {"ref_nll": -sum(logprobs) / n_tokens, "ref_logprobs": logprobs}


def score(model, meta, sentences, near_ties: list[int] | None = None, *, outputs: bool = True) -> dict:
    """The fixture entry (all but set and weights digest) of ``model`` on ``sentences``, by its family's scoring:
    :func:`score_copy` for a copy model, :func:`score_pointer` for a pointer network, else
    :func:`score_translation` (translation models, the parsers, the seq2seq sorter).

    ``near_ties``: the sentences whose greedy outputs do not count (a stored fixture's list);
    ``None`` finds them: those with a greedy choice that leads by less than :data:`MARGIN`.
    ``outputs=False``: the reference log-probabilities alone (``ref_logprobs``, ``ref_nll``; no decoding), what
    :func:`compare_logprobs` needs.
    """
    scorer = {"copy": score_copy, "pointer_net": score_pointer}.get(meta["kind"], score_translation)
    return scorer(model, meta, sentences, near_ties, outputs=outputs)


def score_translation(model, meta, sentences, near_ties: list[int] | None = None, *, outputs: bool = True) -> dict:
    """:func:`score` of a model speaking the decoding protocol (``translate``); finding the near ties is slower."""
    from attnlab.models.decoding import translate

    src_vocab, tgt_vocab = meta["src_vocab"], meta["tgt_vocab"]
    if not outputs:
        return _logprobs_only(*reference_logprobs(model, sentences, src_vocab, tgt_vocab))
    sources = [s for s, _ in sentences]
    margins = None
    if near_ties is None:
        margins = greedy_margins(model, sources, src_vocab)
        near_ties = _near_ties_of(margins)
    hyps, _, _ = translate(model, sources, src_vocab, tgt_vocab, beam=1, bs=BATCH)
    logprobs, n_tokens = reference_logprobs(model, sentences, src_vocab, tgt_vocab)
    return _entry(hyps, [t for _, t in sentences], logprobs, n_tokens, near_ties, margins)


def _decoded_entry(hyps, refs, logprobs, n_tokens, near_ties, margins, outputs: bool, *, bleu=True) -> dict:
    """The entry of a scorer that measures the leads while it decodes (:func:`score_copy`, :func:`score_pointer`):
    the stored ``near_ties`` when given (and no ``min_margin``, as :func:`score_translation`), else those of
    ``margins``; the log-probabilities alone when not ``outputs``."""
    if not outputs:
        return _logprobs_only(logprobs, n_tokens)
    if near_ties is None:
        return _entry(hyps, refs, logprobs, n_tokens, _near_ties_of(margins), margins, bleu=bleu)
    return _entry(hyps, refs, logprobs, n_tokens, near_ties, bleu=bleu)


def _leads(logp: torch.Tensor, steps: list[int]) -> list[float]:
    """Per row of ``logp (B, L, K)`` (log-probabilities along a greedy path), the smallest lead of the top choice
    over the runner-up in the row's first ``steps[b]`` steps (``inf`` when it never has a runner-up)."""
    top2 = logp.double().topk(2, dim=-1).values  # (B, L, 2)
    lead = top2[..., 0] - top2[..., 1]  # (B, L)
    return [float(lead[b, :n].min()) if n else float("inf") for b, n in enumerate(steps)]


@torch.no_grad()
def score_copy(model, meta, sentences, near_ties: list[int] | None = None, *, outputs: bool = True) -> dict:
    """:func:`score` of a copy model (:class:`attnlab.models.copying.CopyModel`), over each sentence's extended
    vocabulary (its source words outside the target vocabulary get temporary ids: :func:`encode_copy_pair`).

    The reference log-probabilities are the model's teacher-forced mixture (``tgt_out`` as it was trained on:
    copied words by their temporary ids, or ``<unk>`` without copying); the outputs are
    :func:`~attnlab.models.copying.greedy_copy`'s, the decoding the lesson measures (``max_len`` as
    ``copy_experiments.copy_outputs``), in batches of :data:`BATCH` in fixture order. The leads come from the
    same model fed its own greedy output (the inputs greedy decoding fed it, ``<pad>`` after ``<eos>``).
    """
    from attnlab.data.loaders import collate
    from attnlab.data.vocab import BOS, EOS, PAD
    from attnlab.models.copying import decode_extended, encode_copy_pair, greedy_copy

    src_vocab, tgt_vocab = meta["src_vocab"], meta["tgt_vocab"]
    hyps, margins, logprobs, n_tokens = [], [], [], 0
    for i in range(0, len(sentences), BATCH):
        batch = sentences[i : i + BATCH]
        enc = [encode_copy_pair(s, t, src_vocab, tgt_vocab, copy=model.config.copy) for s, t in batch]
        src, copy_ids, tgt_in, tgt_out = collate([e[:4] for e in enc])  # (B, S), (B, S), (B, T), (B, T)
        logp = model(src, copy_ids, tgt_in).double()  # (B, T, V+X)
        real = tgt_out != PAD  # (B, T)
        logprobs += (logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1) * real).sum(1).tolist()
        n_tokens += int(real.sum())
        if not outputs:
            continue
        ids, _ = greedy_copy(model, src, copy_ids, max_len=2 * src.size(1) + 10)  # (B, L)
        hyps += [decode_extended(row, tgt_vocab, e[4]) for row, e in zip(ids.tolist(), enc, strict=True)]
        fed = torch.cat([torch.full_like(ids[:, :1], BOS), ids[:, :-1]], dim=1)  # (B, L)
        ended = (ids == EOS).long()  # (B, L)
        steps = [int(e.argmax()) + 1 if e.any() else ids.size(1) for e in ended]
        margins += _leads(model(src, copy_ids, fed), steps)
    return _decoded_entry(hyps, [t for _, t in sentences], logprobs, n_tokens, near_ties, margins, outputs)


@torch.no_grad()
def score_pointer(model, meta, sentences, near_ties: list[int] | None = None, *, outputs: bool = True) -> dict:
    """:func:`score` of a pointer network on sorting lists (:class:`attnlab.models.pointer_net.PointerNet`).

    A sentence is a list (source: the values; reference: them sorted, as :func:`attnlab.data.sorting.sorting_pairs`
    writes it); the gold output is the order of positions that sorts it. The reference log-probability is the
    sum of the gold pointers' log-softmax under teacher forcing; the outputs are the greedy pointers of
    ``model.decode`` (no BLEU: ``exact_match`` is the exact order). Lists of one length form a batch.
    """
    from attnlab.data.sorting import pointer_batch

    dtype = next(model.parameters()).dtype
    hyps, refs, margins, logprobs, n_tokens = [], [], [], [], 0
    i = 0
    while i < len(sentences):
        j = i
        while j < len(sentences) and len(sentences[j][0]) == len(sentences[i][0]):
            j += 1
        examples = []
        for src, ref in sentences[i:j]:
            values = [int(v) for v in src]
            order = sorted(range(len(values)), key=values.__getitem__)
            if [str(values[k]) for k in order] != ref:
                raise ValueError(f"a sorting sentence's reference must be its source sorted, got {src} -> {ref}")
            examples.append((values, order))
        x, gold = pointer_batch(examples)  # (B, N, 1), (B, N)
        x = x.to(dtype)  # the float32 inputs, exactly
        logp = torch.log_softmax(model(x, gold).double(), dim=-1)  # (B, N, N)
        logprobs += logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1).sum(1).tolist()
        n_tokens += gold.numel()
        i = j
        if not outputs:
            continue
        picks, probs = model.decode(x)  # (B, N), (B, N, N)
        hyps += [[str(k) for k in row] for row in picks.tolist()]
        refs += [[str(k) for k in row] for row in gold.tolist()]
        margins += _leads(probs.log(), [gold.size(1)] * gold.size(0))  # a masked position: log 0 = -inf
    return _decoded_entry(hyps, refs, logprobs, n_tokens, near_ties, margins, outputs, bleu=False)


def score_model(name: str, sentences, near_ties: list[int] | None = None) -> dict:
    """The fixture entry of shipped checkpoint ``name`` on ``sentences`` (``near_ties``: as :func:`score`)."""
    model, meta = load_model(name)
    entry = score(model, meta, sentences, near_ties)
    return {**entry, "weights_sha256": file_digest(CHECKPOINTS / f"{name}.safetensors")}


def compare(got: dict, want: dict) -> list[str]:
    """What differs between two fixture entries beyond what the CPU changes; empty when they agree.

    Log-probabilities (and the NLL) may differ by :data:`LOGPROB_TOL` (:func:`compare_logprobs`); the greedy
    translations of the sentences that are no near ties (digest, BLEU, exact match) must be identical.
    """
    problems = compare_logprobs(got, want)
    for key in ("outputs_sha256", "bleu", "exact_match"):  # a pointer network has no BLEU
        if got.get(key) != want.get(key):
            problems.append(f"greedy translations changed: {key} is {got.get(key)!r}, was {want.get(key)!r}")
    return problems


def compare_logprobs(got: dict, want: dict) -> list[str]:
    """The first half of :func:`compare`: the reference log-probabilities and NLL, within :data:`LOGPROB_TOL`."""
    problems = []
    diff = [abs(a - b) for a, b in zip(got["ref_logprobs"], want["ref_logprobs"], strict=True)]
    worst = max(range(len(diff)), key=diff.__getitem__)
    if not diff[worst] <= LOGPROB_TOL:  # `not <=`: a NaN fails too
        problems.append(
            f"the reference log-probability of sentence {worst} is {got['ref_logprobs'][worst]!r}, "
            f"was {want['ref_logprobs'][worst]!r} (|difference| {diff[worst]:.3g} > {LOGPROB_TOL:g})"
        )
    if not abs(got["ref_nll"] - want["ref_nll"]) <= LOGPROB_TOL:
        problems.append(f"the reference NLL is {got['ref_nll']!r}, was {want['ref_nll']!r}")
    return problems


def build(stored: dict | None = None, *, keep: dict | None = None) -> dict:
    """The whole fixture, computed from the current code and checkpoints (one thread).

    With ``stored`` (a fixture), each model's translations are scored without its stored
    ``near_ties`` (as the test does) instead of finding them again. With ``keep`` (a fixture), a
    model whose entry there has the checkpoint's current ``weights_sha256`` keeps that entry and is
    not scored again (``--update``: only new and retrained checkpoints are scored).
    """
    torch.set_num_threads(1)
    names = fixture_checkpoints()
    sets = {name: checkpoint_set(name) for name in names}
    old = keep["models"] if keep else {}
    kept = {
        name: old[name]
        for name in names
        if name in old
        and entry_set(old[name]) == sets[name]
        and old[name]["weights_sha256"] == file_digest(CHECKPOINTS / f"{name}.safetensors")
    }
    order = sorted(set(sets.values()), key=lambda k: (k not in ("fr", "ko"), k))  # the translation pairs first
    sentences = {k: default_test_sentences(k) for k in order}

    def fresh(name: str) -> dict:
        where = {"pair": sets[name]} if sets[name] in ("fr", "ko") else {"set": sets[name]}
        return {**where, **score_model(name, sentences[sets[name]], _near_ties(stored, name))}

    return {
        "about": "written by scripts/make_shipped_fixture.py; checked by tests/test_shipped_models.py",
        "split": {"function": "make_test_split(seed=0, target=pair)", "ids": sentence_ids()},
        "sets": {k: {"function": SETS[k][0], "ids": SETS[k][1]} for k in order if k in SETS},
        "sentences": {
            k: [{"src": " ".join(s), "ref": " ".join(t)} for s, t in sents] for k, sents in sentences.items()
        },
        "models": {name: kept[name] if name in kept else fresh(name) for name in names},
    }


def _near_ties(stored: dict | None, name: str) -> list[int] | None:
    return stored["models"][name]["near_ties"] if stored and name in stored["models"] else None


def check(stored: dict, fixture: dict) -> list[str]:
    """Problems of ``fixture`` (freshly built) against ``stored``, by :func:`compare`; prints the deviations."""
    problems = []
    for key in ("split", "sets", "sentences"):
        if stored.get(key) != fixture.get(key):
            problems.append(f"the fixture's {key} changed")
    if sorted(stored["models"]) != sorted(fixture["models"]):
        problems.append(f"the shipped checkpoints are {sorted(fixture['models'])}, were {sorted(stored['models'])}")
    worst = (0.0, "")
    for name in sorted(set(stored["models"]) & set(fixture["models"])):
        got, want = fixture["models"][name], stored["models"][name]
        for key in ("pair", "set", "weights_sha256"):
            if got.get(key) != want.get(key):
                problems.append(f"{name}: {key} is {got.get(key)!r}, was {want.get(key)!r}")
        problems += [f"{name}: {p}" for p in compare(got, want)]
        dev = max(abs(a - b) for a, b in zip(got["ref_logprobs"], want["ref_logprobs"], strict=True))
        worst = max(worst, (dev, name))
    print(f"largest |difference| of a reference log-probability: {worst[0]:.3g} ({worst[1]}); bound {LOGPROB_TOL:g}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/make_shipped_fixture.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored fixture instead of writing it")
    ap.add_argument("--out", type=Path, default=FIXTURE, help="where to write (default: %(default)s)")
    ap.add_argument(
        "--update", action="store_true",
        help="score only the checkpoints that are new or retrained (weights digest changed); keep the other entries",
    )
    args = ap.parse_args(argv)
    if args.check:
        stored = json.loads(FIXTURE.read_text(encoding="utf-8"))
        problems = check(stored, build(stored))
        print("\n".join(problems) or "fixture up to date")
        return 1 if problems else 0
    fixture = build(keep=json.loads(FIXTURE.read_text(encoding="utf-8")) if args.update else None)
    args.out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, m in fixture["models"].items():
        bleu = f"{m['bleu']:7.2f}" if "bleu" in m else "      –"
        margin = f"{m['min_margin']:.4f}" if "min_margin" in m else "(kept)"
        print(
            f"{name:28s} BLEU {bleu}  EM {m['exact_match']:.2f}  NLL {m['ref_nll']:.4f}  "
            f"near ties {len(m['near_ties'])}  min margin {margin}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
