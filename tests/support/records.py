"""Reading rows back as the owner: any query, one delivery, a delivery's attempts, the
deliveries as the worker claims them; and a failing audit append, injected."""

from __future__ import annotations

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


async def claimed(conn: Conn) -> dict[str, Claim]:
    """Every due delivery claimed as the worker claims it (the body it would send is built
    from its submission), by delivery id. The deliveries are left `sending`."""
    found = await claim_due(conn, now=utcnow(), limit=1000, lease=timedelta(minutes=5))
    return {claim.id: claim for claim in found}
