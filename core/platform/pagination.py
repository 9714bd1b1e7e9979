"""Cursor pagination: `limit` (1-200, default 50) and an opaque `cursor`.

A cursor is the keyset position of the last row of a page (e.g. its id, or
`[received_at, id]`), encoded so clients treat it as opaque.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from core.platform.errors import InvalidInput
from core.platform.values import check_storable

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode_cursor(position: list[Any]) -> str:
    """An opaque cursor for the keyset `position` of a page's last row."""
    raw = json.dumps(position, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> list[Any] | None:
    """The keyset position a cursor stands for (an empty one is the first page); a malformed
    cursor, or one holding what no query can take (NUL, a lone surrogate), is InvalidInput."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = json.loads(raw)
        check_storable(position)
    except (ValueError, UnicodeDecodeError, InvalidInput):
        position = None
    if not isinstance(position, list):
        raise InvalidInput("malformed cursor", [{"field": "cursor", "message": "malformed"}])
    return position


def encode_time_cursor(at: datetime, row_id: str) -> str:
    """The cursor of a row in a page ordered by `(time, id)`, e.g. submissions by arrival."""
    return encode_cursor([at.isoformat(), row_id])


def decode_time_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """The `(time, id)` position of a time-ordered page's cursor; malformed is InvalidInput."""
    position = decode_cursor(cursor)
    if position is None:
        return None
    try:
        at, row_id = position
        return datetime.fromisoformat(str(at)), str(row_id)
    except (ValueError, TypeError):
        raise InvalidInput(
            "malformed cursor", [{"field": "cursor", "message": "malformed"}]
        ) from None
