"""Two training processes on this CPU (gloo backend), started by Accelerate's own launcher running
``python -m attnlab.training.train``: the processes see disjoint shards, hold bit-identical weights after every
step, and end where one process trained on the same global batches ends."""

import json
import os
import socket
import subprocess
import sys

import pytest
import torch
from fastai.callback.core import Callback
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader

from attnlab.data.loaders import collate, encode_pairs
from attnlab.training import experiments, results, train
from attnlab.training.checkpoint import load_checkpoint
from attnlab.training.train import _weights_sha256, fit_budget, set_seed

pytest.importorskip(
    "accelerate",
    reason="SKIPPED LOUDLY: accelerate is not installed, so multi-process training (accelerate launch -m "
    "attnlab.training.train) is untested here; install it with `pip install -c constraints.txt accelerate`",
)

STEPS, BS, PROCESSES = 4, 8, 2
TINY_MODEL = {"emb_dim": 8, "hid_dim": 16, "attn_dim": 8}
SIZES = {"n_train": 200, "n_valid": 20, "test_per_bucket": 3}
# Measured on the course machine (torch 2.14.1, fastai 2.8.12, accelerate 1.15.0): largest weight gap
# 1.2e-7 against one process with the DDP loss (c1), 2.4e-2 for rank 0's batches alone, training
# loss gap 3.6e-4 against the plain single-process run (c2).
WEIGHT_ATOL = 1e-5  # the same gradients up to the order of float additions (all-reduce vs autograd)
LOSS_ATOL = 1e-3  # per-process token means vs one token mean over both halves
LAUNCHER_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ATTNLAB_MAX_STEPS",
                 "ATTNLAB_USE_SHIPPED", "ATTNLAB_TRACE_DIR")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_args() -> list[str]:
    model = [a for k, v in TINY_MODEL.items() for a in ("--model", f"{k}={v}")]
    sizes = [a for k, v in SIZES.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    return ["bahdanau", "--steps", str(STEPS), "--bs", str(BS), *model, *sizes, "--out", "tiny"]


def _read_trace(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_processes_train_like_one_process_on_the_global_batch(tmp_path, monkeypatch):
    data, trace = tmp_path / "data", tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and not k.startswith("ACCELERATE_")}
    env.update(
        ATTNLAB_DATA_DIR=str(data),
        ATTNLAB_TRACE_DIR=str(trace),
        ATTNLAB_PROFILE="cpu",
        HF_HOME=str(tmp_path / "hf"),  # no accelerate config file of the user's
        CUDA_VISIBLE_DEVICES="",  # the CPU / gloo path, even on a machine with GPUs
        OMP_NUM_THREADS="1",
    )
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(PROCESSES)]
    launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    launch += ["--main_process_port", str(_free_port()), "-m", "attnlab.training", *_train_args()]
    proc = subprocess.run(launch, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Rank 0 alone printed and wrote.
    printed = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(printed) == 1 and proc.stdout.count("training bahdanau") == 1, proc.stdout
    monkeypatch.setenv("ATTNLAB_DATA_DIR", str(data))
    res = results.read_result("tiny", shipped=False)
    assert json.loads(printed[0])["model"] == "tiny"
    assert (res["world_size"], res["batch_size"], res["global_batch"], res["train_steps"]) == (2, BS, 2 * BS, STEPS)

    ranks = [_read_trace(trace / f"trace-rank{r}.jsonl") for r in range(PROCESSES)]
    assert sorted(p.name for p in trace.iterdir()) == ["trace-rank0.jsonl", "trace-rank1.jsonl"]
    assert [[line["step"] for line in t] for t in ranks] == [list(range(STEPS + 1))] * PROCESSES

    # (a) disjoint shards: no example is seen by both processes, none twice by one.
    seen = [[i for line in t[1:] for i in line["ids"]] for t in ranks]
    assert all(len(s) == STEPS * BS and len(set(s)) == len(s) for s in seen)
    assert not set(seen[0]) & set(seen[1])

    # (b) identical weights after every step (and at the start), and they do change every step.
    hashes = [[line["weights_sha256"] for line in t] for t in ranks]
    assert hashes[0] == hashes[1]
    assert len(set(hashes[0])) == STEPS + 1

    # (c) one process, same start, fed at each step the two processes' batches together.
    splits, src_vocab, tgt_vocab = experiments.synthetic_data("fr", **SIZES)  # the cache the run wrote
    exp = experiments.preset("bahdanau", "cpu").with_changes(model=TINY_MODEL, bs=BS).with_budget(steps=STEPS)
    items = encode_pairs(splits.train, src_vocab, tgt_vocab)
    halves = [(a["ids"], b["ids"]) for a, b in zip(ranks[0][1:], ranks[1][1:], strict=True)]

    def one_process(batches, cbs=(), trace_to=None):
        set_seed(0)
        model = experiments.build_model(exp, src_vocab, tgt_vocab)
        assert _weights_sha256(model) == hashes[0][0]  # the weights both processes started from
        batches = [collate([items[i] for i in ids]) for ids in batches]
        dls = DataLoaders(DataLoader(batches, bs=None), DataLoader(batches[:1], bs=None), device="cpu")
        if trace_to is not None:
            monkeypatch.setenv("ATTNLAB_TRACE_DIR", str(trace_to))
        else:
            monkeypatch.delenv("ATTNLAB_TRACE_DIR", raising=False)
        fit_budget(
            model, dls, steps=STEPS, lr=exp.lr, wd=exp.wd, label_smoothing=exp.label_smoothing, progress=False, cbs=cbs
        )
        return model.state_dict()

    trained = load_checkpoint(results.checkpoint_path("tiny", shipped=False))[0].state_dict()

    def gap(state):
        return max(float((trained[k] - v).abs().max()) for k, v in state.items())

    # c1. The global batch with the loss DDP optimises: the mean of the two halves' losses (each a
    # mean over its own target tokens). Same gradients up to rounding: the weights agree to 1e-5.
    same = one_process([a + b for a, b in halves], cbs=[HalvesLoss(BS)])
    for key, value in trained.items():
        torch.testing.assert_close(value, same[key], rtol=0, atol=WEIGHT_ATOL, msg=lambda m, k=key: f"{k}: {m}")
    # The tolerance can fail: rank 0's batches alone (what a process that never averaged would learn) end far off.
    alone = one_process([a for a, _ in halves])
    assert gap(alone) > 100 * WEIGHT_ATOL, gap(alone)

    # c2. The plain single-process run on the global batch (loss = mean over all its tokens). At step 1
    # (same weights) its loss is exactly the token-weighted mean of the two processes' losses; after
    # that the two runs weight tokens differently, and the losses stay within LOSS_ATOL.
    plain = one_process([a + b for a, b in halves], trace_to=tmp_path / "reference")
    reference = _read_trace(tmp_path / "reference" / "trace-rank0.jsonl")[1:]
    pairs = list(zip(ranks[0][1:], ranks[1][1:], strict=True))
    weighted = [(a["loss"] * a["tokens"] + b["loss"] * b["tokens"]) / (a["tokens"] + b["tokens"]) for a, b in pairs]
    assert [r["tokens"] for r in reference] == [a["tokens"] + b["tokens"] for a, b in pairs]
    torch.testing.assert_close(reference[0]["loss"], weighted[0], rtol=0, atol=1e-5)
    torch.testing.assert_close([r["loss"] for r in reference], weighted, rtol=0, atol=LOSS_ATOL)
    print(
        f"\n2 processes vs 1 on the same global batches after {STEPS} steps: largest weight gap {gap(same):.1e} "
        f"(mean of the halves' losses), {gap(plain):.1e} (token mean); rank 0's batches alone {gap(alone):.1e}; "
        f"training loss gap {max(abs(r['loss'] - w) for r, w in zip(reference, weighted, strict=True)):.1e}"
    )


class HalvesLoss(Callback):
    """The loss of DDP with two processes, on one process: the mean of the two halves' masked losses."""

    order = 0  # before AuxLoss (1)

    def __init__(self, half: int):
        self.half = half

    def after_loss(self):
        if not self.training:
            return
        k, (y,) = self.half, self.yb
        lf = self.learn.loss_func
        self.learn.loss_grad = (lf(self.pred[:k], y[:k]) + lf(self.pred[k:], y[k:])) / 2
        self.learn.loss = self.learn.loss_grad.clone()


def test_world_size_rank_and_device_from_the_launcher(monkeypatch):
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert (train.world_size(), train.rank(), train.is_main_process()) == (1, 0, True)
    assert train.process_device("cuda") == torch.device("cuda")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert (train.world_size(), train.rank(), train.is_main_process()) == (4, 3, False)
    assert train.process_device("cuda") == torch.device("cuda", 1)  # each process its own GPU
    assert train.process_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("WORLD_SIZE", "four")
    with pytest.raises(ValueError, match="WORLD_SIZE='four' must be an integer"):
        train.world_size()
    monkeypatch.setenv("RANK", "")
    with pytest.raises(ValueError, match="RANK='' must be an integer"):
        train.rank()


def test_a_time_budget_is_refused_on_several_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"seconds=5: a time budget cannot be shared by 2 processes .* give steps"):
        fit_budget(None, None, seconds=5)


def test_shards_are_fastais_distributed_slices(monkeypatch):
    """Our DistributedDL's order is fastai's own (its CUDA-only broadcast aside): pad, then slice per rank."""
    import torch.distributed as dist
    from fastai.distributed import DistributedDL

    from attnlab.data.loaders import make_dataloaders
    from attnlab.data.vocab import build_vocabs

    from .conftest import copy_task_splits

    class FastaiNoBroadcast(DistributedDL):
        def _broadcast(self, t, rank):
            return t  # one process: the broadcast is the identity

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        splits = copy_task_splits(n_train=21)
        dls = make_dataloaders(splits, *build_vocabs(splits), bs=4, device="cpu")
        single = DataLoader(list(range(2)), bs=1)  # fewer items than processes: padded by repeating them
        for dl, world in ((dls.train, 4), (dls.train, 2), (single, 3)):
            ours = [list(train._distributed_dl()(dl, rank=r, world_size=world).get_idxs()) for r in range(world)]
            theirs = [FastaiNoBroadcast(dl, rank=r, world_size=world).get_idxs() for r in range(world)]
            assert ours == theirs
            order = list(dl.get_idxs())
            assert sorted(i for shard in ours for i in shard) == sorted(order + (order * world)[: -len(order) % world])
    finally:
        dist.destroy_process_group()
