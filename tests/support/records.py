"""Reading rows back as the owner: any query, one delivery, a delivery's attempts, what dead
deliveries left, the deliveries as the worker claims them, the backend waiting for a lock;
and a failing audit append, injected."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from core.outbox.store import Claim, claim_due
from core.platform.clock import utcnow
from core.platform.db import Conn

# A failure of the audit append after the change was made, as the database reports a lost
# server (SQLSTATE 57P01): the app answers it as unavailable.
_FAIL_AUDIT = """
CREATE FUNCTION fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '57P01'; END $$;
CREATE TRIGGER fail_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_audit();
"""


@asynccontextmanager
async def failing_audit(conn: Conn) -> AsyncIterator[None]:
    """Every audit append fails inside this block."""
    await conn.execute(_FAIL_AUDIT)
    try:
        yield
    finally:
        await conn.execute("DROP TRIGGER fail_audit ON audit_log; DROP FUNCTION fail_audit()")


async def rows(conn: Conn, sql: str, **params: Any) -> list[dict[str, Any]]:
    cur = await conn.execute(sql, params)
    return list(await cur.fetchall())


async def delivery(conn: Conn, dlv: str) -> dict[str, Any]:
    cur = await conn.execute("SELECT * FROM deliveries WHERE id = %(id)s", {"id": dlv})
    row = await cur.fetchone()
    assert row is not None
    return dict(row)


async def attempts(conn: Conn, dlv: str) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT * FROM delivery_attempts WHERE delivery_id = %(id)s ORDER BY id", {"id": dlv}
    )
    return [dict(row) for row in await cur.fetchall()]


async def dead_leaves(conn: Conn) -> dict[str, list[Any]]:
    """What dead deliveries left: their alerts (subject, occurrences, last delivery), their
    `delivery.dead` events (the delivery), and the hooks' deliveries of those (the delivery
    each body names)."""
    alerts = await rows(
        conn,
        "SELECT subject_id, occurrences, last_delivery_id FROM alerts"
        " WHERE kind = 'delivery.dead' ORDER BY id",
    )
    events = await rows(
        conn, "SELECT subject_id FROM events WHERE type = 'delivery.dead' ORDER BY id"
    )
    hooked = await rows(
        conn,
        "SELECT payload ->> 'delivery' AS dead FROM deliveries"
        " WHERE kind = 'lifecycle' AND payload ->> 'event' = 'delivery.dead' ORDER BY id",
    )
    return {
        "alerts": [(a["subject_id"], a["occurrences"], a["last_delivery_id"]) for a in alerts],
        "events": [e["subject_id"] for e in events],
        "hooked": [h["dead"] for h in hooked],
    }


async def lock_waiter(conn: Conn) -> int:
    """The backend waiting for a lock in this database, once one is (within 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        found = await rows(
            conn,
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        if found:
            return int(found[0]["pid"])
        assert time.monotonic() < deadline, "no backend waits for a lock"
        await asyncio.sleep(0.02)


async def claimed(conn: Conn) -> dict[str, Claim]:
    """Every due delivery claimed as the worker claims it (the body it would send is built
    from its submission), by delivery id. The deliveries are left `sending`."""
    found = await claim_due(conn, now=utcnow(), limit=1000, lease=timedelta(minutes=5))
    return {claim.id: claim for claim in found}
