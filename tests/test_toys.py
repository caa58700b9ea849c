"""Lessons 1, 3, 5 and 6's toy runs (attnlab.course.toys): trained and recorded like every run, loaded under
ATTNLAB_USE_SHIPPED=1 with the line the browser tests count, and the shipped ones are what the lessons say."""

import dataclasses

import pytest
import torch

from attnlab.course import toys
from attnlab.models.toys import HEAD_TASKS, HeadPerTask, HeadTasksConfig, head_task_sources, make_head_batch
from attnlab.training import results
from attnlab.training.checkpoint import CheckpointError


def test_head_task_sources_point_where_each_task_looks():
    src = head_task_sources(5)
    assert src.tolist() == [[4, 0, 1, 2, 3], [1, 2, 3, 4, 0], [4, 3, 2, 1, 0], [0, 0, 0, 0, 0]]
    tokens, targets = make_head_batch(3, torch.Generator().manual_seed(0), HeadTasksConfig(length=5))
    assert targets.shape == (3, len(HEAD_TASKS), 5) and torch.equal(targets[:, 2], tokens.flip(-1))


def test_head_tasks_config_refuses_bad_sizes():
    with pytest.raises(ValueError, match="num_heads must be 4"):
        HeadTasksConfig(num_heads=2)
    with pytest.raises(ValueError, match="d_model must be a multiple of num_heads=4"):
        HeadTasksConfig(d_model=30)
    with pytest.raises(TypeError, match="positions must be a bool"):
        HeadTasksConfig(positions="yes")


@pytest.mark.numeric
@pytest.mark.parametrize("positions", [False, True])
def test_without_positions_the_model_is_permutation_equivariant(positions):
    torch.manual_seed(0)
    model = HeadPerTask(HeadTasksConfig(positions=positions)).eval()
    tokens, perm = torch.randint(0, 10, (2, 8)), torch.randperm(8)  # (N, T), (T,)
    with torch.no_grad():
        logits, _ = model(tokens)  # (N, H, T, V)
        shuffled, _ = model(tokens[:, perm])  # (N, H, T, V)
    # no positions: a shuffled input only shuffles the outputs, so no head can find "one step back"
    assert torch.allclose(shuffled, logits[:, :, perm], atol=1e-5) == (not positions)


def test_a_short_run_is_recorded_and_loaded_back(tmp_data_dir, monkeypatch, capsys):
    model, res = toys.run("head_tasks", steps=3)
    assert res["train_steps"] == 3 and res["task"] == "head_tasks" and set(res["accuracy"]) == set(HEAD_TASKS)
    assert results.read_result("head_tasks", shipped=False) == res
    loaded, meta, source = toys.load("head_tasks")
    assert source == "live run" and meta["metrics"] == res
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")  # only a live run exists: loading a shipped one must fail
    with pytest.raises(CheckpointError, match="no shipped checkpoint"):
        toys.run("head_tasks")


def test_the_shipped_runs_load_and_match_the_lessons(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    model, res = toys.run("head_tasks")
    assert "ATTNLAB_USE_SHIPPED=1: loaded the shipped 'head_tasks' (150 steps), not trained" in capsys.readouterr().out
    assert res["train_steps"] == 150 and res["final_loss"] < 0.1
    assert min(toys.head_tasks_scores(model)["accuracy"].values()) > 0.95
    _, ablated = toys.run("head_tasks_nopos")
    assert all(ablated["accuracy"][t] < res["accuracy"][t] - 0.3 for t in HEAD_TASKS)  # lesson 5's exercise
    none, _ = toys.run("reversal_none")
    sinusoidal, _ = toys.run("reversal_sinusoidal")
    data = toys.reversal_data()
    assert toys.reversal_scores(sinusoidal, data)["exact_match"] >= toys.reversal_scores(none, data)["exact_match"] + 0.3


# The "predict, ablate, explain" exercises of lessons 1, 3 and 6: (baseline, ablation, the least exact-match gap the
# check requires). Measured over seeds 0, 1, 2 (scripts/lesson05_06_toys.py trains seed 0; issue 30's report has the
# rest): bottleneck 0.63/0.69/0.64 against 0.43/0.43/0.44, Luong 0.97/0.80/0.73 against 0.14/0.22/0.14, reversal
# 0.71/0.65/0.69 against 0.05/0.08/0.06.
ABLATIONS = [
    ("bottleneck_every_step", "bottleneck_initial_only", 0.1),
    ("reversal_luong_global", "reversal_luong_local_m", 0.3),
    ("reversal_sinusoidal", "reversal_none", 0.3),
]


@pytest.mark.parametrize("base, ablated, gap", ABLATIONS)
def test_the_shipped_ablations_go_the_way_the_lessons_check(base, ablated, gap, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_USE_SHIPPED", "1")
    (_, full), (model, cut) = toys.run(base), toys.run(ablated)
    assert full["train_steps"] == cut["train_steps"] <= 200  # the same budget, a cheap one
    assert full["exact_match"] > cut["exact_match"] + gap
    assert toys.find_run(model.config) == ablated and toys.find_run(toys.model_config(base)) == base


def test_find_run_names_the_toy_run_of_a_config_and_the_field_that_differs():
    base = toys.model_config("bottleneck_every_step")
    assert base.context_every_step and base.attention is None and base.hid_dim == 64
    assert toys.find_run(dataclasses.replace(base, context_every_step=False)) == "bottleneck_initial_only"
    assert toys.find_run(dataclasses.replace(toys.model_config("reversal_sinusoidal"), positions="none")) == "reversal_none"
    luong = toys.model_config("reversal_luong_global")
    assert toys.find_run(dataclasses.replace(luong, local="m", window=1)) == "reversal_luong_local_m"
    with pytest.raises(ValueError, match="differs from 'reversal_luong_local_m' in window"):
        toys.find_run(dataclasses.replace(luong, local="m", window=2))
    with pytest.raises(ValueError, match="differs from 'bottleneck_every_step' in hid_dim"):
        toys.find_run(dataclasses.replace(base, hid_dim=32))
    with pytest.raises(ValueError, match="config must be the model config of a toy run, got a dict"):
        toys.find_run({"positions": "none"})


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="name must be one of"):
        toys.run("head_task")
