"""Every shipped checkpoint still translates exactly as it did when it was shipped.

The numbers come from ``tests/fixtures/shipped_models.json``, written once by
``scripts/make_shipped_fixture.py`` (see its docstring): per model, the log-probability of each of
100 fixed references of the default test split under teacher forcing, and the greedy translations
(digest, BLEU, exact match) of those sentences that no CPU can decode differently. A renamed
parameter, a changed forward pass or a broken decoder fails here, even when every unit test of the
refactored module passes. When a shipped model was retrained on purpose, regenerate the fixture
with the script.

What the CPU changes is kept out, so this holds on any x86 CPU; CI runs it (marker ``numeric``)
also under ``ATEN_CPU_CAPABILITY=default`` and ``=avx2``. The numbers (measured over the 58 models
x 100 sentences; the constants and their derivation are in the script):

* the models run in float64 (``.double()`` of the float32 checkpoint, exact). The largest
  |difference| of a reference log-probability from the AVX-512 run is 7.2e-12 under AVX2 and
  2.8e-11 without vector unit (at most 3.2e-11 in other batchings, or with MKL on SSE4.2); in
  float32 the same runs differ by up to 0.038, which is why the fixture is float64. The bound ``FIX.LOGPROB_TOL`` is 1e-8, 300 times
  the largest spread; scaling a weight tensor by 0.999 moves some log-probability by >= 4.5e-5.
* the decoder picks each greedy token from the float32 log-softmax of the float64 logits: a choice
  that leads by a few float32 ulps could flip on another CPU. Sentences with a choice that leads
  by less than ``FIX.MARGIN`` = 1e-3 nats (29 of 5800; the measured leads move by <= 4.3e-7
  between settings) are listed as ``near_ties`` and left out of the translation digest, BLEU and
  exact match; their reference log-probabilities are still checked.

Lesson 10's trained models (copy models, parsers, sorting models) are checked the same way on sets of
their own task's test items (the script's ``SETS``): 40 copy pairs per language pair, 40 parse sentences,
80 sorting lists; each family through its own scoring function (``FIX.score`` picks it: the copy models
over each sentence's extended vocabulary, the pointer networks on their pointers), float64, the same bound
and near-tie margin. Their largest |difference| between dispatch settings is 5.0e-14; scaling a weight
tensor by 0.999 moves some log-probability by >= 9.5e-6 (but for two biases a softmax ignores).

``test_a_changed_model_fails_the_comparison`` and ``test_changed_translations_fail_the_comparison``
run the comparison of the main test on perturbed models (translation models and each of lesson 10's
scoring functions) and require it to fail.
"""

import json
from pathlib import Path

import pytest
import torch

from .modules import load_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "shipped_models.json").read_text(encoding="utf-8"))
REGENERATE = (
    "if the model was retrained on purpose (or a checkpoint was added), run "
    "`python scripts/make_shipped_fixture.py --update` (it scores only new and retrained checkpoints)"
)


FIX = load_file("make_shipped_fixture", ROOT / "scripts" / "make_shipped_fixture.py")
SENTENCES = {
    pair: [(s["src"].split(" "), s["ref"].split(" ")) for s in sents] for pair, sents in FIXTURE["sentences"].items()
}


def test_the_fixture_covers_every_shipped_checkpoint():
    shipped = FIX.fixture_checkpoints()
    assert shipped == sorted(FIXTURE["models"]), REGENERATE
    assert {FIX.entry_set(m) for m in FIXTURE["models"].values()} == set(SENTENCES)


@pytest.mark.parametrize("name", sorted(SENTENCES))
def test_the_fixture_sentences_are_the_default_test_split(name):
    """The fixture's sentences of each set (a language pair's, or one of lesson 10's) are still in today's data."""
    ids = FIXTURE["split"]["ids"] if name in ("fr", "ko") else FIXTURE["sets"][name]["ids"]
    assert ids == (FIX.sentence_ids() if name in ("fr", "ko") else FIX.SETS[name][1]) and len(SENTENCES[name]) == len(ids)
    assert FIX.default_test_sentences(name) == SENTENCES[name], f"the default test data of {name!r} changed"


def _problems(name: str, model, meta) -> list[str]:
    """What ``model`` does differently from shipped model ``name``'s fixture entry (the one comparison)."""
    want = FIXTURE["models"][name]
    got = FIX.score(model, meta, SENTENCES[FIX.entry_set(want)], near_ties=want["near_ties"])
    return FIX.compare(got, want)


@pytest.mark.numeric
@pytest.mark.parametrize("name", sorted(FIXTURE["models"]))
def test_shipped_model_reproduces_its_fixture(name):
    torch.set_num_threads(1)
    want = FIXTURE["models"][name]
    assert FIX.checkpoint_set(name) == FIX.entry_set(want)
    assert FIX.file_digest(FIX.CHECKPOINTS / f"{name}.safetensors") == want["weights_sha256"], (
        f"{name}.safetensors is not the file the fixture was made from; {REGENERATE}"
    )
    problems = _problems(name, *FIX.load_model(name))
    assert not problems, f"{name}: the model changed: " + "; ".join(problems) + f"; {REGENERATE}"


def _perturbed(name: str, index: int, factor: float):
    model, meta = FIX.load_model(name)
    params = list(model.parameters())
    with torch.no_grad():
        params[index % len(params)].mul_(factor)
    return model, meta


# One RNN and one Transformer, and one model of each of lesson 10's scoring functions (the pointer-generator
# and the convolutional copy network: score_copy; the pointer network: score_pointer); their first, middle
# and last weight tensor.
@pytest.mark.numeric
@pytest.mark.parametrize("name", ["luong_general", "transformer", "pointer_gen", "conv_copy", "pointer_sort"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_changed_model_fails_the_comparison(name, where):
    """Scaling one weight tensor by 0.999 is a change the main test must see: its comparison of the reference
    log-probabilities (``FIX.compare_logprobs``, the first half of ``FIX.compare``) fails. The greedy outputs,
    which such a change need not alter, are not decoded (that half: the next test)."""
    torch.set_num_threads(1)
    n = len(list(FIX.load_model(name)[0].parameters()))
    index = {"first": 0, "middle": n // 2, "last": n - 1}[where]
    model, meta = _perturbed(name, index, 0.999)
    want = FIXTURE["models"][name]
    got = FIX.score(model, meta, SENTENCES[FIX.entry_set(want)], outputs=False)
    problems = FIX.compare_logprobs(got, want)
    assert any("reference log-probability" in p for p in problems), problems


@pytest.mark.numeric
# The factor is one that alters some greedy output of the fixture's sentences: the 1,000-step pointer-generator
# is sure enough of its words (smallest top-2 margin 0.13) that 0.95 changed no output, 0.9 does.
@pytest.mark.parametrize("name, factor", [("transformer", 0.95), ("pointer_gen", 0.9)])
def test_changed_translations_fail_the_comparison(name, factor):
    """A change that alters greedy translations fails on the digest/BLEU, not only on the log-probabilities."""
    torch.set_num_threads(1)
    problems = _problems(name, *_perturbed(name, 0, factor))  # the source embeddings
    assert any("greedy translations changed" in p for p in problems), problems
