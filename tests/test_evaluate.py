"""Metrics: BLEU and chrF against sacrebleu directly, exact match, buckets, alignment agreement and AER."""

import math

import numpy as np
import pytest
import sacrebleu

from attnlab.data.corpus.splits import Pair, generate_pairs
from attnlab.data.metrics import alignment_agreement, alignment_error_rate, corpus_bleu, corpus_chrf, exact_match
from attnlab.models.decoding import forced_attention, translate
from attnlab.training.evaluate import evaluate_model


def test_bleu_wrapper_equals_sacrebleu():
    hyps = [["le", "chat", "dort", "."], ["un", "chien", "noir", "mange", "souvent", "."]]
    refs = [["le", "chat", "dort", "."], ["le", "chien", "noir", "mange", "souvent", "."]]
    direct = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]], tokenize="none")
    assert corpus_bleu(hyps, refs) == pytest.approx(direct.score)
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    # joined strings are accepted too
    assert corpus_bleu([" ".join(h) for h in hyps], [" ".join(r) for r in refs]) == pytest.approx(direct.score)


def test_bleu_keeps_our_tokenisation():
    # "l'" and "oiseau" are separate tokens: no extra tokenisation may glue or split them
    assert corpus_bleu([["l'", "oiseau", "chante", "."]], [["l'", "oiseau", "chante", "."]]) == pytest.approx(100)


def test_chrf_wrapper_equals_sacrebleu():
    hyps = [["고양이", "가", "잔다", "."], ["개", "가", "고양이", "를", "본다", "."]]
    refs = [["고양이", "가", "잔다", "."], ["개", "가", "소녀", "를", "본다", "."]]
    direct = sacrebleu.corpus_chrf([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]])
    assert corpus_chrf(hyps, refs) == pytest.approx(direct.score) and direct.score < 100
    assert corpus_chrf(refs, refs) == pytest.approx(100.0)
    # chrF ignores spaces: where a particle is split off does not matter
    assert corpus_chrf([["고양이가", "잔다."]], [["고양이", "가", "잔다", "."]]) == pytest.approx(100.0)


def test_exact_match_and_errors():
    assert exact_match([["a"], ["b"]], [["a"], ["c"]]) == 0.5
    with pytest.raises(ValueError, match="same length"):
        exact_match([["a"]], [])
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="chrF of an empty corpus"):
        corpus_chrf([], [])
    with pytest.raises(ValueError, match="same length"):
        corpus_chrf([["a"]], [["a"], ["b"]])


def test_alignment_agreement_counts_content_and_function_words():
    pair = Pair(
        src=("the", "red", "cat", "."),
        tgt=("le", "chat", "rouge", "."),
        align=((0,), (2,), (1,), (3,)),
        content=(False, True, True, False),
    )
    attn = np.array(
        [
            [0.9, 0.0, 0.1, 0.0],  # le -> the (hit)
            [0.0, 0.2, 0.8, 0.0],  # chat -> cat (hit)
            [0.0, 0.3, 0.7, 0.0],  # rouge -> cat (miss: gold is red)
            [0.0, 0.0, 0.4, 0.6],  # . -> . (hit)
        ]
    )
    res = alignment_agreement([attn], [pair])
    assert res == {"align_content": 0.5, "align_all": 0.75, "align_function": 1.0}
    with pytest.raises(ValueError, match="gold alignments"):
        alignment_agreement([attn], [Pair(pair.src, pair.tgt, None, None)])


# A Korean-style pair: particles have only possible links, one (made-up) target token has none.
KO_PAIR = Pair(
    src=("the", "cat", "sees", "the", "dog", "."),
    tgt=("고양이", "가", "개", "를", "본다", ".", "?"),
    align=((1,), (), (4,), (), (2,), (5,), ()),
    content=(True, False, True, False, True, False, False),
    possible=((), (1,), (), (4,), (), (), ()),
)
KO_ARGMAX = [1, 1, 2, 0, 2, 5, 3]  # hit S, hit P, miss, miss (an article), hit S, hit S, (ignored)


def one_hot(argmax, n_src):
    a = np.full((len(argmax), n_src), 0.01)
    a[np.arange(len(argmax)), argmax] = 1.0
    return a


def test_alignment_error_rate_hand_computed():
    # A = 6 links (the unlinked "?" is left out), S = 4, |A∩S| = 3, |A∩P| = 4: AER = 1 - 7/10
    assert alignment_error_rate([one_hot(KO_ARGMAX, 6)], [KO_PAIR]) == pytest.approx(0.3)
    perfect = one_hot([1, 1, 4, 4, 2, 5, 0], 6)
    assert alignment_error_rate([perfect], [KO_PAIR]) == pytest.approx(0.0)
    # French: no possible links, so P = S; "voit" ↔ (does, see) can find only one of its two links
    fr = Pair(
        ("it", "does", "not", "see", "."),
        ("il", "ne", "voit", "pas", "."),
        ((0,), (2,), (1, 3), (2,), (4,)),
        (False,) * 5,
    )
    assert alignment_error_rate([one_hot([0, 2, 3, 2, 4], 5)], [fr]) == pytest.approx(1 - 10 / 11)
    assert math.isnan(alignment_error_rate([], []))


def test_alignment_error_rate_equals_nltk_on_generated_pairs():
    metrics = pytest.importorskip("nltk.translate.metrics")
    rng = np.random.default_rng(0)
    pairs = generate_pairs(60, seed=4, target="ko") + generate_pairs(20, seed=4)
    attns = [rng.random((len(p.tgt), len(p.src))) for p in pairs]
    sure, possible, hyp = set(), set(), set()
    for k, (a, p) in enumerate(zip(attns, pairs, strict=True)):  # one corpus-wide set: offset every sentence
        maybe = p.possible or ((),) * len(p.tgt)
        for t, (s_links, p_links) in enumerate(zip(p.align, maybe, strict=True)):
            sure.update((k, t, s) for s in s_links)
            possible.update((k, t, s) for s in s_links + p_links)
            if s_links or p_links:
                hyp.add((k, t, int(a[t].argmax())))
    want = metrics.alignment_error_rate(sure, hyp, possible)
    assert alignment_error_rate(attns, pairs) == pytest.approx(want)
    assert alignment_error_rate(attns[:1], pairs[:1]) == pytest.approx(
        metrics.alignment_error_rate(
            {x for x in sure if x[0] == 0}, {x for x in hyp if x[0] == 0}, {x for x in possible if x[0] == 0}
        )
    )


@pytest.mark.parametrize(
    "attns, pairs, match",
    [
        (
            [np.ones((7, 5))],
            [KO_PAIR],
            r"attns\[0\] must have shape \(T, S\) = \(7, 6\) for its pair, got \(7, 5\)",
        ),
        ([one_hot(KO_ARGMAX, 6)] * 2, [KO_PAIR], "same length, got 2 and 1"),
        ([one_hot(KO_ARGMAX, 6)], [Pair(KO_PAIR.src, KO_PAIR.tgt)], "gold alignments"),
    ],
)
def test_alignment_scores_reject_bad_input(attns, pairs, match):
    with pytest.raises(ValueError, match=match):
        alignment_error_rate(attns, pairs)
    with pytest.raises(ValueError, match=match):
        alignment_agreement(attns, pairs)


def test_alignment_agreement_skips_tokens_without_sure_links():
    res = alignment_agreement([one_hot(KO_ARGMAX, 6)], [KO_PAIR])
    assert res == {"align_content": 2 / 3, "align_all": 3 / 4, "align_function": 1.0}


def test_forced_attention_restores_training_mode(copy_trained):
    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    model.train()
    try:
        attns = forced_attention(model, splits.test[:3], src_vocab, tgt_vocab)
        assert model.training
    finally:
        model.eval()
    assert [a.shape for a in attns] == [(len(p.tgt), len(p.src)) for p in splits.test[:3]]


def test_evaluate_model_reports_chrf_and_aer(copy_trained):
    model, splits, src_vocab, tgt_vocab, *_ = copy_trained
    pairs = splits.test[:40]
    res = evaluate_model(model, pairs, src_vocab, tgt_vocab)
    hyps, _, _ = translate(model, [p.src for p in pairs], src_vocab, tgt_vocab)
    refs = [list(p.tgt) for p in pairs]
    assert res["bleu"] == round(corpus_bleu(hyps, refs), 2)
    assert res["chrf"] == round(corpus_chrf(hyps, refs), 2)
    assert res["aer"] == round(alignment_error_rate(forced_attention(model, pairs, src_vocab, tgt_vocab), pairs), 4)
    assert res["aer"] < 0.5  # the copy model looks at the word it copies
    assert res["by_bucket"]["1-10"] == {
        "bleu": res["bleu"],
        "chrf": res["chrf"],
        "exact_match": res["exact_match"],
        "n": 40,
    }
    assert (res["target"], res["corpus_version"]) == ("fr", "synth-enfr-1")
    assert evaluate_model(model, pairs[:2], src_vocab, tgt_vocab, target="ko")["corpus_version"] == "synth-enko-1"
    with pytest.raises(ValueError, match="target must be one of 'fr', 'ko'"):
        evaluate_model(model, pairs[:2], src_vocab, tgt_vocab, target="de")


def test_evaluate_model_without_attention_has_aer_none(copy_trained):
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

    _, splits, src_vocab, tgt_vocab, *_ = copy_trained
    model = Seq2SeqRNN(RNNConfig(len(src_vocab), len(tgt_vocab), emb_dim=8, hid_dim=16, attention=None)).eval()
    res = evaluate_model(model, splits.test[:5], src_vocab, tgt_vocab)
    assert res["aer"] is None and "align_content" not in res


def test_cli_evaluates_a_checkpoint_on_a_fresh_split(copy_trained, tmp_path, capsys):
    import json

    from attnlab.training.checkpoint import save_checkpoint
    from attnlab.training.evaluate import main

    model, _, src_vocab, tgt_vocab, *_ = copy_trained
    path = save_checkpoint(model, tmp_path / "copy", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    assert main([str(path), "--seed", "3", "--per-bucket", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_test"] == 16 and out["test_seed"] == 3
    assert set(out["by_bucket"]) == {"1-10", "11-20", "21-30", "31-40"}
    # the CLI's figures are evaluate_model's on the same fresh split (sources unseen in training)
    from attnlab.data.corpus.splits import load_splits, make_test_split

    seen = {p.src for p in load_splits().train}
    pairs = make_test_split(seed=3, per_bucket=4, exclude=seen)
    assert not any(p.src in seen for p in pairs)
    direct = evaluate_model(model, pairs, src_vocab, tgt_vocab)
    timing = ("decode_seconds", "sentences_per_second")
    assert {k: v for k, v in out.items() if k not in timing + ("checkpoint", "test_seed")} == {
        k: v for k, v in direct.items() if k not in timing
    }
