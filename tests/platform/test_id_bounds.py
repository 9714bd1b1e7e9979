"""`id_bound`: the least id of a millisecond, as Python reads the weeks of submissions by id
(the inbox's first read) and as the database bounds them (`submission_id_bound`, 0069)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from core.platform.db import Conn
from core.platform.ids import id_bound, new_id
from tests.support.records import rows


async def test_id_bound__is_the_databases_bound_and_sorts_before_every_id_of_its_millisecond(
    conn: Conn,
) -> None:
    draw = random.Random(20261206)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    # Milliseconds from 1970 to 2200, and the edges of the digits' carries.
    millis = [draw.randrange(0, 7_258_118_400_000) for _ in range(2_000)]
    millis += [0, 1, 31, 32, 1023, 1024, (1 << 40) - 1, 1 << 40]
    found = await rows(
        conn,
        "SELECT n, submission_id_bound(at) AS bound"
        "  FROM unnest(%(at)s::timestamptz[]) WITH ORDINALITY AS a(at, n) ORDER BY n",
        at=[epoch + timedelta(milliseconds=m) for m in millis],
    )
    assert [r["bound"] for r in found] == [id_bound("sub", m) for m in millis]
    for m in millis[:200]:
        assert new_id("sub", now_ms=m - 1) < id_bound("sub", m) <= new_id("sub", now_ms=m)
