"""Duplicates (docs/spam.md#duplicates): the same content posted to one form more than
`duplicate_max` times in a window, from any addresses, is spam after the first posts.

A post has up to MAX_FINGERPRINTS fingerprints: one of each long free-text value on its own
(whatever its field), so a pitch posted from many addresses with a different name and email
each time is still the same pitch; a post with no long text has one of its whole value set
instead (the same values always hold the same long texts, so a post with one needs no other
print to be caught, and its submit counts one row fewer). A fingerprint is a keyed
hash (HMAC-SHA256 under the secret key, 16 bytes) of the text normalised (case-folded, its
words only, one space between them), never the values. The submit path reads the counts of
a post's fingerprints before the checks that follow (`spam_lookup`, read-only), and the
submit statement counts them (`insert_submission`: one upsert per fingerprint, which starts
a new window once the old one is over; concurrent posts queue on the row, so the count is
exact) and stores the post as `duplicate_content` when one is over `duplicate_max`. The
retention tick deletes those whose window is over.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from core.spam.config import SpamConfig
from core.spam.text import MAX_TEXT, Piece

# Values with less text than this are not counted: short answers (a choice, a yes) repeat
# by nature.
MIN_TEXT = 10
# A text value with at least this many characters once normalised is free text that may
# carry a pitch: counted on its own.
LONG_TEXT = 40
MAX_FINGERPRINTS = 8


def fingerprints(
    values: Mapping[str, Any], pieces: list[Piece], secret_key: bytes
) -> tuple[bytes, ...]:
    """The keyed hashes of the long text values of `pieces` normalised, or when there is
    none of the whole value set, sorted (the statement's upserts lock them in this order);
    none for values with too little text."""
    found: set[bytes] = set()
    for piece in pieces:
        if len(found) >= MAX_FINGERPRINTS:
            break
        phrase = piece.phrase.strip()
        if len(phrase) >= LONG_TEXT:
            found.add(_keyed(secret_key, b"text:" + phrase.encode()))
    if found:
        return tuple(sorted(found))
    normal = {field: _normal(value) for field, value in sorted(values.items())}
    if sum(len(str(v)) for v in normal.values()) < MIN_TEXT:
        return ()
    canonical = json.dumps(normal, ensure_ascii=False, separators=(",", ":"))[: MAX_TEXT * 2]
    return (_keyed(secret_key, b"dup:" + canonical.encode()),)


def _keyed(secret_key: bytes, data: bytes) -> bytes:
    return hmac.new(secret_key, data, hashlib.sha256).digest()[:16]


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in sorted(value.items())}
    return value


def duplicate_reason(settings: SpamConfig, count: int | None) -> str | None:
    """`duplicate_content` when one of this post's fingerprints was posted to the form
    `duplicate_max` times or more in its window before it (`count`: the most of them); else
    None."""
    if settings.duplicate_max is None or count is None:
        return None
    return "duplicate_content" if count + 1 > settings.duplicate_max else None
