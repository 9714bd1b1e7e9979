"""Cursor pagination: `limit` (1-200, default 50) and an opaque `cursor`.

A cursor is the keyset position of the last row of a page (e.g. its id, or
`[received_at, id]`), encoded so clients treat it as opaque.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from core.platform.errors import InvalidInput

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode_cursor(position: list[Any]) -> str:
    """An opaque cursor for the keyset `position` of a page's last row."""
    raw = json.dumps(position, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> list[Any] | None:
    """The keyset position a cursor stands for; a malformed cursor is InvalidInput."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        position = None
    if not isinstance(position, list):
        raise InvalidInput("malformed cursor", [{"field": "cursor", "message": "malformed"}])
    return position
