"""Write ``tests/fixtures/shipped_models.json``: what every shipped checkpoint does on 100 test sentences.

Usage::

    python scripts/make_shipped_fixture.py [--check]

The fixture freezes today's behaviour of each model in ``data/checkpoints/`` so that
``tests/test_shipped_models.py`` fails when a refactor renames a parameter, changes a forward
pass or breaks decoding. For a fixed set of sentences (every 20th of the default test split of the
model's language pair, i.e. 25 per length bucket) it stores, per model:

* ``bleu`` and ``exact_match`` of greedy translations (sacrebleu, as :mod:`attnlab.training.evaluate`);
* ``outputs_sha256``: a digest of the decoded sentences, one per line, in fixture order;
* ``ref_logprobs``: per sentence, the log-probability of its reference under teacher forcing
  (numbers that move with any change of the forward pass, even one that leaves every argmax
  alone), and ``ref_nll``, their mean per reference token (``<eos>`` included);
* ``weights_sha256``: the digest of the safetensors file the numbers came from.

The sentences themselves (source and reference tokens, per pair) are stored too, so the models are
checked on exactly these inputs even if the corpus generator changes; a separate test checks that
the default split still contains them. A checkpoint's pair is its JSON's ``pair`` (English->French
when absent, as in every checkpoint shipped before the second pair).

Regenerate only when a shipped checkpoint was retrained on purpose (``make checkpoints``); run with
``--check`` to compare with the stored fixture instead of writing it.
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


def sentence_ids() -> list[int]:
    """Indices into the default test split of the sentences the fixture uses."""
    return list(range(0, STRIDE * N_SENTENCES, STRIDE))


def default_test_sentences(pair: str = "fr") -> list[tuple[list[str], list[str]]]:
    """``(source tokens, reference tokens)`` of :func:`sentence_ids` in today's default test split of ``pair``."""
    from attnlab.data.corpus import make_test_split

    test = make_test_split(seed=0, target=pair)  # == make_splits(target=pair).test, what the lessons evaluate on
    return [(list(test[i].src), list(test[i].tgt)) for i in sentence_ids()]


TEXT_FAMILIES = ("rnn", "transformer")  # lesson 09's image models are checked by their lesson and tests


def translation_checkpoints() -> list[str]:
    """Names of the shipped translation models (the ones this fixture covers), sorted."""
    names = []
    for p in sorted(CHECKPOINTS.glob("*.safetensors")):
        meta = json.loads(p.with_suffix(".json").read_text())
        if meta.get("kind") in TEXT_FAMILIES:
            names.append(p.stem)
    return names


def checkpoint_pair(name: str) -> str:
    """The language pair shipped checkpoint ``name`` was trained on."""
    return json.loads((CHECKPOINTS / f"{name}.json").read_text()).get("pair", "fr")


def outputs_digest(hyps: list[list[str]]) -> str:
    """sha256 of the decoded sentences, space-joined tokens, one per line."""
    return hashlib.sha256("\n".join(" ".join(h) for h in hyps).encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@torch.no_grad()
def reference_logprobs(model, sentences, src_vocab, tgt_vocab) -> tuple[list[float], int]:
    """Per sentence the log-probability of its reference (``<eos>`` included), gold prefix fed in.

    All sentences go in one batch, in fixture order, so the padding (and the arithmetic) is the
    same every time. Returns the list and the number of reference tokens.
    """
    from attnlab.data.vocab import BOS, EOS, PAD

    pad = torch.nn.utils.rnn.pad_sequence
    src = pad([torch.tensor(src_vocab.encode(s, eos=True)) for s, _ in sentences], batch_first=True, padding_value=PAD)
    tgt = [tgt_vocab.encode(t, eos=False) for _, t in sentences]
    tgt_in = pad([torch.tensor([BOS, *t]) for t in tgt], batch_first=True, padding_value=PAD)  # (B, T)
    tgt_out = pad([torch.tensor([*t, EOS]) for t in tgt], batch_first=True, padding_value=PAD)  # (B, T)
    logp = torch.log_softmax(model(src, tgt_in).double(), dim=-1)  # (B, T, V)
    real = tgt_out != PAD  # (B, T)
    per_token = logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1) * real  # (B, T)
    return per_token.sum(dim=1).tolist(), int(real.sum())


def score_model(name: str, sentences) -> dict:
    """The fixture entry of shipped checkpoint ``name`` on ``sentences``."""
    from attnlab.data.metrics import corpus_bleu, exact_match
    from attnlab.models.decoding import translate
    from attnlab.training.checkpoint import load_checkpoint

    model, meta = load_checkpoint(CHECKPOINTS / name)
    src_vocab, tgt_vocab = meta["src_vocab"], meta["tgt_vocab"]
    hyps, _, _ = translate(model, [s for s, _ in sentences], src_vocab, tgt_vocab, beam=1, bs=len(sentences))
    refs = [t for _, t in sentences]
    logprobs, n_tokens = reference_logprobs(model, sentences, src_vocab, tgt_vocab)
    return {
        "bleu": round(corpus_bleu(hyps, refs), 4),
        "exact_match": round(exact_match(hyps, refs), 4),
        "outputs_sha256": outputs_digest(hyps),
        "ref_nll": round(-sum(logprobs) / n_tokens, 6),
        "weights_sha256": file_digest(CHECKPOINTS / f"{name}.safetensors"),
        "ref_logprobs": [round(x, 6) for x in logprobs],
    }


def build() -> dict:
    """The whole fixture, computed from the current code and checkpoints (one thread)."""
    torch.set_num_threads(1)
    names = translation_checkpoints()
    pairs = {name: checkpoint_pair(name) for name in names}
    sentences = {pair: default_test_sentences(pair) for pair in sorted(set(pairs.values()))}
    return {
        "about": "written by scripts/make_shipped_fixture.py; checked by tests/test_shipped_models.py",
        "split": {"function": "make_test_split(seed=0, target=pair)", "ids": sentence_ids()},
        "sentences": {
            pair: [{"src": " ".join(s), "ref": " ".join(t)} for s, t in sents] for pair, sents in sentences.items()
        },
        "models": {name: {"pair": pairs[name], **score_model(name, sentences[pairs[name]])} for name in names},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/make_shipped_fixture.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored fixture instead of writing it")
    args = ap.parse_args(argv)
    fixture = build()
    if args.check:
        stored = json.loads(FIXTURE.read_text())
        same = stored == fixture
        print("fixture up to date" if same else "fixture differs from the current code/checkpoints")
        return 0 if same else 1
    FIXTURE.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    for name, m in fixture["models"].items():
        print(f"{name:18s} BLEU {m['bleu']:7.2f}  EM {m['exact_match']:.2f}  NLL {m['ref_nll']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
