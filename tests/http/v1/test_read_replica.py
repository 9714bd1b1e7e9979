"""A read replica (`POSTBAG_READ_DATABASE_URL`) serves lists, searches, exports and counts;
the primary everything a decision or a change reads, and a browser's pages right after its
own change. The replica here is a copy of the test's database taken before the changes,
reached read-only: a replica that never catches up, so every read shows where it went. A
real streaming standby, its replay paused and resumed, is `test_read_replica_standby.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from core.http.access import WROTE_COOKIE
from core.http.v1.shared import REPLICA_LAG_HEADER, replica_lag_headers
from core.platform.db import ReplicaLag, connect
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import Tenant, make_form, make_submission, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.databases import create_database, database_url, drop_database
from tests.support.settings import built_services

READ_ONLY = "-c default_transaction_read_only=on"


@pytest.fixture
async def seeded(db_url: str) -> tuple[Tenant, str, str]:
    """An organization with a form and one submission, written before the copy is taken."""
    conn = await connect(db_url)
    try:
        tenant = await make_tenant(conn, plan="pro")
        form = await make_form(conn, tenant)
        old = await make_submission(conn, tenant, form, {"name": "Old"})
    finally:
        await conn.close()
    return tenant, form, old


@pytest.fixture
def replica_url(admin_url: str, db_url: str, seeded: tuple[Tenant, str, str]) -> Iterator[str]:
    name = create_database(admin_url, template=str(conninfo_to_dict(db_url)["dbname"]))
    yield make_conninfo(database_url(admin_url, name), options=READ_ONLY)
    drop_database(admin_url, name)


@pytest.fixture
async def served(db_url: str, replica_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    async with built_services(db_url, tmp_path, read_database_url=replica_url) as built:
        yield built


async def test_read_replica__lists_read_it_and_a_single_submission_reads_the_primary(
    served: Services, seeded: tuple[Tenant, str, str], db_url: str
) -> None:
    tenant, form, old = seeded
    conn = await connect(db_url)
    try:
        new = await make_submission(conn, tenant, form, {"name": "New"})
    finally:
        await conn.close()
    async with api_client(served, tenant.key) as client:
        listed = await client.get("/v1/submissions")
        assert listed.status_code == 200, listed.text
        # The replica has not seen the new one yet; the receipt is read from the primary.
        assert [row["id"] for row in listed.json()["data"]] == [old]
        # A server that is no standby is behind nothing.
        assert listed.headers[REPLICA_LAG_HEADER] == "0.0"
        one = await client.get(f"/v1/submissions/{new}")
        assert one.status_code == 200, one.text
        assert REPLICA_LAG_HEADER not in one.headers
        for path in ("/v1/usage", "/v1/events", f"/v1/submissions/export.csv?form={form}"):
            answer = await client.get(path)
            assert answer.status_code == 200, answer.text
            assert answer.headers[REPLICA_LAG_HEADER] == "0.0", path


async def test_read_replica__without_one_no_answer_names_a_lag(
    services: Services, conn: psycopg.AsyncConnection[dict[str, object]]
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    await make_submission(conn, tenant, form, {"name": "Ada"})
    async with api_client(services, tenant.key) as client:
        for path in ("/v1/submissions", "/v1/usage", "/v1/events"):
            answer = await client.get(path)
            assert answer.status_code == 200, answer.text
            assert REPLICA_LAG_HEADER not in answer.headers, path


def test_read_replica__a_lag_the_replica_does_not_report_is_unknown() -> None:
    assert replica_lag_headers(ReplicaLag(None)) == {REPLICA_LAG_HEADER: "unknown"}
    assert replica_lag_headers(ReplicaLag(2.449)) == {REPLICA_LAG_HEADER: "2.4"}
    assert replica_lag_headers(None) == {}


async def test_read_replica__a_write_routed_to_it_fails(
    served: Services, seeded: tuple[Tenant, str, str]
) -> None:
    tenant, form, _ = seeded
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        async with served.db.reading(tenant.scope) as conn:
            await conn.execute("UPDATE forms SET name = 'Changed' WHERE id = %(f)s", {"f": form})


async def test_read_replica__reads_are_read_only_on_the_primary_too(
    services: Services, conn: psycopg.AsyncConnection[dict[str, object]]
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        async with services.db.reading(tenant.scope) as scoped:
            await scoped.execute("UPDATE forms SET name = 'Changed' WHERE id = %(f)s", {"f": form})


async def test_read_replica__the_inbox_after_the_owners_change_reads_the_primary(
    served: Services, seeded: tuple[Tenant, str, str], db_url: str
) -> None:
    tenant, form, old = seeded
    conn = await connect(db_url)
    try:
        new = await make_submission(conn, tenant, form, {"name": "Newer"})
    finally:
        await conn.close()
    async with dashboard_client(served) as client:
        csrf = await sign_in(client, tenant.key)
        client.cookies.delete(WROTE_COOKIE)
        stale = await client.get("/app")
        assert old in stale.text and new not in stale.text
        marked = await client.post(f"/app/submissions/{old}/spam", data={"csrf": csrf})
        assert marked.status_code == 303, marked.text
        assert WROTE_COOKIE in marked.headers.get("set-cookie", "")
        fresh = await client.get("/app")
        assert old in fresh.text and new in fresh.text
        # Once the browser drops the cookie (after its seconds), the replica again.
        client.cookies.delete(WROTE_COOKIE)
        later = await client.get("/app")
        assert new not in later.text
