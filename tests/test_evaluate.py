"""Metrics: the BLEU wrapper against sacrebleu directly, exact match, buckets, alignment."""

import numpy as np
import pytest
import sacrebleu

from attnlab.data import Pair
from attnlab.evaluate import alignment_agreement, corpus_bleu, exact_match


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


def test_exact_match_and_errors():
    assert exact_match([["a"], ["b"]], [["a"], ["c"]]) == 0.5
    with pytest.raises(ValueError, match="same length"):
        exact_match([["a"]], [])
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_bleu([], [])


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


def test_cli_evaluates_a_checkpoint_on_a_fresh_split(copy_trained, tmp_path, capsys):
    import json

    from attnlab.checkpoint import save_checkpoint
    from attnlab.evaluate import main

    model, _, src_vocab, tgt_vocab, *_ = copy_trained
    path = save_checkpoint(model, tmp_path / "copy", src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    assert main([str(path), "--seed", "3", "--per-bucket", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_test"] == 16 and out["test_seed"] == 3
    assert set(out["by_bucket"]) == {"1-10", "11-20", "21-30", "31-40"}
    assert 0 <= out["bleu"] <= 100 and "align_content" in out
