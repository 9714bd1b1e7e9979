"""Duplicates (docs/spam.md#duplicates): the same normalised values posted to one form more
than `duplicate_max` times in a window, from any addresses, are spam after the first ones.

Each post adds one to its fingerprint's count in one upsert (`count_fingerprint`), which
starts a new window once the old one is over; concurrent posts queue on the row, so the
count is exact. A fingerprint is a keyed hash (HMAC-SHA256 under the secret key, 16
bytes) of the values case-folded with their spaces collapsed, never the values; the
retention tick deletes those whose window is over.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.platform.queries import queries
from core.platform.services import Services
from core.spam.settings import SpamSettings
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


async def duplicate_reason(
    services: Services,
    settings: SpamSettings,
    *,
    form_id: str,
    organization_id: str,
    values: Mapping[str, Any],
    now: datetime,
) -> str | None:
    """`duplicate_content` when this post's values were posted to the form more than
    `duplicate_max` times in the window, counting this one; else None."""
    if settings.duplicate_max is None:
        return None
    hashed = fingerprint(values, services.settings.require_secret_key())
    if hashed is None:
        return None
    params = {
        "form_id": form_id,
        "organization_id": organization_id,
        "fingerprint": hashed,
        "now": now,
        "window": settings.duplicate_window_seconds,
    }
    async with services.db.connection() as conn:
        cur = await conn.execute(queries["count_fingerprint"], params)
        row = await cur.fetchone()
    assert row is not None
    return "duplicate_content" if row["count"] > settings.duplicate_max else None
