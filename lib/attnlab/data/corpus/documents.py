"""Generated "documents" for hierarchical attention, with the gold evidence sentence and words.

The data of lesson 13's hierarchical-attention section (Yang et al. 2016, "Hierarchical Attention
Networks for Document Classification"). A document is 4-6 short sentences of a tiny grammar of
its own::

    det [adj] subject verb [adverb] preposition det place .      e.g.  "the small cat sleeps under the table ."

and the question asked of every document is :data:`QUESTION`: *does any animal sleep under the
table?* A document is **positive** when exactly one of its sentences has an animal subject
(:data:`ANIMALS`), the verb "sleeps", the preposition "under" and the place "table"; that
sentence is the gold **evidence**, and its four words (subject, verb, preposition, place) are the
gold **evidence words**. A negative document has no such sentence.

So that no single word gives the answer away, about half of the other sentences are *near
misses*: they match three of the four conditions and break one ("the boy sleeps under the
table", "the cat sleeps on the table", ...). The classifier has to combine words inside a
sentence (word-level attention) and find the one sentence that matters (sentence-level
attention) -- the two levels the attention is scored on.

Everything is driven by one seed: same seed, same documents, on any machine.

Shape legend
------------
B  batch size (documents)
N  sentences per document (padded)
L  tokens per sentence (padded)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab.core.checks import check_int, check_positive_int
from attnlab.core.profiles import get_device
from attnlab.data import loaders
from attnlab.data.vocab import PAD, SPECIALS, Vocab

__all__ = [
    "DOCUMENT_VERSION",
    "QUESTION",
    "ANIMALS",
    "PEOPLE",
    "VERBS",
    "PREPOSITIONS",
    "PLACES",
    "ADJECTIVES",
    "ADVERBS",
    "DETERMINERS",
    "MIN_SENTENCES",
    "MAX_SENTENCES",
    "DOC_BUCKET_NAMES",
    "Document",
    "DocumentSplits",
    "is_evidence",
    "evidence_words",
    "make_document",
    "generate_documents",
    "make_document_splits",
    "document_vocab",
    "encode_documents",
    "collate_documents",
    "make_document_dataloaders",
]

DOCUMENT_VERSION = "documents-sleep-under-table-1"  # bump when a change alters the generated documents
QUESTION = "does any animal sleep under the table?"
ANIMALS = ("cat", "dog", "bird", "horse", "rabbit", "mouse", "cow")
PEOPLE = ("boy", "girl", "child", "man", "woman")
VERBS = ("sleeps", "sits", "eats", "waits", "plays", "hides")
PREPOSITIONS = ("under", "on", "near", "behind", "beside")
PLACES = ("table", "bed", "tree", "chair", "box", "door")
ADJECTIVES = ("small", "big", "old", "young", "happy", "tired")
ADVERBS = ("quietly", "happily", "alone")
DETERMINERS = ("the", "a", "my")
MIN_SENTENCES, MAX_SENTENCES = 4, 6
DOC_BUCKET_NAMES = tuple(str(n) for n in range(MIN_SENTENCES, MAX_SENTENCES + 1))

_TARGET = {"verb": "sleeps", "prep": "under", "place": "table"}  # with an animal subject
_P_ADJ, _P_ADV, _P_NEAR_MISS = 0.5, 0.3, 0.5


@dataclass(frozen=True)
class Document:
    """One document.

    Attributes:
        sentences: the sentences, each a tuple of tokens ending in ".".
        label: True when one sentence answers :data:`QUESTION` with yes.
        evidence: index of that sentence (None for a negative document).
        evidence_words: positions of its subject, verb, preposition and place (``()`` when negative).
    """

    sentences: tuple[tuple[str, ...], ...]
    label: bool
    evidence: int | None
    evidence_words: tuple[int, ...]

    @property
    def bucket(self) -> str:
        """Bucket name: the number of sentences (:data:`DOC_BUCKET_NAMES`)."""
        return str(len(self.sentences))


@dataclass(frozen=True)
class DocumentSplits:
    """Train / valid / test documents; no document is in two of them."""

    train: list[Document]
    valid: list[Document]
    test: list[Document]


def _slots(sentence: Sequence[str]) -> dict[str, int] | None:
    """Positions of subject, verb, preposition and place in a sentence of the grammar (None if not one)."""
    toks = list(sentence)
    if len(toks) < 6 or toks[-1] != "." or toks[0] not in DETERMINERS:
        return None
    i = 2 if toks[1] in ADJECTIVES else 1
    subj, verb = i, i + 1
    prep = verb + (2 if verb + 1 < len(toks) and toks[verb + 1] in ADVERBS else 1)
    place = prep + 2
    if place != len(toks) - 2 or toks[prep + 1] not in DETERMINERS:
        return None
    return {"subject": subj, "verb": verb, "prep": prep, "place": place}


def is_evidence(sentence: Sequence[str]) -> bool:
    """True when ``sentence`` says that an animal sleeps under the table (the answer to :data:`QUESTION`)."""
    s = _slots(sentence)
    if s is None:
        return False
    t = list(sentence)
    return (
        t[s["subject"]] in ANIMALS
        and t[s["verb"]] == _TARGET["verb"]
        and t[s["prep"]] == _TARGET["prep"]
        and t[s["place"]] == _TARGET["place"]
    )


def evidence_words(sentence: Sequence[str]) -> tuple[int, ...]:
    """Positions of the subject, verb, preposition and place of an evidence sentence.

    Raises:
        ValueError: ``sentence`` is not an evidence sentence (:func:`is_evidence`).
    """
    if not is_evidence(sentence):
        raise ValueError(f"not an evidence sentence (an animal that sleeps under the table): {' '.join(sentence)!r}")
    s = _slots(sentence)
    return (s["subject"], s["verb"], s["prep"], s["place"])


def _sentence(rng: random.Random, subject: str, verb: str, prep: str, place: str) -> tuple[str, ...]:
    toks = [rng.choice(DETERMINERS)]
    if rng.random() < _P_ADJ:
        toks.append(rng.choice(ADJECTIVES))
    toks += [subject, verb]
    if rng.random() < _P_ADV:
        toks.append(rng.choice(ADVERBS))
    toks += [prep, rng.choice(DETERMINERS), place, "."]
    return tuple(toks)


def _evidence_sentence(rng: random.Random) -> tuple[str, ...]:
    return _sentence(rng, rng.choice(ANIMALS), _TARGET["verb"], _TARGET["prep"], _TARGET["place"])


def _other_sentence(rng: random.Random) -> tuple[str, ...]:
    """A sentence that does not answer the question: a near miss (3 of 4 conditions) or any other."""
    if rng.random() < _P_NEAR_MISS:
        parts = {"subject": rng.choice(ANIMALS), **_TARGET}
        broken = rng.choice(tuple(parts))
        pool = {"subject": PEOPLE, "verb": VERBS, "prep": PREPOSITIONS, "place": PLACES}[broken]
        parts[broken] = rng.choice(tuple(w for w in pool if w != parts[broken]))
        return _sentence(rng, parts["subject"], parts["verb"], parts["prep"], parts["place"])
    while True:
        s = _sentence(
            rng, rng.choice(ANIMALS + PEOPLE), rng.choice(VERBS), rng.choice(PREPOSITIONS), rng.choice(PLACES)
        )
        if not is_evidence(s):
            return s


def make_document(rng: random.Random, n_sentences: int, label: bool) -> Document:
    """One document of ``n_sentences`` sentences, positive (one evidence sentence) or negative.

    Args:
        rng: the random stream.
        n_sentences: ``MIN_SENTENCES``..``MAX_SENTENCES``.
        label: True for a positive document.

    Raises:
        TypeError, ValueError: ``rng`` not a ``random.Random``, a bad sentence count or label.
    """
    if not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random, got {type(rng).__name__}")
    n = check_int("n_sentences", n_sentences)
    if not MIN_SENTENCES <= n <= MAX_SENTENCES:
        raise ValueError(f"n_sentences must be in [{MIN_SENTENCES}, {MAX_SENTENCES}], got {n}")
    if not isinstance(label, bool):
        raise TypeError(f"label must be a bool, got {type(label).__name__}")
    sentences = [_other_sentence(rng) for _ in range(n)]
    evidence = None
    if label:
        evidence = rng.randrange(n)
        sentences[evidence] = _evidence_sentence(rng)
    words = evidence_words(sentences[evidence]) if label else ()
    return Document(tuple(sentences), label, evidence, words)


def generate_documents(n: int, seed: int = 0, *, exclude: frozenset = frozenset()) -> list[Document]:
    """``n`` documents: sentence count uniform in 4-6, label a fair coin, all different.

    Args:
        n: number of documents (>= 0).
        seed: the seed of the whole list.
        exclude: sentence tuples (``Document.sentences``) never returned (another split's documents).
    """
    n = check_int("n", n, minimum=0)
    rng = random.Random(f"attnlab.documents/{check_int('seed', seed)}")
    out, seen = [], set(exclude)
    while len(out) < n:
        doc = make_document(rng, rng.randint(MIN_SENTENCES, MAX_SENTENCES), rng.random() < 0.5)
        if doc.sentences not in seen:
            seen.add(doc.sentences)
            out.append(doc)
    return out


def make_document_splits(n_train: int = 3000, n_valid: int = 300, n_test: int = 300, seed: int = 0) -> DocumentSplits:
    """Train / valid / test documents, disjoint; the test split stratified by sentence count and label.

    Args:
        n_train, n_valid: sizes (>= 1).
        n_test: size, a positive multiple of ``2 * len(DOC_BUCKET_NAMES)`` (each sentence count
            with as many positive as negative documents).
        seed: the seed of all three splits.

    Raises:
        ValueError: a size below 1, or ``n_test`` not such a multiple.
    """
    n_train = check_positive_int("n_train", n_train)
    n_valid = check_positive_int("n_valid", n_valid)
    n_test = check_positive_int("n_test", n_test)
    cells = 2 * len(DOC_BUCKET_NAMES)
    if n_test % cells:
        raise ValueError(
            f"n_test must be a multiple of {cells} (each of {len(DOC_BUCKET_NAMES)} sentence counts x 2 labels), "
            f"got {n_test}"
        )
    rng = random.Random(f"attnlab.documents/test/{check_int('seed', seed)}")
    test, seen = [], set()
    for n_sent in range(MIN_SENTENCES, MAX_SENTENCES + 1):
        for label in (True, False):
            drawn = 0
            while drawn < n_test // cells:
                doc = make_document(rng, n_sent, label)
                if doc.sentences not in seen:
                    seen.add(doc.sentences)
                    test.append(doc)
                    drawn += 1
    valid = generate_documents(n_valid, seed * 2 + 1, exclude=frozenset(seen))
    seen |= {d.sentences for d in valid}
    train = generate_documents(n_train, seed * 2 + 2, exclude=frozenset(seen))
    return DocumentSplits(train, valid, test)


def document_vocab() -> Vocab:
    """The word vocabulary: the four specials, then every word of the grammar (a closed set, in a fixed order)."""
    words = (*DETERMINERS, *ADJECTIVES, *ANIMALS, *PEOPLE, *VERBS, *ADVERBS, *PREPOSITIONS, *PLACES, ".")
    return Vocab(list(SPECIALS) + list(dict.fromkeys(words)))


def encode_documents(docs: Sequence[Document], vocab: Vocab | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per document ``(ids (N, L) int64 right-padded with PAD, label () int64 0/1)``.

    Args:
        docs: the documents.
        vocab: the word vocabulary (default :func:`document_vocab`).
    """
    vocab = document_vocab() if vocab is None else vocab
    items = []
    for d in docs:
        L = max(len(s) for s in d.sentences)
        ids = torch.full((len(d.sentences), L), PAD, dtype=torch.long)  # (N, L)
        for i, s in enumerate(d.sentences):
            ids[i, : len(s)] = torch.tensor(vocab.encode(s, eos=False))
        items.append((ids, torch.tensor(int(d.label))))  # (N, L), ()
    return items


def collate_documents(items: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ``(ids (N, L), label)`` items into ``(docs (B, N, L), labels (B,))``.

    Sentences are right-padded with ``PAD`` to the longest sentence of the batch and documents to
    the most sentences, so a padded sentence is a row of ``PAD`` only.
    """
    N = max(it[0].size(0) for it in items)
    L = max(it[0].size(1) for it in items)
    docs = torch.full((len(items), N, L), PAD, dtype=torch.long)  # (B, N, L)
    for b, (ids, _) in enumerate(items):
        docs[b, : ids.size(0), : ids.size(1)] = ids
    labels = torch.stack([it[1] for it in items])  # (B,)
    return docs, labels


def make_document_dataloaders(
    splits: DocumentSplits,
    vocab: Vocab | None = None,
    *,
    bs: int = 64,
    device: str | torch.device | None = None,
    seed: int = 0,
):
    """fastai ``DataLoaders`` of ``(docs (B, N, L), labels (B,))`` batches (``n_inp == 1``).

    Train batches are shuffled in an order fixed by ``seed`` (``attnlab.data.loaders.SeededSortedDL``
    without length bucketing: documents are all short); valid keeps its order.

    Args:
        splits: the documents (``test`` is not used).
        vocab: the word vocabulary (default :func:`document_vocab`).
        bs: batch size.
        device: where batches go (None: :func:`attnlab.core.profiles.get_device`).
        seed: seed of the training order.
    """
    from fastai.data.core import DataLoaders
    from fastai.data.load import DataLoader

    if device is None:

        device = get_device()
    bs = check_positive_int("bs", bs)
    train = encode_documents(splits.train, vocab)
    valid = encode_documents(splits.valid, vocab)
    common = dict(bs=bs, create_batch=collate_documents, num_workers=0, device=device)
    train_dl = loaders.SeededSortedDL(
        train,
        res=[int(t[0].numel()) for t in train],
        shuffle=True,
        drop_last=False,
        seed=check_int("seed", seed),
        bucketed=False,
        **common,
    )
    valid_dl = DataLoader(valid, shuffle=False, **common)
    return DataLoaders(train_dl, valid_dl, device=device)
