"""The counts pass forgets the per-address counts of acknowledgements of days gone by and
of password resets whose window ended."""

from __future__ import annotations

from datetime import timedelta

from core.owner.members import RESET_WINDOW
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.dashboard import csrf_of, dashboard_client
from tests.support.records import rows


async def test_retention__forgets_acknowledgement_counts_of_past_days(
    services: Services, conn: Conn
) -> None:
    """Only today's count caps acknowledgements: an address that never comes back leaves no
    row behind once its day is over."""
    now = utcnow()
    for recipient, day in ((b"past", now - timedelta(days=1)), (b"today", now)):
        await conn.execute(
            "INSERT INTO acknowledgement_counts (recipient_hash, day, sent)"
            " VALUES (%(r)s, (%(at)s AT TIME ZONE 'UTC')::date, 5)",
            {"r": recipient, "at": day},
        )
    stats = await run_retention(services, now=now, budget=10)
    assert stats["acknowledgement_counts_pruned"] == 1
    kept = await rows(conn, "SELECT recipient_hash FROM acknowledgement_counts")
    assert [bytes(row["recipient_hash"]) for row in kept] == [b"today"]


async def test_retention__forgets_reset_counts_whose_window_ended(
    services: Services, conn: Conn
) -> None:
    """A reset asked for any address counts (a stranger's too): the row goes once its
    window is over, the next request would start a new one."""
    async with dashboard_client(services) as client:
        page = await client.get("/app/forgot")
        await client.post("/app/forgot", data={"csrf": csrf_of(page.text), "email": "x@a.test"})
    later = utcnow() + RESET_WINDOW
    await conn.execute(
        "INSERT INTO reset_counts (recipient_hash, window_start, sent) VALUES ('\\x01', %(at)s, 1)",
        {"at": later},
    )
    stats = await run_retention(services, now=later + timedelta(seconds=1), budget=10)
    assert stats["reset_counts_pruned"] == 1
    kept = await rows(conn, "SELECT recipient_hash FROM reset_counts")
    assert [bytes(row["recipient_hash"]) for row in kept] == [b"\x01"]
