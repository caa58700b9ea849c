"""The lessons' helpers: setup, attention-peak bookkeeping, seed comparisons, the toy reversal task."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from attnlab.course import lessons  # noqa: E402
from attnlab.data.corpus import Pair  # noqa: E402
from attnlab.training.experiments import seed_result_name  # noqa: E402
from attnlab.training.results import read_result  # noqa: E402


def test_setup_lesson_sets_seed_print_options_and_figures():
    threads = torch.get_num_threads()
    try:
        with plt.rc_context():
            lessons.setup_lesson(seed=3, dpi=72, figsize=(4, 3))
            a = torch.rand(3)
            torch.manual_seed(3)
            assert torch.equal(a, torch.rand(3))  # seeded with 3
            assert plt.rcParams["figure.dpi"] == 72 and tuple(plt.rcParams["figure.figsize"]) == (4, 3)
            assert str(torch.tensor([1 / 3, 1e-5])) == "tensor([0.3333, 0.0000])"  # 4 decimals, no 1e-05
    finally:
        torch.set_num_threads(threads)
        torch.set_printoptions(profile="default")
    with pytest.raises(ValueError, match="dpi must be >= 1, got 0"):
        lessons.setup_lesson(dpi=0)
    with pytest.raises(ValueError, match="figsize must be"):
        lessons.setup_lesson(figsize=(4, 0))


def pair(tgt, align, content=None):
    return Pair(src=tuple("abcd"), tgt=tuple(tgt), align=tuple(align), content=content)


def one_hot(tops, S=4):
    return torch.nn.functional.one_hot(torch.tensor(tops), S).float()  # (T, S): the peak of step t at tops[t]


def test_attention_peaks_counts_hits_near_misses_and_words():
    p = pair(["le", "chat", "x", "ne"], [(0,), (1,), (), (3,)])
    peaks = lessons.attention_peaks([one_hot([0, 2, 1, 3])], [p], words={"le", "x"})
    assert peaks["words_on_gold"] == [True, False]  # "le" on gold; "x" has no gold link
    assert peaks["misses_next_to_gold"] == [True, False]  # chat looks one off; x has no gold to be near
    assert peaks["on_gold_by_word"] == {"le": [True], "chat": [False], "ne": [True]}
    with pytest.raises(ValueError, match="attns has 2 matrices for 1 pairs"):
        lessons.attention_peaks([one_hot([0]), one_hot([0])], [p])
    with pytest.raises(ValueError, match=r"attns\[0\] must be \(T, S\) with T = 4"):
        lessons.attention_peaks([one_hot([0, 1])], [p])


def test_peak_offsets_shares_of_content_words():
    p = pair(["a", "b", "c", "d"], [(1,), (1,), (1,), (1,)], content=(True, True, True, False))
    shares = lessons.peak_offsets([one_hot([1, 0, 2, 3])], [p])
    assert shares == pytest.approx({"on gold": 1 / 3, "one before": 1 / 3, "one after": 1 / 3, "elsewhere": 0.0})
    with pytest.raises(ValueError, match="content flags"):
        lessons.peak_offsets([one_hot([1, 0, 2, 3])], [pair("abcd", [(1,)] * 4)])


def test_compare_seeds_and_claim_verdict():
    a = {"mean": {"bleu": 10.0, "aer": 0.1}, "sd": {"bleu": 1.0, "aer": 0.01}}
    b = {"mean": {"bleu": 7.0, "aer": 0.2}, "sd": {"bleu": 1.0, "aer": 0.01}}
    assert lessons.compare_seeds(a, b, "bleu") == 1 and lessons.compare_seeds(b, a, "bleu") == -1
    assert lessons.compare_seeds(a, b, "aer", lower_is_better=True) == 1  # a's error is lower
    level = {"mean": {"bleu": 8.5}, "sd": {"bleu": 0.5}}
    assert lessons.compare_seeds(a, level, "bleu") == 0  # a gap of 1.5 within the spreads 1 + 0.5
    with pytest.raises(ValueError, match="b has no mean and sd of 'chrf'"):
        lessons.compare_seeds({"mean": {"chrf": 1}, "sd": {"chrf": 1}}, b, "chrf")
    assert [lessons.claim_verdict(s) for s in ([1, 1], [1, 0], [-1, -1], [0, -1, 0], [1, -1], [0])] == [
        "holds", "holds 1/2", "against", "against 1/3", "mixed", "tie"]
    with pytest.raises(ValueError, match="signs is empty"):
        lessons.claim_verdict([])
    with pytest.raises(ValueError, match="signs must be -1, 0 or"):
        lessons.claim_verdict([2])


class Toy(nn.Module):
    """Predicts a position per target step through .position, like luong_local_p."""

    def __init__(self):
        super().__init__()
        self.position = nn.Identity()

    def forward(self, src, tgt_in):
        for t in range(tgt_in.shape[1]):
            self.position(src.float().mean(1) + t)  # (B,)


def test_predicted_positions_stacks_one_value_per_step_and_removes_its_hook():
    model = Toy()
    p = lessons.predicted_positions(model, torch.tensor([[1, 3], [2, 2]]), torch.zeros(2, 3, dtype=torch.long))
    assert torch.equal(p, torch.tensor([[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]]))
    assert not model.position._forward_hooks
    with pytest.raises(ValueError, match="must have a .position module"):
        lessons.predicted_positions(nn.Linear(2, 2), torch.zeros(1, 2), torch.zeros(1, 2))


def test_reversal_splits_are_reversals_and_seeded():
    toy = lessons.reversal_splits(seed=0, sizes=(50, 5, 7))
    assert (len(toy.train), len(toy.valid), len(toy.test)) == (50, 5, 7)
    for p in toy.train:
        assert 3 <= len(p.src) <= 6 and p.tgt == p.src[::-1] and set(p.src) <= set("abcdefghij")
        assert all(p.tgt[i] == p.src[j] for i, (j,) in enumerate(p.align))
    assert lessons.reversal_splits(seed=0, sizes=(50, 5, 7)) == toy != lessons.reversal_splits(seed=1, sizes=(50, 5, 7))
    with pytest.raises(ValueError, match=r"sizes\[1\] must be >= 1, got 0"):
        lessons.reversal_splits(sizes=(5, 0, 5))
    with pytest.raises(ValueError, match="lengths must be"):
        lessons.reversal_splits(lengths=(6, 3))


def test_course_rows_picks_the_best_luong_variant():
    models = {"rnn_noattn": {"bleu": 29}, "bahdanau": {"bleu": 98}, "luong_dot": {"bleu": 97}, "luong_concat": {"bleu": 99}}
    rows = lessons.course_rows(models)
    assert list(rows) == ["no attention", "Bahdanau", "best Luong (luong_concat)"]  # no Transformer in models
    assert rows["best Luong (luong_concat)"] is models["luong_concat"]
    assert list(lessons.course_rows({"transformer": {"bleu": 1}})) == ["Transformer"]


def test_shipped_figures_reads_the_shipped_run():
    figs, params = lessons.shipped_figures("bahdanau", "fr", ["bleu", "em_31_40", "no_such_figure"])
    assert 90 < figs["bleu"] <= 100 and 0 <= figs["em_31_40"] <= 1 and figs["no_such_figure"] is None
    r = read_result("bahdanau")
    by_bucket, _ = lessons.shipped_figures("bahdanau", "fr", ["bleu_21_30", "em_1_10"])
    assert by_bucket == {"bleu_21_30": r["by_bucket"]["21-30"]["bleu"], "em_1_10": r["by_bucket"]["1-10"]["exact_match"]}
    with pytest.raises(ValueError, match="bucket '41-50'"):
        lessons.shipped_figures("bahdanau", "fr", ["bleu_41_50"])
    assert params > 0
    with pytest.raises(ValueError, match="pair must be one of 'fr', 'ko', got 'de'"):
        lessons.shipped_figures("bahdanau", "de", ["bleu"])


# --- lessons 01-03: accuracy by position, the gradient shortcut, seeds of a lesson model ---------------


def _tiny(attention):
    from attnlab.data import corpus, vocab
    from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

    splits = corpus.load_splits()
    sv, tv = vocab.build_vocabs(splits)
    torch.manual_seed(0)
    cfg = RNNConfig(len(sv), len(tv), emb_dim=8, hid_dim=12, attention=attention, attn_dim=6)
    return Seq2SeqRNN(cfg).eval(), splits, sv, tv


def test_accuracy_by_position_and_final_token_match_a_direct_count():
    from attnlab.data import loaders, vocab

    model, splits, sv, tv = _tiny(None)
    pairs = [p for p in splits.test if p.bucket == "1-10"][:12]
    acc, total = lessons.accuracy_by_position(model, pairs, sv, tv, max_pos=15)
    s, ti, to = loaders.collate(loaders.encode_pairs(pairs, sv, tv))
    with torch.no_grad():
        hit = (model(s, ti).argmax(-1) == to) & (to != vocab.PAD)
    assert total[0] == len(pairs) and total.tolist() == sorted(total.tolist(), reverse=True)
    assert acc[0] == pytest.approx(hit[:, 0].float().mean().item())
    last = (to != vocab.PAD).sum(1) - 2
    expected = hit[torch.arange(len(pairs)), last].float().mean().item()
    assert lessons.final_token_accuracy(model, pairs, sv, tv) == pytest.approx(expected)
    with pytest.raises(ValueError, match="max_pos"):
        lessons.accuracy_by_position(model, pairs, sv, tv, max_pos=0)


def test_source_gradient_is_one_norm_per_position_and_refuses_short_sentences():
    model, splits, sv, tv = _tiny("bahdanau")
    pairs = [p for p in splits.test if p.bucket == "11-20"][:6]
    g = lessons.source_gradient(model, pairs, sv, tv, step=0, n_pos=10)
    assert g.shape == (10,) and (g >= 0).all() and g.sum() > 0
    g_last = lessons.source_gradient(model, pairs, sv, tv, step=-1, n_pos=10)
    assert not torch.allclose(torch.as_tensor(g), torch.as_tensor(g_last))  # another target word, another signal
    with pytest.raises(ValueError, match="at least n_pos=40 source tokens"):
        lessons.source_gradient(model, pairs, sv, tv, step=0, n_pos=40)


def test_seed_summary_is_the_mean_and_sample_sd_of_the_shipped_seeds():
    import numpy as np

    from attnlab.training.results import read_result

    s = lessons.seed_summary("bahdanau", "fr", ["bleu", "aer"])
    runs = [read_result(n) for n in ("bahdanau", "bahdanau_seed1", "bahdanau_seed2")]
    assert s["mean"]["bleu"] == pytest.approx(np.mean([r["bleu"] for r in runs]))
    assert s["sd"]["aer"] == pytest.approx(np.std([r["aer"] for r in runs], ddof=1))
    assert s["params"] == runs[0]["params"] and s["seeds"] == [0, 1, 2]
    assert lessons.seed_summary("bahdanau_coverage", "ko", ["bleu"], require_all=True) is None  # only seed 0 ships
    assert lessons.seed_summary("bahdanau", "ko", ["bleu"], require_all=True)["files"] == [
        "bahdanau_ko", "bahdanau_seed1_ko", "bahdanau_seed2_ko"]


def test_seed_files_and_seed_summary_read_the_shipped_seeds():
    from attnlab.course.lessons import seed_files, seed_summary

    assert seed_files("bahdanau", "fr") == ["bahdanau", "bahdanau_seed1", "bahdanau_seed2"]
    assert seed_files("bahdanau", "ko", (0, 2)) == ["bahdanau_ko", "bahdanau_seed2_ko"]
    s = seed_summary("bahdanau", "fr", ("bleu", "aer"))
    assert s["n"] == 3 and s["files"] == seed_files("bahdanau", "fr")
    bleus = [read_result(f)["bleu"] for f in s["files"]]
    assert s["mean"]["bleu"] == pytest.approx(np.mean(bleus)) and s["sd"]["bleu"] == pytest.approx(np.std(bleus, ddof=1))
    one = seed_summary("bahdanau", "ko", ("bleu",), seeds=(0,))
    assert one["n"] == 1 and one["sd"]["bleu"] is None
    assert seed_summary("no_such_run", "fr", ("bleu",)) is None


def test_seed_verdict_borrows_the_spread_of_the_side_with_seeds():
    from attnlab.course.lessons import seed_verdict

    three = {"mean": {"bleu": 98.7, "aer": 0.11}, "sd": {"bleu": 0.2, "aer": 0.01}}
    one = {"mean": {"bleu": 99.2, "aer": 0.05}, "sd": {"bleu": None, "aer": None}}
    assert seed_verdict(one, three, "bleu") == "better"  # 0.5 > 0.2 + 0.2
    assert seed_verdict(three, one, "bleu") == "worse"
    assert seed_verdict({**one, "mean": {"bleu": 99.0}}, three, "bleu") == "tie"  # 0.3 <= 0.4
    assert seed_verdict(one, three, "aer", lower_is_better=True) == "better"
    assert seed_verdict(one, one, "bleu") == "unknown (1 run each)"
    assert seed_verdict(None, three, "bleu") == "not trained"
def test_seed_runs_mean_and_sample_sd_over_shipped_runs_and_seed_verdict():
    from attnlab.training import results

    files = ["bahdanau", "bahdanau_seed1", "bahdanau_seed2"]
    s = lessons.seed_runs(files, ("bleu", "aer"))
    bleus = [results.read_result(f)["bleu"] for f in files]
    mean = sum(bleus) / 3
    assert s["mean"]["bleu"] == pytest.approx(mean)
    assert s["sd"]["bleu"] == pytest.approx((sum((b - mean) ** 2 for b in bleus) / 2) ** 0.5)
    assert s["seeds"] == [0, 1, 2] and s["params"] == results.read_result("bahdanau")["params"]
    one = lessons.seed_runs(["rnn_noattn"], ("bleu", "aer"))
    assert one["sd"] == {"bleu": None} and "aer" not in one["mean"]  # no AER without attention: left out
    assert lessons.seed_runs_verdict(s, one, "bleu") == "unknown (3 and 1 seeds)"
    far = {"mean": {"bleu": mean - 10}, "sd": {"bleu": 0.1}, "seeds": [0, 1, 2]}
    level = {"mean": {"bleu": mean + 0.01}, "sd": {"bleu": 0.1}, "seeds": [0, 1, 2]}
    assert lessons.seed_runs_verdict(s, far, "bleu") == "first better"
    assert lessons.seed_runs_verdict(far, s, "bleu") == "second better"
    assert lessons.seed_runs_verdict(s, level, "bleu") == "level"
    assert lessons.seed_runs_verdict(s, far, "bleu", lower_is_better=True) == "second better"
    with pytest.raises(ValueError, match="files is empty"):
        lessons.seed_runs([])
    with pytest.raises(FileNotFoundError, match="no results for 'no_such_run'"):
        lessons.seed_runs(["bahdanau", "no_such_run"])


def test_collapse_signs_by_hand():
    spread = torch.eye(4)  # (T=4, S=4): every step on its own word
    stuck = torch.eye(4)[[3, 3, 3, 1]]  # three steps on the last word, one on word 1
    signs = lessons.collapse_signs([spread, stuck])
    assert signs["distinct peaks"] == pytest.approx((1 + 2 / 4) / 2)
    assert signs["top position share"] == pytest.approx((1 / 4 + 3 / 4) / 2)
    assert signs["last position share"] == pytest.approx((1 / 4 + 3 / 4) / 2)
    with pytest.raises(ValueError, match="attns is empty"):
        lessons.collapse_signs([])
def test_course_models_are_the_presets_own_seed_0_files():
    fr = lessons.course_models("fr")
    assert {"bahdanau", "luong_concat", "transformer"} <= set(fr)
    assert not any("_seed" in name for name in fr) and all(r.get("seed", 0) == 0 for r in fr.values())
    assert fr["transformer"]["model"] == "transformer" and lessons.course_models("ko")["transformer"]["model"] == "transformer_ko"


def test_seed_summary_reads_three_seeds_or_gives_none():
    b = lessons.seed_summary("bahdanau", "fr", require_all=True)
    runs = [lessons.results.read_result(n)["bleu"] for n in ("bahdanau", "bahdanau_seed1", "bahdanau_seed2")]
    assert b["seeds"] == [0, 1, 2] and min(runs) <= b["mean"]["bleu"] <= max(runs) and b["sd"]["bleu"] > 0
    assert lessons.seed_summary("luong_concat", "fr")["seeds"] == [0, 1, 2]  # from lesson 3's comparison
    assert lessons.seed_summary("rnn_noattn", "ko", require_all=True) is None  # one seed shipped


def test_course_verdicts_apply_the_difference_rule(monkeypatch):
    models = lessons.course_models("fr")
    best_luong = max((n for n in models if n.startswith("luong_")), key=lambda n: models[n]["bleu"])
    fake = {"bahdanau": (98.0, 0.1), best_luong: (99.0, 0.1), "transformer": (99.5, 0.1)}

    def summary(name, pair="fr", figures=("bleu", "em_31_40"), require_all=False):
        if name not in fake:
            return None
        m, sd = fake[name]
        return {"seeds": [0, 1, 2], "mean": {"bleu": m, "em_31_40": 0.5}, "sd": {"bleu": sd, "em_31_40": 0.01}}

    monkeypatch.setattr(lessons, "seed_summary", summary)
    assert lessons.course_verdicts(models, "fr")[0] == (
        "highest BLEU -- Transformer, ahead of every other model by more than both sds")
    fake["transformer"] = (99.1, 0.1)  # ahead of Luong by less than both sds, of Bahdanau by more
    assert lessons.course_verdicts(models, "fr")[0] == (
        f"highest BLEU -- a tie between Transformer and best Luong ({best_luong}) (ahead of the rest by more than both sds)")
    assert lessons.course_verdicts(models, "fr", "em_31_40")[0] == (
        "highest exact match on 31-40 tokens -- a tie: no mean is ahead of another by more than both sds")
    del fake["transformer"]
    assert lessons.course_verdicts(models, "fr")[0] == "highest BLEU -- unknown (no 3 seeds of Transformer)"


def test_seed_result_name_puts_the_pair_suffix_last():
    assert seed_result_name("bahdanau", "fr", 0) == "bahdanau"
    assert seed_result_name("bahdanau", "ko", 0) == "bahdanau_ko"
    assert seed_result_name("transformer", "fr", 2) == "transformer_seed2"
    assert seed_result_name("transformer", "ko", 1) == "transformer_seed1_ko"  # as the shipped files are named
    with pytest.raises(ValueError, match="seed"):
        seed_result_name("bahdanau", "fr", -1)
