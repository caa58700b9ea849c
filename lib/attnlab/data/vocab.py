"""Vocabularies: the special tokens and the token ↔ id mapping every model and loader shares.

Ids 0-3 are the specials ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` (:data:`PAD`, :data:`BOS`,
:data:`EOS`, :data:`UNK`) in every vocabulary, then the tokens by falling frequency.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from attnlab.data.corpus.splits import Pair, Splits

__all__ = ["SPECIALS", "PAD", "BOS", "EOS", "UNK", "Vocab", "build_vocabs"]

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD, BOS, EOS, UNK = 0, 1, 2, 3


class Vocab:
    """Token ↔ id mapping with the four specials first (``<pad>`` = 0, ``<bos>``, ``<eos>``, ``<unk>``).

    ``unk_count`` counts the unknown tokens seen by :meth:`encode` since creation (reset it by hand).
    """

    def __init__(self, itos: Sequence[str]):
        itos = list(itos)
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {itos[: len(SPECIALS)]}")
        if len(set(itos)) != len(itos):
            raise ValueError("a vocabulary must not repeat tokens")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}
        self.unk_count = 0

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], *, min_freq: int = 1) -> Vocab:
        """Vocabulary of the tokens seen at least ``min_freq`` times.

        Args:
            token_lists: iterable of token sequences.
            min_freq: minimum count for a token to get its own id.

        Returns:
            A :class:`Vocab`: specials, then tokens sorted by (-frequency, token) (deterministic).
        """
        counts = Counter()
        for toks in token_lists:
            counts.update(toks)
        for s in SPECIALS:
            counts.pop(s, None)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, tok) -> bool:
        return tok in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # mutable (unk_count), compared by content

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {self.itos[len(SPECIALS) : len(SPECIALS) + 5]}…)"

    def encode(self, tokens: Sequence[str], *, bos: bool = False, eos: bool = True) -> list[int]:
        """Token ids; unknown tokens become ``UNK`` and are added to ``unk_count``.

        Args:
            tokens: the tokens.
            bos: prepend ``<bos>``.
            eos: append ``<eos>``.

        Returns:
            A list of ints.
        """
        ids = list(map(self.stoi.get, tokens, itertools.repeat(-1)))
        if -1 in ids:  # rare: only then pay for a second pass
            self.unk_count += ids.count(-1)
            ids = [UNK if i == -1 else i for i in ids]
        if bos:
            ids.insert(0, BOS)
        if eos:
            ids.append(EOS)
        return ids

    def decode(self, ids, *, strip: bool = True) -> list[str]:
        """Tokens for ids (a list or a 1-D tensor).

        Args:
            ids: token ids, each in ``[0, len(self))``.
            strip: stop at the first ``<eos>`` and drop ``<pad>``/``<bos>``.

        Returns:
            A list of tokens.

        Raises:
            ValueError: an id outside ``[0, len(self))`` (Python's negative indexing would
                otherwise turn -1 into the last token).
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        itos, n = self.itos, len(self.itos)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < n:
                raise ValueError(f"ids holds token id {i}, outside the vocabulary [0, {n})")
            if strip:
                if i == EOS:
                    break
                if i in (PAD, BOS):
                    continue
            out.append(itos[i])
        return out

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"itos": [...]}``."""
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        """Inverse of :meth:`to_dict`."""
        return cls(d["itos"])


def build_vocabs(splits_or_pairs: Splits | Iterable[Pair]) -> tuple[Vocab, Vocab]:
    """Source and target vocabularies from the training pairs.

    Args:
        splits_or_pairs: a :class:`~attnlab.data.corpus.splits.Splits` (its ``train`` is used) or an
            iterable of pairs.

    Returns:
        ``(src_vocab, tgt_vocab)``.
    """
    pairs = splits_or_pairs.train if isinstance(splits_or_pairs, Splits) else list(splits_or_pairs)
    return Vocab.build(p.src for p in pairs), Vocab.build(p.tgt for p in pairs)
