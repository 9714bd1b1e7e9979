"""The learned filter's arithmetic (docs/spam.md#the-learned-filter), pure: a submission's
tokens, their keyed hashes, and a naive Bayes score from the organization's counts.

A token is a word of a value with its field's name as context (`message:seo`), and the
word alone (`*:seo`), so the same word weighs differently in a name than in a message and
still counts where the form has no such field. Each submission counts a token once
(document frequencies), at most MAX_TOKENS of them. The model stores only keyed hashes of
tokens (8 bytes of BLAKE2b under a key derived from the secret key), never words.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.spam.text import Piece, texts

MAX_TOKENS = 300  # tokens a submission contributes or is judged by
MIN_WORD, MAX_WORD = 2, 30
# The filter judges only once it was trained on at least this many of each.
MIN_DOCS = 10


def tokens(values: Mapping[str, Any] | list[Piece]) -> list[str]:
    """The distinct tokens of the values (or of their pieces, read once by the caller), in
    the order met, at most MAX_TOKENS."""
    found: dict[str, None] = {}
    for piece in values if isinstance(values, list) else texts(values):
        context = piece.field.casefold()[:40]
        # Each distinct word once (a C-level pass), however often the text repeats it.
        for word in dict.fromkeys(piece.words):
            if not MIN_WORD <= len(word) <= MAX_WORD:
                continue
            found.setdefault(f"{context}:{word}")
            found.setdefault(f"*:{word}")
            if len(found) >= MAX_TOKENS:
                return list(found)[:MAX_TOKENS]
    return list(found)


def _key(secret_key: bytes) -> bytes:
    return hashlib.sha256(b"postbag-spam-tokens:" + secret_key).digest()


def hashed(token_list: Iterable[str], secret_key: bytes) -> list[bytes]:
    """Each token's 8-byte keyed hash, in the same order."""
    key = _key(secret_key)
    return [hashlib.blake2b(t.encode(), key=key, digest_size=8).digest() for t in token_list]


@dataclass(frozen=True, slots=True)
class Counts:
    """What the model knows of some tokens: the documents trained on, per class, and for
    each token hash seen, in how many spam and ham documents it appeared."""

    spam_docs: int
    ham_docs: int
    tokens: Mapping[bytes, tuple[int, int]]

    @property
    def ready(self) -> bool:
        return self.spam_docs >= MIN_DOCS and self.ham_docs >= MIN_DOCS


def weight(counts: Counts, token: bytes) -> float | None:
    """The token's log-likelihood ratio (spam over ham, Laplace-smoothed), or None for a
    token the model never saw."""
    seen = counts.tokens.get(token)
    if seen is None or seen == (0, 0):
        return None
    spam, ham = seen
    in_spam = (spam + 1) / (counts.spam_docs + 2)
    in_ham = (ham + 1) / (counts.ham_docs + 2)
    return math.log(in_spam) - math.log(in_ham)


def score(counts: Counts, token_hashes: Iterable[bytes]) -> float:
    """The probability of spam (0 to 1) of a submission with these token hashes."""
    total = math.log((counts.spam_docs + 1) / (counts.ham_docs + 1))
    for token in set(token_hashes):
        w = weight(counts, token)
        if w is not None:
            total += w
    # A logistic, written so neither side overflows.
    if total >= 0:
        return 1 / (1 + math.exp(-total))
    return math.exp(total) / (1 + math.exp(total))


def heaviest(
    counts: Counts, token_list: list[str], token_hashes: list[bytes], limit: int = 8
) -> list[dict[str, Any]]:
    """The tokens that weighed most toward spam (the heaviest first, then those toward
    ham): `token` and its `weight`."""
    weighed = [
        (t, w)
        for t, h in zip(token_list, token_hashes, strict=True)
        if (w := weight(counts, h)) is not None
    ]
    weighed.sort(key=lambda item: -item[1])
    return [{"token": t, "weight": round(w, 3)} for t, w in weighed[:limit]]
