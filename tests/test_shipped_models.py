"""Every shipped checkpoint still translates exactly as it did when it was shipped.

The numbers come from ``tests/fixtures/shipped_models.json``, written once by
``scripts/make_shipped_fixture.py`` (see its docstring): per model, greedy BLEU and exact match on
100 fixed sentences of the default test split, a digest of the decoded sentences, and the mean
reference NLL under teacher forcing. A renamed parameter, a changed forward pass or a broken
decoder fails here, even when every unit test of the refactored module passes. When a shipped
model was retrained on purpose, regenerate the fixture with the script.
"""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "shipped_models.json").read_text(encoding="utf-8"))
REGENERATE = "if the model was retrained on purpose, run `python scripts/make_shipped_fixture.py`"


def _script():
    spec = importlib.util.spec_from_file_location("make_shipped_fixture", ROOT / "scripts" / "make_shipped_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIX = _script()
SENTENCES = {
    pair: [(s["src"].split(" "), s["ref"].split(" ")) for s in sents] for pair, sents in FIXTURE["sentences"].items()
}


def test_the_fixture_covers_every_shipped_checkpoint():
    shipped = FIX.translation_checkpoints()
    assert shipped == sorted(FIXTURE["models"]), REGENERATE


@pytest.mark.parametrize("pair", sorted(SENTENCES))
def test_the_fixture_sentences_are_the_default_test_split(pair):
    assert FIXTURE["split"]["ids"] == FIX.sentence_ids() and len(SENTENCES[pair]) == 100
    assert FIX.default_test_sentences(pair) == SENTENCES[pair], f"the default test split of {pair!r} changed"


@pytest.mark.parametrize("name", sorted(FIXTURE["models"]))
def test_shipped_model_reproduces_its_fixture(name):
    torch.set_num_threads(1)
    want = FIXTURE["models"][name]
    assert FIX.checkpoint_pair(name) == want["pair"]
    assert FIX.file_digest(FIX.CHECKPOINTS / f"{name}.safetensors") == want["weights_sha256"], (
        f"{name}.safetensors is not the file the fixture was made from; {REGENERATE}"
    )
    got = FIX.score_model(name, SENTENCES[want["pair"]])
    # A refactor may move each logit by ~1e-6 (float32 arithmetic in another order); a sentence's
    # log-probability sums ~25 of them. Scaling one hidden state by 0.999 moves it by >= 2.6e-4.
    diff = [abs(a - b) for a, b in zip(got["ref_logprobs"], want["ref_logprobs"], strict=True)]
    worst = max(range(len(diff)), key=diff.__getitem__)
    assert diff[worst] <= 1e-4, (
        f"the forward pass changed: the reference log-probability of sentence {worst} "
        f"({FIXTURE['sentences'][want['pair']][worst]['src']!r}) is {got['ref_logprobs'][worst]}, was {want['ref_logprobs'][worst]}"
    )
    assert got["ref_nll"] == pytest.approx(want["ref_nll"], abs=1e-5)
    assert got["outputs_sha256"] == want["outputs_sha256"], "greedy translations changed"
    assert (got["bleu"], got["exact_match"]) == (want["bleu"], want["exact_match"])
