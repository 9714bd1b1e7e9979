"""A real streaming standby as the read replica: what it has replayed is what the lists show,
its lag is answered and shown while replay is paused, and it refuses every write. The
primary and the standby are throwaway clusters of their own (`tests/support/standby.py`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.http.access import WROTE_COOKIE
from core.http.dashboard.inbox import LAG_NOTICE_SECONDS
from core.http.v1.shared import REPLICA_LAG_HEADER
from core.platform.db import LAG_MEASURED_EVERY, connect
from core.platform.migrate import migrate
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import Tenant, make_form, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.settings import built_services
from tests.support.standby import Cluster, primary_and_standby, replayed
from tests.support.submit import submit_client

pytest.importorskip(
    "pgserver", reason="the standby runs the embedded PostgreSQL's binaries (pip install .[dev])"
)

NOTICE = "seconds ago (read replica)"


@pytest.fixture
def clusters(pg_home: Path) -> Iterator[tuple[Cluster, Cluster]]:
    with primary_and_standby(pg_home) as pair:
        yield pair


@pytest.fixture
async def tenant_form(clusters: tuple[Cluster, Cluster]) -> tuple[Tenant, str]:
    primary, _ = clusters
    conn = await connect(primary.url)
    try:
        await migrate(conn, destination_types=DESTINATION_TYPES)
        tenant = await make_tenant(conn, plan="pro")
        form = await make_form(conn, tenant)
    finally:
        await conn.close()
    return tenant, form


@pytest.fixture
async def served(
    clusters: tuple[Cluster, Cluster], tenant_form: tuple[Tenant, str], tmp_path: Path
) -> AsyncIterator[Services]:
    primary, standby = clusters
    async with built_services(primary.url, tmp_path, read_database_url=standby.url) as built:
        yield built


async def _post(services: Services, form: str, name: str) -> str:
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", json={"name": name}, headers={"Accept": "application/json"}
        )
    assert response.status_code == 201, response.text
    receipt: str = response.json()["receipt"]
    return receipt


def _standby(standby: Cluster, statement: str) -> None:
    with psycopg.connect(standby.url, autocommit=True) as conn:
        conn.execute(statement)


@pytest.mark.slow
async def test_standby__lists_show_what_it_replayed_and_its_lag_while_paused(
    served: Services, clusters: tuple[Cluster, Cluster], tenant_form: tuple[Tenant, str]
) -> None:
    primary, standby = clusters
    tenant, form = tenant_form
    first = await _post(served, form, "Ada")
    replayed(primary, standby)
    async with api_client(served, tenant.key) as api, dashboard_client(served) as browser:
        listed = await api.get("/v1/submissions")
        assert listed.status_code == 200, listed.text
        assert [row["id"] for row in listed.json()["data"]] == [first]
        assert float(listed.headers[REPLICA_LAG_HEADER]) < LAG_NOTICE_SECONDS

        csrf = await sign_in(browser, tenant.key)
        _standby(standby, "SELECT pg_wal_replay_pause()")
        paused_at = time.monotonic()
        second = await _post(served, form, "Grace")
        one = await api.get(f"/v1/submissions/{second}")  # the primary's
        assert one.status_code == 200, one.text
        assert REPLICA_LAG_HEADER not in one.headers
        # The lag counts from the last change the standby applied, before the pause.
        await asyncio.sleep(LAG_NOTICE_SECONDS + 1 - (time.monotonic() - paused_at))

        stale = await api.get("/v1/submissions")
        assert [row["id"] for row in stale.json()["data"]] == [first]
        assert float(stale.headers[REPLICA_LAG_HEADER]) > LAG_NOTICE_SECONDS
        browser.cookies.delete(WROTE_COOKIE)
        inbox = await browser.get("/app")
        assert first in inbox.text and second not in inbox.text
        assert NOTICE in inbox.text

        # The browser's own change sends its next page to the primary.
        marked = await browser.post(f"/app/submissions/{first}/spam", data={"csrf": csrf})
        assert marked.status_code == 303, marked.text
        fresh = await browser.get("/app")
        assert second in fresh.text and NOTICE not in fresh.text

        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            async with served.db.reading(tenant.scope) as conn:
                await conn.execute("UPDATE forms SET name = 'Ada' WHERE id = %(f)s", {"f": form})
        # The standby itself refuses, not only the read-only transaction Postbag asks for.
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            _standby(standby, "CREATE TABLE written (id int)")

        _standby(standby, "SELECT pg_wal_replay_resume()")
        replayed(primary, standby)
        await asyncio.sleep(LAG_MEASURED_EVERY)
        caught_up = await api.get("/v1/submissions")
        assert [row["id"] for row in caught_up.json()["data"]] == [second, first]
        assert float(caught_up.headers[REPLICA_LAG_HEADER]) < LAG_NOTICE_SECONDS
        browser.cookies.delete(WROTE_COOKIE)
        again = await browser.get("/app")
        assert second in again.text and NOTICE not in again.text
