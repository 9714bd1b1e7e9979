"""The files pass deletes stored objects due through the storage interface: a failure is
retried on the next pass, and at the cap the object is stuck (an alert, `/health`)."""

from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.health import check_health
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.builders import make_tenant
from tests.support.records import rows
from tests.support.storage import FlakyStorage, stored_object


async def test_retention__storage_failure_retried_next_pass_then_stuck_at_the_cap(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    org = tenant.org
    flaky = await stored_object(conn, org, created_ago=timedelta(minutes=5), due=True)
    now = utcnow()
    storage = FlakyStorage(failures=1)
    stats = await run_retention(services, now=now, budget=10, storage=storage)
    assert stats["delete_failures"] == 1 and stats.get("files_deleted", 0) == 0
    [row] = await rows(conn, "SELECT delete_attempts, last_error, deleted_at FROM stored_objects")
    assert row["delete_attempts"] == 1 and "ServiceUnavailable" in row["last_error"]
    assert row["deleted_at"] is None
    later = now + timedelta(minutes=1)
    stats = await run_retention(services, now=later, budget=10, storage=storage)
    assert stats["files_deleted"] == 1 and storage.deleted == [flaky]
    [row] = await rows(conn, "SELECT deleted_at FROM stored_objects")
    assert row["deleted_at"] == later

    stuck = await stored_object(conn, org, created_ago=timedelta(minutes=5), due=True)
    await conn.execute(
        "UPDATE stored_objects SET delete_attempts = 9 WHERE storage_key = %(k)s", {"k": stuck}
    )
    failing = FlakyStorage(failures=100)
    stats = await run_retention(services, now=later, budget=10, storage=failing)
    assert stats["delete_failures"] == 1
    health = await check_health(services.db, now=later)
    assert health.stuck_file_deletions == 1 and health.healthy
    assert health.as_dict()["stuck_file_deletions"] == 1
    alerts = await rows(conn, "SELECT kind, organization_id, status FROM alerts")
    assert alerts == [{"kind": "storage.stuck", "organization_id": org, "status": "open"}]
    # At the cap it is no longer tried.
    stats = await run_retention(
        services, now=later + timedelta(minutes=5), budget=10, storage=failing
    )
    assert stats.get("delete_failures", 0) == 0 and failing.failures == 99
