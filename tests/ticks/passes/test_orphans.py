"""The orphans pass schedules the stored objects no attachment refers to, once an hour old,
for deletion; the files pass after it deletes them in the same tick."""

from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.builders import make_tenant
from tests.support.records import rows
from tests.support.storage import FlakyStorage, stored_object


async def test_retention__orphans_older_than_an_hour_are_deleted(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    org = tenant.org
    old = await stored_object(conn, org, created_ago=timedelta(hours=2), due=False)
    young = await stored_object(conn, org, created_ago=timedelta(minutes=10), due=False)
    storage = FlakyStorage(failures=0)
    stats = await run_retention(services, now=utcnow(), budget=10, storage=storage)
    assert stats["orphans"] == 1 and storage.deleted == [old]
    [row] = await rows(
        conn, "SELECT deleted_at FROM stored_objects WHERE storage_key = %(k)s", k=young
    )
    assert row["deleted_at"] is None
