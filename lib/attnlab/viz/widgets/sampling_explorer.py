"""Lesson 11's sampling explorer: the next-token distribution of a chosen prefix and a sampled continuation.

Pick a sentence and how many of its reference target words to feed as the prefix; move the
temperature, top-k and top-p. The bars show the model's distribution of the next token after the
three knobs (:func:`attnlab.models.sampling.next_token_probs`: what is cut is grey, the kept tokens
renormalised), and the text shows the continuation :func:`attnlab.models.sampling.sample_decode`-style
sampling draws from that prefix (seeded: the same knobs, the same words).

The logic is in two plain functions, :func:`update_sampling` and :func:`describe_sampling`, tested
without a browser; :func:`sampling_widget` only wires them to sliders.

Shape legend
------------
V  target vocabulary size
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.core.checks import check_int, check_positive_int, eval_mode
from attnlab.data.vocab import BOS, EOS, PAD, Vocab
from attnlab.models.decoding import FORBIDDEN
from attnlab.models.sampling import check_sampling, next_token_probs
from attnlab.viz.widgets._live import live, new_figure, picture

__all__ = ["update_sampling", "describe_sampling", "plot_sampling", "sampling_widget"]


@torch.no_grad()
def update_sampling(
    model,
    src_tokens: Sequence[str],
    prefix: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    show: int = 10,
    max_len: int = 60,
    seed: int = 0,
) -> dict:
    """The next-token distribution after ``prefix`` and one sampled continuation (pure: same inputs, same result).

    Args:
        model: a model of the decoding protocol (:mod:`attnlab.models.decoding`).
        src_tokens: the source sentence's words (``<eos>`` is added).
        prefix: target words already written (fed to the model, teacher-forced).
        src_vocab, tgt_vocab: the vocabularies.
        temperature, top_k, top_p: the sampling knobs (:func:`attnlab.models.sampling.check_sampling`).
        show: how many of the most probable next tokens to report.
        max_len: most tokens of the continuation.
        seed: seed of the draws.

    Returns:
        dict with ``tokens`` (the ``show`` most probable next tokens, by the model's own
        probability), ``raw`` (their probabilities at temperature 1, no cut), ``probs`` (after the
        knobs, renormalised), ``kept`` (how many tokens of the vocabulary keep a probability > 0),
        ``continuation`` (sampled words after the prefix, up to ``<eos>``) and the knobs.
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    show = check_positive_int("show", show)
    max_len = check_positive_int("max_len", max_len)
    seed = check_int("seed", seed, minimum=0)
    src = torch.tensor([src_vocab.encode(list(src_tokens), eos=True)])  # (1, S)
    feed = [BOS, *tgt_vocab.encode(list(prefix), eos=False)]
    gen = torch.Generator().manual_seed(seed)
    with eval_mode(model):
        memory = model.encode(src)
        state = model.init_state(memory)
        for t, tok in enumerate(feed):
            logits, state, _ = model.step(memory, state, torch.tensor([tok]), t)  # (1, V)
        logits = logits[0].float().clone()  # (V,)
        logits[list(FORBIDDEN)] = -math.inf
        raw = torch.softmax(logits, -1)  # (V,)
        probs = next_token_probs(logits, temperature, top_k, top_p)  # (V,)
        top = raw.argsort(descending=True)[:show]  # (show,)
        words, t, nxt = [], len(feed), probs
        for _ in range(max_len):
            y = int(torch.multinomial(nxt, 1, generator=gen))
            if y == EOS:
                break
            words.append(tgt_vocab.itos[y])
            logits, state, _ = model.step(memory, state, torch.tensor([y]), t)
            logits = logits[0].float().clone()
            logits[list(FORBIDDEN)] = -math.inf
            nxt, t = next_token_probs(logits, temperature, top_k, top_p), t + 1
    return {
        "tokens": [tgt_vocab.itos[i] for i in top.tolist()],
        "raw": raw[top].tolist(),
        "probs": probs[top].tolist(),
        "kept": int((probs > 0).sum()),
        "continuation": words,
        "prefix": list(prefix),
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
    }


def describe_sampling(result: dict) -> str:
    """Three lines: the knobs and how many tokens survive, the most probable next token, the continuation."""
    k = "all" if result["top_k"] is None else result["top_k"]
    best = max(zip(result["probs"], result["tokens"], strict=True))
    return (
        f"temperature {result['temperature']:.2f}, top-k {k}, top-p {result['top_p']:.2f}: "
        f"{result['kept']} token(s) can be drawn\n"
        f"most probable next token: {best[1]!r} with probability {best[0]:.2f} after the knobs\n"
        f"prefix + sampled continuation: {' '.join(result['prefix'])} | {' '.join(result['continuation'])}"
    )


def plot_sampling(result: dict, *, fig=None):
    """Bars of the next-token probabilities: the model's own (outline) and after the knobs (filled)."""
    if fig is None:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(6, 2.6))
    else:
        fig.set_size_inches(6, 2.6)
    ax = fig.subplots()
    x = range(len(result["tokens"]))
    ax.bar(x, result["raw"], color="none", edgecolor="grey", label="model (T = 1, no cut)")
    ax.bar(x, result["probs"], color="tab:blue", alpha=0.7, label="after temperature, top-k, top-p")
    ax.set_xticks(list(x), result["tokens"], rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("P(next token)")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def sampling_widget(model, sentences: Sequence, src_vocab: Vocab, tgt_vocab: Vocab, *, prefix_len: int = 2):
    """Sliders for the temperature, k and p; dropdowns for the sentence and the prefix length.

    Args:
        model: the trained model.
        sentences: pairs (with ``.src`` and ``.tgt``) to choose from.
        src_vocab, tgt_vocab: the vocabularies.
        prefix_len: the starting number of reference words fed as the prefix.

    Returns:
        an ``ipywidgets.VBox``; ``.result`` holds the latest :func:`update_sampling` dict.
    """
    import ipywidgets as widgets

    pairs = list(sentences)
    if not pairs:
        raise ValueError("sentences is empty: give at least one pair")
    choice = widgets.Dropdown(options=[(" ".join(p.src)[:60], i) for i, p in enumerate(pairs)], description="sentence",
                              layout=widgets.Layout(width="98%"), style={"description_width": "initial"})
    lengths = list(range(max(len(p.tgt) for p in pairs)))  # how many reference words are fed as the prefix
    prefix = widgets.Dropdown(options=lengths, value=prefix_len, description="prefix")
    temp = widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=0.7, step=0.05, description="temperature")
    k = widgets.IntSlider(value=len(tgt_vocab), min=1, max=len(tgt_vocab), description="top-k")
    p = widgets.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p")
    text, plot = widgets.HTML(), picture()
    root = widgets.VBox([choice, widgets.HBox([prefix, widgets.VBox([temp, k, p])]), text, plot])  # sentence: a row

    def compute() -> dict:
        pair = pairs[choice.value]
        n = min(prefix.value, len(pair.tgt))
        return update_sampling(
            model, pair.src, pair.tgt[:n], src_vocab, tgt_vocab, temperature=temp.value, top_k=k.value, top_p=p.value
        )

    def draw(result: dict):
        return plot_sampling(result, fig=new_figure((1, 1)))

    return live(root, text, plot, (choice, prefix, temp, k, p), compute, describe_sampling, draw)


_ = PAD  # the padding id is never drawn (FORBIDDEN), named here for the reader of the module
