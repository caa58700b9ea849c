"""Hierarchical attention networks (Yang et al. 2016) for the generated documents.

Yang, Yang, Dyer, He, Smola and Hovy (2016), "Hierarchical Attention Networks for Document
Classification": a document is a list of sentences, a sentence a list of words, and attention
pools at both levels.

* **Word level** -- a BiGRU reads each sentence, ``h_it = [->h_it; <-h_it]``; each word gets
  ``u_it = tanh(W_w h_it + b_w)`` and the score ``u_it . u_w`` against a learned *word context
  vector* ``u_w``; ``alpha_it = softmax_t(u_it . u_w)`` and the sentence vector is
  ``s_i = sum_t alpha_it h_it``.
* **Sentence level** -- a second BiGRU reads the sentence vectors, ``h_i``, and the same pooling
  with a *sentence context vector* ``u_s`` gives ``alpha_i`` and the document vector
  ``v = sum_i alpha_i h_i``.
* **Classifier** -- ``p = softmax(W_c v + b_c)``.

Both poolings are one module, :class:`ContextAttention`; its score is the ``dot`` score of
:class:`attnlab.core.scores.AttentionScore` between ``u_w`` and the ``u_it``, and the weights come from
:func:`attnlab.core.scores.attend` (the course's masked softmax): padding words and padding sentences
get exactly zero weight, and a fully padded sentence gives a zero vector, never NaN.

Metrics (:func:`evaluate_han`): accuracy; on the positive documents, how often the most attended
sentence is the gold evidence sentence, and how often the most attended word of the gold sentence
is one of its gold evidence words (:mod:`attnlab.data.corpus.documents`).

Shape legend
------------
B  batch size (documents)
N  sentences per document (padded)
L  words per sentence (padded)
M  real sentences in the batch (``B * N`` less the padded ones)
E  word embedding size
H  BiGRU state size (both directions together; the same at both levels)
A  attention hidden size (the size of ``u_it`` and of the context vectors)
C  number of classes
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.core.checks import (
    check_int,
    check_positive_int,
    check_probability,
    check_right_padded,
    check_tensor,
    check_token_ids,
    eval_mode,
)
from attnlab.core.scores import AttentionScore, attend
from attnlab.data.corpus.documents import (
    Document,
    collate_documents,
    encode_documents,
)
from attnlab.data.vocab import PAD, Vocab

__all__ = ["HANConfig", "ContextAttention", "HAN", "document_masks", "evaluate_han"]


@dataclass(frozen=True)
class HANConfig:
    """Configuration of :class:`HAN` (frozen: a config is a value).

    Attributes:
        vocab_size: word vocabulary size.
        n_classes: C (>= 2).
        emb_dim: E.
        hid_dim: H, even (the BiGRUs have ``H / 2`` units per direction).
        attn_dim: A.
        dropout: dropout on the word embeddings and the document vector.
        word_rnn: True (Yang et al.): a BiGRU gives every word a state that has read the whole
            sentence; False: each word's state is its own embedding, ``h_it = tanh(W_e x_it)``, so
            the word attention can only find the sentence's meaning by weighting the words that
            carry it.
    """

    vocab_size: int
    n_classes: int = 2
    emb_dim: int = 32
    hid_dim: int = 48
    attn_dim: int = 32
    dropout: float = 0.0
    word_rnn: bool = True

    def __post_init__(self):
        if not isinstance(self.word_rnn, bool):
            raise TypeError(f"word_rnn must be a bool, got {type(self.word_rnn).__name__}")
        for name in ("vocab_size", "emb_dim", "hid_dim", "attn_dim"):
            check_positive_int(name, getattr(self, name))
        check_int("n_classes", self.n_classes, minimum=2)
        if self.hid_dim % 2:
            raise ValueError(f"hid_dim must be even (two GRU directions of hid_dim // 2 units), got {self.hid_dim}")
        check_probability("dropout", self.dropout)


class ContextAttention(nn.Module):
    """Attention pooling against a learned context vector (Yang et al. 2016).

    ``u_j = tanh(W h_j + b)``, ``score_j = u_j . u_ctx`` (:class:`~attnlab.core.scores.AttentionScore`
    ``"dot"``), ``alpha = masked softmax(score)``, ``pooled = sum_j alpha_j h_j``.

    Args:
        in_dim: H, size of the states pooled.
        attn_dim: A, size of ``u_j`` and of the context vector ``u_ctx``.
    """

    def __init__(self, in_dim: int, attn_dim: int):
        super().__init__()
        in_dim = check_positive_int("in_dim", in_dim)
        attn_dim = check_positive_int("attn_dim", attn_dim)
        self.proj = nn.Linear(in_dim, attn_dim)  # W, b
        self.context = nn.Parameter(torch.randn(attn_dim) / attn_dim**0.5)  # u_ctx, (A,)
        self.score = AttentionScore("dot", attn_dim, attn_dim)

    def forward(self, states: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pool ``states (B, S, H)`` over the positions where ``keep (B, S)`` is True.

        Returns:
            ``(pooled (B, H), weights (B, S))``; the weights are 0 where ``keep`` is False, and a
            row with no True gives zero weights and a zero vector.
        """
        u = torch.tanh(self.proj(states))  # (B, S, A)
        query = self.context.unsqueeze(0).expand(states.size(0), -1)  # (B, A)
        scores = self.score(query, u, u)  # (B, S)
        return attend(scores, states, keep)  # (B, H), (B, S)


def document_masks(docs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The word and sentence masks of a batch of documents (True = takes part).

    Args:
        docs: ``(B, N, L)`` integer word ids, each sentence right-padded with ``PAD`` and each
            document's sentences followed by all-``PAD`` rows.

    Returns:
        ``(word_keep (B, N, L), sentence_keep (B, N))`` bool.

    Raises:
        TypeError: not an integer tensor.
        ValueError: not 3-D, padding before a real word or before a real sentence, or a document
            without any word.
    """
    check_tensor("docs", docs, dims=3, shape_text="(B, N, L) word ids")
    check_token_ids("docs", docs.flatten(0, 1))  # integer dtype, (B*N, L)
    word_keep = docs != PAD  # (B, N, L)
    sentence_keep = word_keep.any(-1)  # (B, N)
    check_right_padded("docs (sentences of a document)", sentence_keep.long(), 0)
    check_right_padded("docs (words of a sentence)", docs[sentence_keep], PAD)  # (M, L)
    return word_keep, sentence_keep


class HAN(nn.Module):
    """Hierarchical attention network: word BiGRU + attention, sentence BiGRU + attention, classifier."""

    def __init__(self, config: HANConfig):
        super().__init__()
        if not isinstance(config, HANConfig):
            raise TypeError(f"config must be a HANConfig, got {type(config).__name__}")
        self.config = c = config
        H = c.hid_dim
        self.emb = nn.Embedding(c.vocab_size, c.emb_dim, padding_idx=PAD)
        if c.word_rnn:
            self.word_rnn = nn.GRU(c.emb_dim, H // 2, batch_first=True, bidirectional=True)
        else:
            self.word_proj = nn.Linear(c.emb_dim, H)  # W_e: a word's state sees that word only
        self.word_attn = ContextAttention(H, c.attn_dim)
        self.sent_rnn = nn.GRU(H, H // 2, batch_first=True, bidirectional=True)
        self.sent_attn = ContextAttention(H, c.attn_dim)
        self.drop = nn.Dropout(c.dropout)
        self.classifier = nn.Linear(H, c.n_classes)

    @staticmethod
    def _birnn(rnn: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """States ``(R, P, H)`` of a BiGRU over ``x (R, P, in)`` whose rows have ``lengths (R,) >= 1``."""
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))  # (R, P, H)
        return states

    def forward(self, docs: torch.Tensor, *, return_attention: bool = False):
        """Classify a batch of documents.

        Args:
            docs: ``(B, N, L)`` word ids (see :func:`document_masks`), on the model's device.
            return_attention: also return both levels' attention weights.

        Returns:
            ``logits (B, C)``, or ``(logits, word_attn (B, N, L), sent_attn (B, N))``; padding
            words and sentences have weight 0 (a padded sentence's word row is all 0).

        Raises:
            TypeError, ValueError: as :func:`document_masks`; an id outside the vocabulary or a
                tensor on another device.
        """
        word_keep, sent_keep = document_masks(docs)  # (B, N, L), (B, N)
        check_token_ids("docs", docs.flatten(0, 1), vocab_size=self.config.vocab_size, device=self.emb.weight.device)
        B, N, L = docs.shape
        H = self.config.hid_dim
        # Only the real sentences go through the word level: a GRU cannot read an empty sentence.
        words = docs[sent_keep]  # (M, L)
        keep = word_keep[sent_keep]  # (M, L)
        emb = self.drop(self.emb(words))  # (M, L, E)
        if self.config.word_rnn:
            h_words = self._birnn(self.word_rnn, emb, keep.sum(1))  # (M, L, H)
        else:
            h_words = torch.tanh(self.word_proj(emb))  # (M, L, H)
        s_real, a_real = self.word_attn(h_words, keep)  # (M, H), (M, L)
        sentences = emb.new_zeros(B, N, H)  # (B, N, H)
        sentences[sent_keep] = s_real
        word_attn = emb.new_zeros(B, N, L)  # (B, N, L): padded sentences keep zero weights
        word_attn[sent_keep] = a_real
        h_sents = self._birnn(self.sent_rnn, sentences, sent_keep.sum(1))  # (B, N, H)
        doc, sent_attn = self.sent_attn(h_sents, sent_keep)  # (B, H), (B, N)
        logits = self.classifier(self.drop(doc))  # (B, C)
        if return_attention:
            return logits, word_attn, sent_attn
        return logits


def evaluate_han(model: HAN, docs: Sequence[Document], vocab: Vocab | None = None, *, bs: int = 256) -> dict:
    """Accuracy and attention agreement of ``model`` on ``docs``.

    Args:
        model: a :class:`HAN`.
        docs: the documents (with their gold labels and evidence).
        vocab: the word vocabulary (default :func:`attnlab.data.corpus.documents.document_vocab`).
        bs: documents per batch.

    Returns:
        ``{"accuracy", "sentence_top1", "word_top1", "n", "n_positive", "by_bucket"}``:
        ``sentence_top1`` -- share of positive documents whose most attended sentence is the gold
        one; ``word_top1`` -- share of positive documents whose most attended word *of the gold
        sentence* is a gold evidence word; ``by_bucket[n_sentences]`` -- the accuracy per
        sentence count. The rates are None when there is nothing to count.
    """

    if not isinstance(model, HAN):
        raise TypeError(f"model must be a HAN, got {type(model).__name__}")
    bs = check_positive_int("bs", bs)
    docs = list(docs)
    if not docs:
        raise ValueError("docs is empty: nothing to evaluate")
    device = model.emb.weight.device
    items = encode_documents(docs, vocab)
    correct, sent_hits, word_hits = [], [], []
    with eval_mode(model):
        for i in range(0, len(items), bs):
            batch, labels = collate_documents(items[i : i + bs])  # (b, N, L), (b,)
            logits, word_attn, sent_attn = model(batch.to(device), return_attention=True)
            pred = logits.argmax(-1).cpu()  # (b,)
            correct += (pred == labels).tolist()
            for d, w, s in zip(docs[i : i + bs], word_attn.cpu(), sent_attn.cpu(), strict=True):
                if d.label:
                    sent_hits.append(int(s.argmax()) == d.evidence)
                    word_hits.append(int(w[d.evidence].argmax()) in d.evidence_words)

    def rate(xs):
        return sum(xs) / len(xs) if xs else None

    by_bucket = {}
    for b in sorted({d.bucket for d in docs}):
        by_bucket[b] = {"accuracy": rate([c for c, d in zip(correct, docs, strict=True) if d.bucket == b])}
    return {
        "accuracy": rate(correct),
        "sentence_top1": rate(sent_hits),
        "word_top1": rate(word_hits),
        "n": len(docs),
        "n_positive": len(sent_hits),
        "by_bucket": by_bucket,
    }
