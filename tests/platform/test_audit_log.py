"""The audit trail in the database: append-only for the application role (and, by trigger,
for the owner, whatever it sets), one chain per organization under concurrent writers with
its head kept beside it, retention by whole prefixes, and `postbag audit verify` naming the
first row edited behind the app's back and the newest rows removed behind the trigger's."""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from core.owner.audit import AuditEntry, chain_hash, record, verify_chain
from core.platform.db import Conn, connect, enter_scope
from core.platform.scope import OrgScope
from tests.support.builders import make_tenant
from tests.support.cli import postbag, subprocess_env
from tests.support.records import rows

_INSERT = """INSERT INTO audit_log (id, organization_id, seq, at, actor_kind, actor_id, actor_name,
                                action, subject, via, ip, user_agent, prev_hash, hash)
             VALUES (%(id)s, %(organization_id)s, %(seq)s, %(at)s, %(actor_kind)s,
                     %(actor_id)s, %(actor_name)s, %(action)s, %(subject)s, %(via)s, %(ip)s,
                     %(user_agent)s, %(prev_hash)s, %(hash)s)"""


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
    [head] = await rows(conn, "SELECT hash FROM audit_log WHERE seq = 4")
    broken = postbag("audit", "verify", "--json", env=env)
    assert broken.returncode == 1
    assert json.loads(broken.stdout) == {
        "organization_id": tenant.org,
        "rows": 2,
        "intact": False,
        "broken_id": edited["id"],
        "broken_seq": 3,
        "problem": "its hash does not match its content",
        "head_seq": 4,
        "head_hash": head["hash"],
    }


async def test_no_setting_lets_the_tables_owner_remove_the_newest_rows(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 4)
    # The old escape hatch, as the superuser the operator's commands may connect as: the
    # setting retention's function used to set, for the session or the transaction.
    for is_local in (False, True):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            async with conn.transaction():
                await conn.execute(
                    "SELECT set_config('postbag.audit_forget', %(org)s, %(local)s)",
                    {"org": tenant.org, "local": is_local},
                )
                await conn.execute("DELETE FROM audit_log WHERE seq >= 3")
    # Nor does moving the anchor past the chain, or the head back, open a way.
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_anchors"):
        await conn.execute(
            "INSERT INTO audit_anchors (organization_id, seq, hash, forgotten_at)"
            " VALUES (%(org)s, 99, repeat('f', 64), now())",
            {"org": tenant.org},
        )
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="audit_heads"):
        await conn.execute(
            "UPDATE audit_heads SET (seq, hash) = (SELECT seq, hash FROM audit_log WHERE seq = 2)"
        )
    # The audit tables' owner as a role of its own, no superuser (as an application's owner
    # role is), seeing organizations through their row-level security (so none): refused the
    # same (the organization's row is not taken for gone), and replica mode is not a setting
    # it may set.
    owner = sql.Identifier(f"audit_owner_{secrets.token_hex(4)}")
    async with conn.transaction(force_rollback=True):
        await conn.execute(sql.SQL("CREATE ROLE {}").format(owner))
        for table in ("audit_log", "audit_anchors", "audit_heads"):
            await conn.execute(
                sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.Identifier(table), owner)
            )
        await conn.execute(sql.SQL("GRANT SELECT ON organizations TO {}").format(owner))
        await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(owner))
        await conn.execute(
            "SELECT set_config('postbag.audit_forget', %(org)s, true)", {"org": tenant.org}
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            async with conn.transaction():
                await conn.execute("DELETE FROM audit_log WHERE seq >= 3")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
    assert [r["seq"] for r in await rows(conn, "SELECT seq FROM audit_log ORDER BY seq")] == [
        1,
        2,
        3,
        4,
    ]
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.problem, report.head_seq) == (4, None, 4)


@pytest.mark.slow
async def test_audit_verify_names_the_newest_rows_a_superuser_removed_behind_the_trigger(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 5)
    [head] = await rows(conn, "SELECT hash FROM audit_log WHERE seq = 5")
    async with conn.transaction():
        await conn.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only")
        await conn.execute("DELETE FROM audit_log WHERE seq >= 4")
        await conn.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only")
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    broken = postbag("audit", "verify", "--json", env=env)
    assert broken.returncode == 1
    problem = "rows removed from the end: rows 4 to 5 are missing (the head is row 5)"
    assert json.loads(broken.stdout) == {
        "organization_id": tenant.org,
        "rows": 3,
        "intact": False,
        "broken_id": None,
        "broken_seq": 4,
        "problem": problem,
        "head_seq": 5,
        "head_hash": head["hash"],
    }
    said = postbag("audit", "verify", env=env)
    assert said.returncode == 1
    assert said.stdout == f"{tenant.org}  BROKEN at row 4: {problem}; 3 rows before it are intact\n"
    # The application appends after the head, so the gap stays in the chain.
    await _append(db_url, tenant.scope, 1)
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_seq, report.problem) == (3, 6, "rows 4 to 5 are missing")


async def test_verify_names_the_newest_row_rewritten_with_its_hash_recomputed(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 3)
    [last] = await rows(conn, "SELECT * FROM audit_log WHERE seq = 3")
    forged = {**last, "subject": "frm_other"}
    # A superuser skips the triggers (replica mode) and keeps the chain's links whole.
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            "UPDATE audit_log SET subject = %(subject)s, hash = %(hash)s WHERE seq = 3",
            {"subject": "frm_other", "hash": chain_hash(last["prev_hash"], forged)},
        )
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id, report.problem) == (
        3,
        last["id"],
        "its hash is not the chain head's",
    )
    assert report.head_hash == last["hash"]


@pytest.mark.slow
async def test_retention_forgets_prefixes_and_audit_verify_still_says_intact(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 5)
    [third, fifth] = await rows(
        conn, "SELECT at, hash FROM audit_log WHERE seq IN (3, 5) ORDER BY seq"
    )
    forget = "SELECT audit_forget_before(%(org)s, %(before)s) AS n"
    [gone] = await rows(
        conn, forget, org=tenant.org, before=third["at"] + timedelta(microseconds=1)
    )
    assert gone["n"] == 3
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    said = postbag("audit", "verify", "--json", env=env)
    assert said.returncode == 0, said.stdout
    assert json.loads(said.stdout) == {
        "organization_id": tenant.org,
        "rows": 2,
        "intact": True,
        "broken_id": None,
        "broken_seq": None,
        "problem": None,
        "head_seq": 5,
        "head_hash": fifth["hash"],
    }
    # Forgetting every row keeps the head: the chain is intact, empty, and goes on after it.
    [gone] = await rows(conn, forget, org=tenant.org, before=fifth["at"] + timedelta(days=1))
    assert gone["n"] == 2
    emptied = await verify_chain(conn, tenant.org)
    assert (emptied.rows, emptied.problem, emptied.head_seq) == (0, None, 5)
    await _append(db_url, tenant.scope, 1)
    said = postbag("audit", "verify", env=env)
    assert (said.returncode, said.stdout) == (0, f"{tenant.org}  intact  1 rows\n")


async def test_concurrent_writers_keep_the_head_on_the_newest_row_as_verify_reads(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    writing = asyncio.gather(*(_append(db_url, tenant.scope, 5) for _ in range(6)))
    reports = []
    reader = await connect(db_url)
    try:
        while not writing.done():
            reports.append(await verify_chain(reader, tenant.org))
    finally:
        await reader.close()
    await writing
    # Read while the chain grew, each report saw the chain and its head at one moment.
    assert len(reports) > 1
    assert [r.problem for r in reports if r.problem] == []
    [newest] = await rows(conn, "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
    heads = await rows(
        conn, "SELECT seq, hash FROM audit_heads WHERE organization_id = %(org)s", org=tenant.org
    )
    assert heads == [newest]
    assert newest["seq"] == 30


async def test_deleting_an_organization_takes_its_chain_anchor_and_head(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 3)
    await conn.execute(
        "SELECT audit_forget_before(%(org)s, (SELECT at FROM audit_log WHERE seq = 2))",
        {"org": tenant.org},
    )
    await conn.execute("DELETE FROM organizations WHERE id = %(org)s", {"org": tenant.org})
    left = await rows(
        conn,
        "SELECT (SELECT count(*) FROM audit_log) + (SELECT count(*) FROM audit_anchors)"
        " + (SELECT count(*) FROM audit_heads) AS n",
    )
    assert left == [{"n": 0}]


async def test_verify_names_a_row_appended_behind_the_insert_trigger(
    db_url: str, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    await _append(db_url, tenant.scope, 2)
    [last] = await rows(conn, "SELECT * FROM audit_log WHERE seq = 2")
    forged = {**last, "id": "aud_forged", "seq": 3, "prev_hash": last["hash"]}
    forged["hash"] = chain_hash(last["hash"], forged)
    # Out of place, the insert trigger refuses it; a superuser in replica mode skips it.
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="head"):
        await conn.execute(_INSERT, {**forged, "seq": 4})
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(_INSERT, forged)
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id, report.problem) == (
        2,
        "aud_forged",
        "it is past the chain's head (row 2)",
    )
