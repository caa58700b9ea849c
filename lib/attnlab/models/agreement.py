"""Agreement-trained attention: English->X and X->English trained together, their attentions pulled to agree.

Cohn et al. (2016), "Incorporating Structural Alignment Biases into an Attentional Neural Translation
Model", train the two directions of a language pair at once and reward the attention matrices for
being each other's transpose. With ``A_f`` the forward attention (rows: X positions, columns:
English positions) and ``A_b`` the backward attention (rows: English positions, columns: X
positions), the reward is the trace ``Tr(A_f A_b) = sum_{t, j} A_f[t, j] A_b[j, t]`` -- the
Frobenius product of ``A_f`` with ``A_b^T``, written ``Tr(A_{X->Y} A_{Y->X}^T)`` when both matrices
are stored with the same index order. The joint objective is

    L = CE(English -> X) + CE(X -> English) + lambda * agreement_loss(A_f, A_b)

with ``lambda = 0`` giving two independent models trained side by side (the objective is just the
sum of their losses; the one coupling left is the training loop's gradient clipping, which clips the
norm of both models' gradients together). The English->X model is built first, so after the same seed
it starts from the weights of a lone :class:`~attnlab.models.rnn.Seq2SeqRNN` of the same config.

:class:`AgreementPair` holds the two :class:`attnlab.models.rnn.Seq2SeqRNN` models. A batch is the usual
one of the English->X direction, and the backward direction needs no data of its own:

* its **source** is X tokens + ``<eos>`` -- the forward direction's decoder *output*, which
  :func:`outputs_from_inputs` rebuilds from ``tgt_in`` (the training loop gives the model only
  ``(src, tgt_in)``);
* its **decoder input** is ``<bos>`` + English (:func:`inputs_from_outputs` of ``src``), and its
  **target** is English + ``<eos>``, which is ``src`` itself.

So both attention maps index the same two position sets, and the trace pairs like with like:
``A_f[t, j]`` is the forward step that emits X position ``t`` (an X token, or ``<eos>`` at the end)
looking at English source position ``j`` (an English token, or ``<eos>``); ``A_b[j, t]`` is the
backward step that emits English position ``j`` looking at backward source position ``t``, which
holds the same X token (or the same ``<eos>``). Both ``<eos>`` rows and columns take part.

The model's :meth:`AgreementPair.forward` returns the forward direction's logits, and its decoding
protocol (``encode``, ``init_state``, ``step``, ``check_source``) is the forward model's, so the
training loop, every decoder, :func:`attnlab.training.evaluate.evaluate_model` and
:func:`attnlab.training.experiments.run` treat it as an English->X model; in training it leaves the backward
loss and the weighted agreement term in ``self.aux_loss``, which :class:`attnlab.training.train.AuxLoss`
adds. :func:`evaluate_backward` scores the X->English direction on :func:`reverse_pairs` of a test
split.

Shape legend
------------
B    batch size
S    English length: English tokens + ``<eos>`` (the forward source, the backward target)
T    X length: X tokens + ``<eos>`` (the forward target, the backward source)
V_x  X vocabulary size (the forward target's)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from attnlab.core.checks import (
    check_float,
    check_float_tensor,
    check_probability,
    check_right_padded,
    check_token_ids,
)
from attnlab.data.corpus.splits import Pair
from attnlab.data.corpus.triples import invert_links
from attnlab.data.metrics import alignment_agreement, alignment_error_rate, corpus_bleu, corpus_chrf, exact_match
from attnlab.data.vocab import BOS, EOS, PAD, Vocab
from attnlab.models.decoding import forced_attention, translate
from attnlab.models.losses import masked_cross_entropy
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN

__all__ = [
    "AgreementConfig",
    "AgreementPair",
    "agreement_loss",
    "outputs_from_inputs",
    "inputs_from_outputs",
    "reverse_pairs",
    "evaluate_backward",
]

ATTENTIONS = ("bahdanau", "luong")


@dataclass(frozen=True)
class AgreementConfig:
    """Configuration of :class:`AgreementPair` (frozen; saved beside checkpoints like every config).

    The two directions share every size; the backward model's vocabularies are the forward's, swapped.

    Attributes:
        src_vocab_size: English vocabulary size (the forward source, the backward target).
        tgt_vocab_size: X vocabulary size (the forward target, the backward source).
        agreement: weight lambda (>= 0) of :func:`agreement_loss`; 0 trains two independent models
            (but for the joint gradient clipping of :func:`attnlab.training.train.fit_budget`).
        backward_label_smoothing: label smoothing in ``[0, 1)`` of the backward direction's
            cross-entropy (the forward direction's loss, and its smoothing, are the training loop's:
            set both to the experiment's ``label_smoothing`` to treat the directions alike).
        emb_dim, hid_dim, attention, score, attn_dim, input_feeding, max_src_len, dropout: as
            :class:`attnlab.models.rnn.RNNConfig`, for both directions; ``attention`` must be
            ``"bahdanau"`` or ``"luong"`` (agreement needs attention maps), and ``max_src_len``
            must cover the longer side when the score is ``"location"``.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    agreement: float = 1.0
    backward_label_smoothing: float = 0.0
    emb_dim: int = 64
    hid_dim: int = 256
    attention: str = "bahdanau"
    score: str = "concat"
    attn_dim: int | None = None
    input_feeding: bool = True
    max_src_len: int = 64
    dropout: float = 0.0

    def __post_init__(self):
        check_float("agreement", self.agreement)
        check_probability("backward_label_smoothing", self.backward_label_smoothing)
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"attention must be one of {ATTENTIONS} (the agreement term compares attention maps), "
                f"got {self.attention!r}"
            )
        self.direction_configs()  # RNNConfig's own checks name any bad size

    def direction_configs(self) -> tuple[RNNConfig, RNNConfig]:
        """The ``(English->X, X->English)`` :class:`~attnlab.models.rnn.RNNConfig` pair: equal sizes, swapped
        vocabularies."""
        shared = dict(
            emb_dim=self.emb_dim,
            hid_dim=self.hid_dim,
            attention=self.attention,
            score=self.score,
            attn_dim=self.attn_dim,
            input_feeding=self.input_feeding,
            max_src_len=self.max_src_len,
            dropout=self.dropout,
        )
        return (
            RNNConfig(self.src_vocab_size, self.tgt_vocab_size, **shared),
            RNNConfig(self.tgt_vocab_size, self.src_vocab_size, **shared),
        )


def _check_keep(name: str, keep, shape: tuple[int, int], device: torch.device) -> None:
    """``keep``: a bool ``shape`` tensor on ``device`` with at least one True per row."""
    if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool:
        got = keep.dtype if isinstance(keep, torch.Tensor) else type(keep).__name__
        raise TypeError(f"{name} must be a bool tensor (True = takes part), got {got}")
    if tuple(keep.shape) != shape or keep.device != device:
        raise ValueError(f"{name} must be {shape} on {device}, got shape {tuple(keep.shape)} on {keep.device}")
    empty = ~keep.any(1)  # (B,)
    if bool(empty.any()):
        row = int(empty.nonzero()[0, 0])
        raise ValueError(f"{name} row {row} has no True: every sentence has at least its <eos>")


def agreement_loss(
    attn_fwd: torch.Tensor, attn_bwd: torch.Tensor, src_keep: torch.Tensor, tgt_keep: torch.Tensor
) -> torch.Tensor:
    """One minus the mean round-trip probability of the two directions' attentions (Cohn et al. 2016).

    For X position ``t``, ``r_t = sum_j A_f[t, j] A_b[j, t]`` is the probability of coming back to
    ``t`` when one follows the forward attention from ``t`` to an English position ``j`` and then the
    backward attention from ``j``; summed over ``t`` it is the trace ``Tr(A_f A_b)`` of the sentence.
    The loss is ``1 - sum r_t / #X positions``, the mean over every real X position of the batch
    (tokens and ``<eos>``, as the cross-entropy averages over target tokens). Each ``r_t`` lies in
    ``[0, 1]``, so the loss does too; it is 0 only when both attentions are hard and each is the
    other's transpose, and its gradient is the trace's, negated and scaled.

    Positions where either mask is False count nowhere, whatever the weights hold there.

    Args:
        attn_fwd: ``(B, T, S)`` English->X attention: row ``t`` emits X position ``t``, column ``j``
            is English position ``j``.
        attn_bwd: ``(B, S, T)`` X->English attention: row ``j`` emits English position ``j``,
            column ``t`` is X position ``t``.
        src_keep: ``(B, S)`` bool, True at real English positions (``src != PAD``).
        tgt_keep: ``(B, T)`` bool, True at real X positions (``tgt_out != PAD``).

    Returns:
        Scalar loss in ``[0, 1]``.

    Raises:
        TypeError: an attention map that is not a float tensor, a mask that is not bool.
        ValueError: ``attn_bwd`` not ``(B, S, T)`` for ``attn_fwd``'s ``(B, T, S)``, another device,
            masks of the wrong shape, or a mask row with no True.
    """
    check_float_tensor("attn_fwd", attn_fwd, dims=3, shape_text="(B, T, S)")
    check_float_tensor("attn_bwd", attn_bwd, dims=3, shape_text="(B, S, T)")
    B, T, S = attn_fwd.shape
    if tuple(attn_bwd.shape) != (B, S, T) or attn_bwd.device != attn_fwd.device:
        raise ValueError(
            f"attn_bwd must be (B, S, T) = {(B, S, T)} on {attn_fwd.device} for attn_fwd of shape (B, T, S) = "
            f"{(B, T, S)}: the backward direction reads the X positions and emits the English ones; "
            f"got shape {tuple(attn_bwd.shape)} on {attn_bwd.device}"
        )
    _check_keep("src_keep", src_keep, (B, S), attn_fwd.device)
    _check_keep("tgt_keep", tgt_keep, (B, T), attn_fwd.device)
    keep = tgt_keep.unsqueeze(2) & src_keep.unsqueeze(1)  # (B, T, S)
    both = (attn_fwd * attn_bwd.transpose(1, 2)).masked_fill(~keep, 0.0)  # (B, T, S): A_f[t, j] A_b[j, t]
    return 1.0 - both.sum() / tgt_keep.sum()


def _check_framed(name: str, ids: torch.Tensor, *, first: int | None, last: int | None) -> torch.Tensor:
    """Check right-padded ``(B, L)`` ids framed by ``first`` / ``last``, no specials inside; ``(B,)`` lengths."""
    check_token_ids(name, ids)
    lengths = check_right_padded(name, ids, PAD)  # (B,)
    rows = torch.arange(ids.shape[0], device=ids.device)  # (B,)
    inside = ids != PAD  # (B, L)
    if first is not None:
        if bool((ids[:, 0] != first).any()):
            row = int((ids[:, 0] != first).nonzero()[0, 0])
            raise ValueError(f"{name} row {row} must start with id {first}, got {ids[row].tolist()}")
        inside[:, 0] = False
    if last is not None:
        ends = ids[rows, lengths - 1]  # (B,)
        if bool((ends != last).any()):
            row = int((ends != last).nonzero()[0, 0])
            raise ValueError(f"{name} row {row} must end with id {last} before its padding, got {ids[row].tolist()}")
        inside[rows, lengths - 1] = False
    special = inside & ((ids == BOS) | (ids == EOS))  # (B, L)
    if bool(special.any()):
        row = int(special.any(1).nonzero()[0, 0])
        raise ValueError(f"{name} row {row} has <bos> or <eos> among its tokens: {ids[row].tolist()}")
    return lengths


def outputs_from_inputs(tgt_in: torch.Tensor, *, name: str = "tgt_in") -> torch.Tensor:
    """Decoder outputs from decoder inputs: ``<bos> + tokens`` -> ``tokens + <eos>``, row by row.

    Args:
        tgt_in: ``(B, T)`` right-padded ids, each row ``<bos>`` then tokens (no ``<eos>``).
        name: the argument's name in error messages.

    Returns:
        ``(B, T)`` ids: the row shifted one to the left with ``<eos>`` after its last token --
        the ``tgt_out`` of :func:`attnlab.data.loaders.collate`.

    Raises:
        TypeError, ValueError: not such a tensor (left padding, no ``<bos>`` first, a special inside).
    """
    lengths = _check_framed(name, tgt_in, first=BOS, last=None)  # (B,)
    pad = tgt_in.new_full((tgt_in.shape[0], 1), PAD)  # (B, 1)
    out = torch.cat([tgt_in[:, 1:], pad], dim=1)  # (B, T)
    return out.scatter(1, (lengths - 1).unsqueeze(1), EOS)  # (B, T)


def inputs_from_outputs(tgt_out: torch.Tensor, *, name: str = "tgt_out") -> torch.Tensor:
    """Decoder inputs from decoder outputs: ``tokens + <eos>`` -> ``<bos> + tokens``, row by row.

    The inverse of :func:`outputs_from_inputs`. A source batch has the same form as decoder outputs
    (tokens + ``<eos>``), so this turns the English source into the backward decoder's input.

    Args:
        tgt_out: ``(B, L)`` right-padded ids, each row tokens then ``<eos>`` (no ``<bos>``).
        name: the argument's name in error messages.

    Returns:
        ``(B, L)`` ids: ``<bos>``, then the row's tokens, then padding.

    Raises:
        TypeError, ValueError: not such a tensor (left padding, a row not ending in ``<eos>``, a
            special inside).
    """
    _check_framed(name, tgt_out, first=None, last=EOS)
    bos = tgt_out.new_full((tgt_out.shape[0], 1), BOS)  # (B, 1)
    tokens = tgt_out.masked_fill(tgt_out == EOS, PAD)  # (B, L): the <eos> becomes padding
    return torch.cat([bos, tokens[:, :-1]], dim=1)  # (B, L)


class AgreementPair(nn.Module):
    """An English->X and an X->English :class:`~attnlab.models.rnn.Seq2SeqRNN` trained together (see module docstring).

    ``forward_model`` (English->X) is the model every decoder and evaluation uses; ``backward_model``
    (X->English) shares its sizes. After a training-mode :meth:`forward`, ``aux_loss`` holds
    ``CE_backward + agreement * agreement_loss`` (plus either sub-model's own auxiliary loss) and
    ``last_terms`` the two unweighted terms, detached (``backward_loss``, ``agreement_loss``).
    """

    def __init__(self, config: AgreementConfig):
        super().__init__()
        if not isinstance(config, AgreementConfig):
            raise TypeError(f"config must be an AgreementConfig, got {type(config).__name__}")
        self.config = config
        fwd, bwd = config.direction_configs()
        self.forward_model = Seq2SeqRNN(fwd)
        self.backward_model = Seq2SeqRNN(bwd)
        self.aux_loss: torch.Tensor | None = None
        self.last_terms: dict[str, torch.Tensor] = {}

    # ----------------------------------------------------------------- decoding protocol: English->X
    def check_source(self, src) -> None:
        """Raise unless :meth:`encode` accepts ``src`` (:meth:`attnlab.models.rnn.Seq2SeqRNN.check_source`)."""
        self.forward_model.check_source(src)

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """The forward model's memory of ``(B, S)`` English ids (:meth:`attnlab.models.rnn.Seq2SeqRNN.encode`)."""
        return self.forward_model.encode(src)

    def init_state(self, memory: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The forward model's initial decoder state."""
        return self.forward_model.init_state(memory)

    def step(self, memory: dict, state: tuple[torch.Tensor, ...], y_prev: torch.Tensor, t: int):
        """One forward-model step: ``(logits (B, V_x), state, attention (B, S))``."""
        return self.forward_model.step(memory, state, y_prev, t)

    # ----------------------------------------------------------------- training
    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """The English->X logits of a batch; in training mode also the backward loss and the agreement term.

        Args:
            src: ``(B, S)`` English ids + ``<eos>``, right-padded.
            tgt_in: ``(B, T)`` ``<bos>`` + X ids, right-padded.
            teacher_forcing: as :meth:`attnlab.models.rnn.Seq2SeqRNN.decode`, for both directions.
            return_attention: also return the forward attention.

        Returns:
            ``logits (B, T, V_x)``, or ``(logits, attn (B, T, S))``: the forward model's. In training
            mode ``self.aux_loss`` is set (see the class docstring); in eval mode it is ``None`` and
            the backward model does not run.

        Raises:
            TypeError, ValueError: as :meth:`attnlab.models.rnn.Seq2SeqRNN.forward`; in training also a
                ``tgt_in`` row that does not start with ``<bos>`` or an ``src`` row that does not end
                with ``<eos>`` (the backward direction is built from them).
        """
        self.aux_loss, self.last_terms = None, {}
        if not self.training:
            return self.forward_model(src, tgt_in, teacher_forcing=teacher_forcing, return_attention=return_attention)

        logits, attn_fwd = self.forward_model(src, tgt_in, teacher_forcing=teacher_forcing, return_attention=True)
        x_out = outputs_from_inputs(tgt_in)  # (B, T): X + <eos>, the backward source
        en_in = inputs_from_outputs(src, name="src")  # (B, S): <bos> + English, the backward decoder input
        logits_bwd, attn_bwd = self.backward_model(
            x_out, en_in, teacher_forcing=teacher_forcing, return_attention=True
        )  # (B, S, V_en), (B, S, T)
        backward_loss = masked_cross_entropy(logits_bwd, src, self.config.backward_label_smoothing)
        agree = agreement_loss(attn_fwd, attn_bwd, src != PAD, x_out != PAD)
        aux = backward_loss + self.config.agreement * agree
        for sub in (self.forward_model, self.backward_model):
            if sub.aux_loss is not None:
                aux = aux + sub.aux_loss
        self.aux_loss = aux
        self.last_terms = {"backward_loss": backward_loss.detach(), "agreement_loss": agree.detach()}
        return (logits, attn_fwd) if return_attention else logits


def reverse_pairs(pairs: Sequence[Pair]) -> list[Pair]:
    """The X->English pairs of English->X ``pairs``, with the gold links inverted.

    The reversed pair's ``align[j]`` lists the X positions whose sure links include English position
    ``j``, and ``possible[j]`` those whose possible-only links do (``None`` stays ``None``: French has
    no possible links); sure and possible still never overlap. English has no word classes of its
    own in the corpus, so ``content[j]`` is True when English token ``j`` has a sure link to an X
    content word -- it translates one. Pairs without gold links (a real corpus) reverse to pairs
    without them.

    Args:
        pairs: English->X pairs (:class:`attnlab.data.corpus.splits.Pair`).

    Returns:
        One X->English :class:`~attnlab.data.corpus.splits.Pair` per pair, in the same order.

    Raises:
        TypeError: an item is not a ``Pair``.
        ValueError: gold annotations of the wrong length, or a link outside the English sentence.
    """
    out = []
    for k, p in enumerate(pairs):
        if not isinstance(p, Pair):
            raise TypeError(f"pairs[{k}] must be a Pair, got {type(p).__name__}")
        if p.align is None:
            out.append(Pair(src=p.tgt, tgt=p.src))
            continue
        for what in ("align", "content", "possible"):
            value = getattr(p, what)
            if value is not None and len(value) != len(p.tgt):
                raise ValueError(f"pairs[{k}].{what} has {len(value)} entries for {len(p.tgt)} target tokens")
        n = len(p.src)
        try:
            align = invert_links(p.align, n)
            possible = None if p.possible is None else invert_links(p.possible, n)
        except ValueError as err:
            raise ValueError(f"pairs[{k}] (English of {n} tokens): {err}") from None
        content = None
        if p.content is not None:
            content = tuple(any(p.content[t] for t in ts) for ts in align)
        out.append(Pair(src=p.tgt, tgt=p.src, align=align, content=content, possible=possible))
    return out


def evaluate_backward(
    model: AgreementPair, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab, *, beam: int = 1, bs: int = 250
) -> dict:
    """Translate and score the X->English direction of an :class:`AgreementPair` on English->X ``pairs``.

    The pairs and vocabularies are those of the forward direction (as for
    :func:`attnlab.training.evaluate.evaluate_model`); they are reversed and swapped here. Length buckets are
    left out: they are defined on English sources, and X sentences can be longer than the last one.

    Args:
        model: the trained pair.
        pairs: English->X test pairs.
        src_vocab: the English vocabulary; tgt_vocab: the X vocabulary.
        beam: beam width (1 = greedy).
        bs: sentences per batch.

    Returns:
        dict with ``bleu``, ``chrf``, ``exact_match`` of the English outputs, ``aer`` and
        ``align_content``/``align_all``/``align_function`` of the backward forced attention against
        the inverted gold links (``aer`` None when the pairs have none), ``n_test``, ``beam``,
        ``decode_seconds``.

    Raises:
        TypeError: ``model`` is not an :class:`AgreementPair`.
    """
    if not isinstance(model, AgreementPair):
        raise TypeError(f"model must be an AgreementPair, got {type(model).__name__}")
    if not pairs:
        raise ValueError("pairs is empty: nothing to evaluate")
    back = reverse_pairs(pairs)
    net = model.backward_model
    hyps, _, seconds = translate(net, [p.src for p in back], tgt_vocab, src_vocab, beam=beam, bs=bs)
    refs = [list(p.tgt) for p in back]
    res: dict = {
        "bleu": round(corpus_bleu(hyps, refs), 2),
        "chrf": round(corpus_chrf(hyps, refs), 2),
        "exact_match": round(exact_match(hyps, refs), 4),
        "aer": None,
    }
    if all(p.align is not None for p in back):
        attns = forced_attention(net, back, tgt_vocab, src_vocab, bs=bs)
        res.update({k: round(v, 4) for k, v in alignment_agreement(attns, back).items()})
        res["aer"] = round(alignment_error_rate(attns, back), 4)
    res.update(n_test=len(back), beam=beam, decode_seconds=round(seconds, 3))
    return res
