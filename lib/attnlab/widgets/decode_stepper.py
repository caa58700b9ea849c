"""Step through greedy decoding of one sentence: attention, produced token, top candidates.

The expensive part (running the model) happens once in :func:`decode_steps`; moving the slider
only calls :func:`step_view`, a pure function over the recorded steps (well under 100 ms).

Shape legend
------------
S  source length (incl. ``<eos>``)
k  number of candidates shown
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data import BOS, EOS, PAD, Vocab

__all__ = ["Step", "decode_steps", "step_view", "stepper"]


@dataclass(frozen=True)
class Step:
    """One decoding step: the token produced, the attention used, the best candidates."""

    token: str
    attention: np.ndarray | None  # (S,)
    candidates: tuple[tuple[str, float], ...]  # k (token, probability), best first


@torch.no_grad()
def decode_steps(model, src_tokens, src_vocab: Vocab, tgt_vocab: Vocab, *, k: int = 5, max_len: int = 80):
    """Greedy-decode one sentence, recording every step.

    Args:
        model: a model implementing the decoding protocol.
        src_tokens: source tokens (``<eos>`` is added).
        src_vocab, tgt_vocab: vocabularies.
        k: candidates recorded per step.
        max_len: most steps.

    Returns:
        ``(source labels incl. "<eos>", list of Step)``; decoding stops after ``<eos>``.
    """
    if not src_tokens:
        raise ValueError("src_tokens is empty: give at least one source token")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(list(src_tokens), eos=True)], device=device)  # (1, S)
    memory = model.encode(src)
    state = model.init_state(memory)
    y = torch.tensor([BOS], device=device)  # (1,)
    steps = []
    try:
        for t in range(max_len):
            logits, state, attn = model.step(memory, state, y, t)  # (1, V), _, (1, S)
            probs = torch.softmax(logits[0].float(), -1)  # (V,)
            probs[PAD] = 0.0
            top_p, top_i = probs.topk(k)  # (k,), (k,)
            y = top_i[:1]  # (1,)
            steps.append(
                Step(
                    token=tgt_vocab.itos[int(y)],
                    attention=None if attn is None else attn[0].float().cpu().numpy(),
                    candidates=tuple((tgt_vocab.itos[int(i)], float(p)) for p, i in zip(top_p, top_i)),
                )
            )
            if int(y) == EOS:
                break
    finally:
        model.train(was_training)
    return [*src_tokens, "<eos>"], steps


def step_view(src_labels, steps, i: int) -> dict:
    """What the widget shows at step ``i`` (pure function, no model call).

    Returns:
        dict with ``prefix`` (tokens produced so far, including step ``i``), ``token``,
        ``attention`` (``(S,)`` or ``None``), ``focus`` (most attended source token),
        ``candidates`` and a ready-to-print ``text``.
    """
    if not steps:
        raise ValueError("no decoding steps recorded")
    if not 0 <= i < len(steps):
        raise IndexError(f"step {i} out of range: 0..{len(steps) - 1}")
    step = steps[i]
    focus = None
    if step.attention is not None:
        if step.attention.shape != (len(src_labels),):
            raise ValueError(f"attention has shape {step.attention.shape}, expected ({len(src_labels)},)")
        focus = src_labels[int(np.argmax(step.attention))]
    prefix = [s.token for s in steps[: i + 1]]
    cands = "  ".join(f"{tok} {p:.2f}" for tok, p in step.candidates)
    text = f"step {i}: produced {step.token!r}" + (f", looking mostly at {focus!r}" if focus else "")
    text += f"\n  so far: {' '.join(prefix)}\n  candidates: {cands}"
    return {
        "prefix": prefix,
        "token": step.token,
        "attention": step.attention,
        "focus": focus,
        "candidates": step.candidates,
        "text": text,
    }


def stepper(model, pairs, src_vocab: Vocab, tgt_vocab: Vocab):  # pragma: no cover - UI wiring only
    """An ipywidgets UI: choose a sentence, then slide through its decoding steps."""
    import ipywidgets as W
    import matplotlib.pyplot as plt

    choose = W.Dropdown(options=[(" ".join(p.src)[:70], i) for i, p in enumerate(pairs)], description="sentence")
    slider = W.IntSlider(min=0, max=0, description="step")
    out = W.Output()
    cache = {}

    def current():
        if choose.value not in cache:
            cache[choose.value] = decode_steps(model, pairs[choose.value].src, src_vocab, tgt_vocab)
        return cache[choose.value]

    def redraw(*_):
        labels, steps = current()
        slider.max = len(steps) - 1
        view = step_view(labels, steps, min(slider.value, len(steps) - 1))
        with out:
            out.clear_output(wait=True)
            print(view["text"])
            if view["attention"] is not None:
                fig, ax = plt.subplots(figsize=(min(0.35 * len(labels) + 1, 12), 1.6))
                ax.bar(range(len(labels)), view["attention"])
                ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
                ax.set_ylim(0, 1)
                plt.show()

    choose.observe(lambda *_: (setattr(slider, "value", 0), redraw()), names="value")
    slider.observe(redraw, names="value")
    redraw()
    return W.VBox([choose, slider, out])
