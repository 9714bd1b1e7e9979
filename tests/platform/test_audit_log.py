"""The audit trail in the database: append-only for the application role (and, by trigger,
for the owner), one chain per organization under concurrent writers, retention by whole
prefixes, and `postbag audit verify` naming the first row edited behind the app's back."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from core.owner.audit import AuditEntry, record, verify_chain
from core.platform.db import Conn, connect, enter_scope
from core.platform.scope import OrgScope
from tests.support.builders import make_tenant
from tests.support.cli import postbag, subprocess_env
from tests.support.records import rows


def _entry(action: str = "form.updated", subject: str = "frm_x") -> AuditEntry:
    return AuditEntry("key", "key_test", "test", action, subject, "api", "192.0.2.1", "ua/1")


async def _append(db_url: str, scope: OrgScope, count: int) -> None:
    conn = await connect(db_url)
    try:
        for n in range(count):
            async with conn.transaction():
                await enter_scope(conn, scope)
                await record(conn, scope, _entry(subject=f"frm_{n}"))
    finally:
        await conn.close()


async def test_the_application_role_can_neither_change_nor_remove_a_row(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 1)
    app = await connect(db_url)
    try:
        for statement in (
            "UPDATE audit_log SET action = 'form.created'",
            "DELETE FROM audit_log",
            "TRUNCATE audit_log",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with app.transaction():
                    await enter_scope(app, tenant.scope)
                    await app.execute(statement)
    finally:
        await app.close()
    # The owner role the operator's commands use is refused by the trigger.
    for statement in ("UPDATE audit_log SET subject = 'x'", "DELETE FROM audit_log"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)
    assert [row["action"] for row in await rows(conn, "SELECT action FROM audit_log")] == [
        "form.updated"
    ]


async def test_concurrent_writers_on_their_own_connections_never_fork_the_chain(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    other = await make_tenant(conn, "Other")
    writers = [_append(db_url, tenant.scope, 5) for _ in range(8)]
    await asyncio.gather(*writers, _append(db_url, other.scope, 5))
    seqs = await rows(
        conn,
        "SELECT seq FROM audit_log WHERE organization_id = %(org)s ORDER BY seq",
        org=tenant.org,
    )
    assert [row["seq"] for row in seqs] == list(range(1, 41))
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id) == (40, None)
    assert (await verify_chain(conn, other.org)).rows == 5


async def test_retention_forgets_a_whole_old_prefix_and_the_rest_still_verifies(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 5)
    [third] = await rows(conn, "SELECT at FROM audit_log WHERE seq = 3")
    [gone] = await rows(
        conn,
        "SELECT audit_forget_before(%(org)s, %(at)s + interval '1 microsecond') AS n",
        org=tenant.org,
        at=third["at"],
    )
    assert gone["n"] == 3
    assert [r["seq"] for r in await rows(conn, "SELECT seq FROM audit_log ORDER BY seq")] == [4, 5]
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id) == (2, None)
    await _append(db_url, tenant.scope, 1)  # the chain goes on from its anchor
    assert (await verify_chain(conn, tenant.org)).rows == 3
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await conn.execute("DELETE FROM audit_log WHERE seq = 4")


async def test_verify_names_the_first_row_edited_or_removed_behind_the_apps_back(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 4)
    ids = {r["seq"]: r["id"] for r in await rows(conn, "SELECT seq, id FROM audit_log")}
    # A superuser skips the append-only trigger (replica mode).
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute("UPDATE audit_log SET ip = '203.0.113.9' WHERE seq = 3")
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id, report.broken_seq) == (2, ids[3], 3)
    assert report.problem == "its hash does not match its content"
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute("DELETE FROM audit_log WHERE seq = 2")
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id, report.problem) == (1, ids[3], "row 2 is missing")


@pytest.mark.slow
async def test_audit_verify_names_the_first_row_edited_with_superuser_sql(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    made = postbag("create-key", tenant.org, "--name", "support", "--role", "viewer", env=env)
    assert made.returncode == 0, made.stderr
    [key] = await rows(conn, "SELECT role FROM api_keys WHERE name = 'support'")
    assert key["role"] == "viewer"
    await _append(db_url, tenant.scope, 3)
    [first] = await rows(conn, "SELECT actor_kind, action, via FROM audit_log WHERE seq = 1")
    assert first == {"actor_kind": "operator", "action": "key.created", "via": "cli"}

    intact = await verify_chain(conn, tenant.org)
    assert (intact.rows, intact.broken_id) == (4, None)

    # A superuser skips the append-only trigger (replica mode) and edits row 3.
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute("UPDATE audit_log SET subject = 'frm_other' WHERE seq = 3")
    [edited] = await rows(conn, "SELECT id FROM audit_log WHERE seq = 3")
    broken = postbag("audit", "verify", "--json", env=env)
    assert broken.returncode == 1
    assert json.loads(broken.stdout) == {
        "organization_id": tenant.org,
        "rows": 2,
        "intact": False,
        "broken_id": edited["id"],
        "broken_seq": 3,
        "problem": "its hash does not match its content",
    }
