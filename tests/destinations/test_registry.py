"""The registry is the database's list of destination types: migrate records it, and the
database refuses any type the code does not know."""

from __future__ import annotations

import psycopg
import pytest

from core.destinations.registry import ADAPTERS, DESTINATION_TYPES
from core.platform.db import Conn
from core.platform.migrate import migrate
from tests.support.builders import make_tenant


async def test_registry__migrate_records_every_type_with_its_attempt_limit(conn: Conn) -> None:
    await conn.execute("UPDATE destination_types SET max_attempts = 1")
    await migrate(conn, destination_types=DESTINATION_TYPES)
    cur = await conn.execute("SELECT name, max_attempts FROM destination_types")
    recorded = {row["name"]: row["max_attempts"] for row in await cur.fetchall()}
    assert recorded == {name: adapter.max_attempts for name, adapter in ADAPTERS.items()}


async def test_registry__database_refuses_a_type_the_code_does_not_know(conn: Conn) -> None:
    tenant = await make_tenant(conn)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        await conn.execute(
            "INSERT INTO destinations (id, organization_id, type, name, config)"
            " VALUES ('dst_fax', %(org)s, 'fax', 'Fax', '{}')",
            {"org": tenant.org},
        )
