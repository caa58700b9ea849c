"""Size a model before it is trained: parameters, gradients, Adam's state and the activations one
training batch keeps for the backward pass (:func:`estimate`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.core.checks import check_positive_int
from attnlab.data.vocab import BOS, EOS, SPECIALS
from attnlab.training import families as models
from attnlab.training.experiments import Experiment

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
            ``(B, T, V)`` logits, or an :class:`attnlab.training.experiments.Experiment` (then
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

    if not isinstance(model_or_exp, Experiment):
        raise TypeError(f"model_or_exp must be an nn.Module or an Experiment, got {type(model_or_exp).__name__}")
    if vocab_sizes is None:
        raise ValueError(f"estimate of experiment {model_or_exp.name!r} needs vocab_sizes=(source, target)")

    if not isinstance(vocab_sizes, tuple | list) or len(vocab_sizes) != 2:
        raise ValueError(f"vocab_sizes must be (source, target), got {vocab_sizes!r}")
    src, tgt = (
        check_positive_int(n, v) for n, v in zip(("source vocab size", "target vocab size"), vocab_sizes, strict=True)
    )
    config = {"src_vocab_size": src, "tgt_vocab_size": tgt, **model_or_exp.model}
    return models.build_model(model_or_exp.family, config)


def _saved_bytes(model: torch.nn.Module, bs: int, src_len: int, tgt_len: int) -> int:
    """Bytes autograd keeps for the backward of one training forward + loss on a full ``(bs, src_len)`` batch."""

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
