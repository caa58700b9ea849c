"""Training profiles: ``cpu`` (small, step-budgeted, one thread) and ``gpu`` (full size), same code.

The profile is chosen from ``torch.cuda.is_available()`` and can be forced with the
environment variable ``ATTNLAB_PROFILE`` (``cpu`` or ``gpu``). The ``gpu`` profile forced on a
machine without CUDA still works, on the CPU, after one :class:`ProfileWarning` per process (its
models are several times larger than the ``cpu`` ones: expect minutes where the lessons say seconds).

:func:`estimate` sizes a model before it is trained: parameters, the memory of their gradients and
of Adam's state, and the activations one training batch keeps for the backward pass.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch
import torch.nn.functional as F

from .checks import check_positive_int

PROFILES = ("cpu", "gpu")
ENV_VAR = "ATTNLAB_PROFILE"


class ProfileWarning(UserWarning):
    """The ``gpu`` profile is in use on a machine where PyTorch sees no CUDA device."""


_warned_no_cuda = False


def _warn_gpu_without_cuda() -> None:
    """Warn, once per process, that the ``gpu`` profile will run on the CPU."""
    global _warned_no_cuda
    if _warned_no_cuda or torch.cuda.is_available():
        return
    _warned_no_cuda = True
    warnings.warn(
        f"{ENV_VAR}=gpu but PyTorch sees no CUDA device: the gpu profile's models and budgets will run on the "
        f"CPU, many times slower than the cpu profile (set {ENV_VAR}=cpu, or unset it, for the course's CPU budgets)",
        ProfileWarning,
        stacklevel=3,
    )


def get_profile() -> str:
    """Return the active profile name (``"cpu"`` or ``"gpu"``).

    ``ATTNLAB_PROFILE`` wins when set; otherwise ``"gpu"`` when CUDA is available. Forcing ``gpu``
    without CUDA warns once per process (:class:`ProfileWarning`) and carries on.
    """
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced:
        if forced not in PROFILES:
            raise ValueError(f"{ENV_VAR}={forced!r} is not a profile; expected one of {PROFILES}")
        if forced == "gpu":
            _warn_gpu_without_cuda()
        return forced
    return "gpu" if torch.cuda.is_available() else "cpu"


def get_device(profile: str | None = None) -> torch.device:
    """The device a profile trains on: CUDA for ``gpu`` when present, else the CPU (with a one-time
    :class:`ProfileWarning` when ``gpu`` was asked for)."""
    profile = profile or get_profile()
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if profile == "gpu":
        if torch.cuda.is_available():
            return torch.device("cuda")
        _warn_gpu_without_cuda()
    return torch.device("cpu")


THREADS_VAR = "ATTNLAB_THREADS"


def train_threads(profile: str | None = None) -> int:
    """CPU threads the training loops use: 1 on the ``cpu`` profile unless ``ATTNLAB_THREADS`` says.

    The course's CPU models are small and run step by step, so each operation is tiny. Measured on
    the course's 2-core machine, one thread was as fast as two when the machine was idle and up to
    ten times faster when anything else was running (OpenMP threads spin-wait for each other on an
    oversubscribed core). The ``gpu`` profile keeps PyTorch's default.
    """
    env = os.environ.get(THREADS_VAR, "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"{THREADS_VAR}={env!r} must be a positive integer")
        return int(env)
    return 1 if (profile or get_profile()) == "cpu" else torch.get_num_threads()


@contextlib.contextmanager
def num_threads(n: int):
    """Run a block with ``torch.set_num_threads(n)``, restoring the previous setting after."""
    n = check_positive_int("n", n)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def use_course_threads(profile: str | None = None) -> int:
    """Set PyTorch's CPU thread count for the whole session to :func:`train_threads` and return it.

    Training already runs with that many threads; a lesson calls this in its first cell so that
    evaluation, decoding and every other cell follow the same policy. With two threads on a 2-core
    machine where another program keeps one core busy, the two threads wait for each other and a
    decoding pass that takes under a second on an idle machine took 50 s; with one thread it takes
    about twice its idle time. ``ATTNLAB_THREADS`` overrides it, as for training.
    """
    n = train_threads(profile)
    torch.set_num_threads(n)
    return n


# The longest sentences of the course corpus (both pairs, every split): 40 source tokens + <eos>,
# 54 target tokens + <bos>. A batch of such sentences is the largest batch training can meet.
LONGEST_SRC, LONGEST_TGT = 41, 55
ADAM_STATES = 2  # fastai's Adam keeps two buffers per parameter (the moving averages of g and g^2)


def estimate(
    model_or_exp,
    bs: int,
    *,
    vocab_sizes: tuple[int, int] | None = None,
    src_len: int = LONGEST_SRC,
    tgt_len: int = LONGEST_TGT,
) -> dict:
    """Parameters and training memory of a model (or of a named experiment's model) at batch size ``bs``.

    Three parts, each stated rather than guessed:

    * ``param_bytes``, ``grad_bytes``, ``optimizer_bytes``: float32 parameters, one gradient each
      and Adam's two moment buffers each, i.e. ``params * 4 * (1 + 1 + 2)`` bytes in all;
    * ``activation_bytes_estimate``: the bytes of the tensors autograd keeps for the backward pass
      of one training step (forward in train mode plus the cross-entropy on its logits) on a batch
      of ``bs`` sentences, every one ``src_len`` source and ``tgt_len`` target tokens long (no
      padding: the worst batch). Measured, not derived from a formula: the forward runs (on the
      model's device) at batch sizes 2 and 3 with ``torch.autograd.graph.saved_tensors_hooks``
      counting every saved storage once (parameters excluded), and the count is extended linearly
      to ``bs`` (every saved tensor has a batch dimension or none; a batch of 1 is not measured,
      since some of its tensors share storage that a larger batch does not). A tensor saved by a
      branch of the graph that the loss does not use is counted too, so this errs on the high side.
    * ``total_bytes_estimate``: the sum of the four.

    What it leaves out: PyTorch's allocator caching and fragmentation, the CUDA context (several
    hundred MB), temporaries freed within the forward, evaluation and decoding, and what fused
    GPU kernels save instead of the CPU paths' tensors (cuDNN's GRU keeps its own workspace; flash
    attention keeps no attention matrix; bf16 autocast halves most activations). Treat it as the
    size of the training state, not a promise of ``torch.cuda.max_memory_allocated``.

    Args:
        model_or_exp: an ``nn.Module`` called as ``model(src (B, S), tgt_in (B, T))`` returning
            ``(B, T, V)`` logits, or an :class:`attnlab.experiments.Experiment` (then
            ``vocab_sizes`` is required and its model is built, on the CPU, to be measured).
        bs: batch size, an int >= 1.
        vocab_sizes: ``(source, target)`` vocabulary sizes, for an experiment.
        src_len: source length ``S`` of the measured batch, tokens incl. ``<eos>``.
        tgt_len: decoder input length ``T``, tokens incl. ``<bos>``.

    Returns:
        ``dict(params, param_bytes, grad_bytes, optimizer_bytes, activation_bytes_estimate,
        activation_bytes_per_sentence, total_bytes_estimate, bs, src_len, tgt_len)``.

    Raises:
        ValueError: a size below 1, or an experiment without ``vocab_sizes``.
        TypeError: ``model_or_exp`` is neither a module nor an experiment.
    """
    bs = check_positive_int("bs", bs)
    src_len, tgt_len = check_positive_int("src_len", src_len), check_positive_int("tgt_len", tgt_len)
    model = _model_to_estimate(model_or_exp, vocab_sizes)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    two, three = (_saved_bytes(model, b, src_len, tgt_len) for b in (2, 3))
    per_sentence = three - two
    activations = two + per_sentence * (bs - 2)
    optimizer = ADAM_STATES * param_bytes
    return {
        "params": params,
        "param_bytes": param_bytes,
        "grad_bytes": param_bytes,
        "optimizer_bytes": optimizer,
        "activation_bytes_estimate": activations,
        "activation_bytes_per_sentence": per_sentence,
        "total_bytes_estimate": 2 * param_bytes + optimizer + activations,
        "bs": bs,
        "src_len": src_len,
        "tgt_len": tgt_len,
    }


def _model_to_estimate(model_or_exp, vocab_sizes) -> torch.nn.Module:
    if isinstance(model_or_exp, torch.nn.Module):
        return model_or_exp
    from .experiments import Experiment  # experiments imports this module

    if not isinstance(model_or_exp, Experiment):
        raise TypeError(f"model_or_exp must be an nn.Module or an Experiment, got {type(model_or_exp).__name__}")
    if vocab_sizes is None:
        raise ValueError(f"estimate of experiment {model_or_exp.name!r} needs vocab_sizes=(source, target)")
    from . import models

    if not isinstance(vocab_sizes, tuple | list) or len(vocab_sizes) != 2:
        raise ValueError(f"vocab_sizes must be (source, target), got {vocab_sizes!r}")
    src, tgt = (
        check_positive_int(n, v) for n, v in zip(("source vocab size", "target vocab size"), vocab_sizes, strict=True)
    )
    config = {"src_vocab_size": src, "tgt_vocab_size": tgt, **model_or_exp.model}
    return models.build_model(model_or_exp.family, config)


def _saved_bytes(model: torch.nn.Module, bs: int, src_len: int, tgt_len: int) -> int:
    """Bytes autograd keeps for the backward of one training forward + loss on a full ``(bs, src_len)`` batch."""
    from .vocab import BOS, EOS, SPECIALS  # ids from len(SPECIALS) on are ordinary tokens

    config = getattr(model, "config", None)
    if not all(isinstance(getattr(config, n, None), int) for n in ("src_vocab_size", "tgt_vocab_size")):
        raise TypeError(
            f"estimate needs a model whose .config has src_vocab_size and tgt_vocab_size (an attnlab model "
            f"family), got {type(model).__name__}"
        )
    device = next(model.parameters()).device
    first = len(SPECIALS)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(first, config.src_vocab_size, (bs, src_len), generator=g).to(device)  # (B, S)
    tgt_in = torch.randint(first, config.tgt_vocab_size, (bs, tgt_len), generator=g).to(device)  # (B, T)
    # framed like a real batch: a source ends in <eos>, decoder inputs start with <bos> (the
    # agreement pair rebuilds its backward batch from them and checks both)
    src[:, -1], tgt_in[:, 0] = EOS, BOS
    inputs = [src, tgt_in]
    if getattr(config, "align_loss", 0) > 0:  # supervised attention trains on a gold attention
        inputs.append(torch.full((bs, tgt_len, src_len), 1.0 / src_len, device=device))  # (B, T, S)
    skip = {p.untyped_storage().data_ptr() for p in model.parameters()}
    # Every saved tensor is held until the end: a branch of the graph that the forward drops frees
    # its storage, and a later tensor at the same address would otherwise be taken for the same one.
    kept: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept.append(t)
        return t

    was_training = model.training
    devices = [device.index or 0] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():  # dropout must not move the caller's RNG
            model.train()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                logits = model(*inputs)  # (B, T, V)
                F.cross_entropy(logits.flatten(0, 1), tgt_in.flatten())
    finally:
        model.train(was_training)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in kept}
    return sum(n for ptr, n in storages.items() if ptr not in skip)
