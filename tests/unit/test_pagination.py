from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.platform.errors import InvalidInput
from core.platform.pagination import decode_time_cursor, encode_cursor, encode_time_cursor


def test_time_cursor__round_trips_time_and_id() -> None:
    at = datetime(2026, 10, 13, 9, 30, 0, 123456, tzinfo=UTC)
    cursor = encode_time_cursor(at, "sub_1")
    assert decode_time_cursor(cursor) == (at, "sub_1")
    assert decode_time_cursor(None) is None


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 json!",
        encode_cursor(["sub_1"]),
        encode_cursor(["yesterday", "sub_1"]),
        encode_cursor(["2026-10-13T09:30:00+00:00", "sub_1", "extra"]),
    ],
)
def test_time_cursor__malformed_is_invalid_input(cursor: str) -> None:
    with pytest.raises(InvalidInput):
        decode_time_cursor(cursor)
