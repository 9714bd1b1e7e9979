"""Duplicates (docs/spam.md#duplicates): the same normalised values posted to one form more
than `duplicate_max` times in a window, from any addresses, are spam after the first ones.

Each post adds one to its fingerprint's count in one upsert (in `spam_lookup`, which also
reads the learned filter's counts) that starts a new window once the old one is over;
concurrent posts queue on the row, so the count is exact. A fingerprint is a keyed hash
(HMAC-SHA256 under the secret key, 16 bytes) of the values case-folded with their spaces
collapsed, never the values; the retention tick deletes those whose window is over.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from core.spam.config import SpamConfig
from core.spam.text import MAX_TEXT

# Values with less text than this are not counted: short answers (a choice, a yes) repeat
# by nature.
MIN_TEXT = 10


def fingerprint(values: Mapping[str, Any], secret_key: bytes) -> bytes | None:
    """The keyed hash of the values normalised, or None when they hold too little text."""
    normal = {field: _normal(value) for field, value in sorted(values.items())}
    canonical = json.dumps(normal, ensure_ascii=False, separators=(",", ":"))[: MAX_TEXT * 2]
    if sum(len(str(v)) for v in normal.values()) < MIN_TEXT:
        return None
    return hmac.new(secret_key, b"dup:" + canonical.encode(), hashlib.sha256).digest()[:16]


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.casefold().split())
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in sorted(value.items())}
    return value


def duplicate_reason(settings: SpamConfig, count: int | None) -> str | None:
    """`duplicate_content` when this post's values were posted to the form more than
    `duplicate_max` times in the window (`count`, this one included); else None."""
    if settings.duplicate_max is None or count is None:
        return None
    return "duplicate_content" if count > settings.duplicate_max else None
