from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg import sql

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import Conn, connect
from core.platform.errors import MigrationError
from core.platform.migrate import MIGRATIONS_DIR, discover, migrate
from tests.support.builders import make_destination, make_tenant
from tests.support.cli import subprocess_env
from tests.support.migrations import EarlierRelease
from tests.support.records import rows
from tests.support.seed import seed_organization


async def test_migrate__twice_is_a_no_op(empty_db_url: str) -> None:
    conn = await connect(empty_db_url)
    try:
        first = await migrate(conn, destination_types=DESTINATION_TYPES)
        second = await migrate(conn, destination_types=DESTINATION_TYPES)
        cur = await conn.execute("SELECT count(*) AS n FROM schema_migrations")
        row = await cur.fetchone()
    finally:
        await conn.close()
    assert first == [m.name for m in discover()]
    assert second == []
    assert row is not None and row["n"] == len(first)


async def test_migrate__edited_applied_file_is_refused(empty_db_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, directory)
    conn = await connect(empty_db_url)
    try:
        await migrate(conn, directory, destination_types=DESTINATION_TYPES)
        first = sorted(directory.glob("*.sql"))[0]
        first.write_text(first.read_text() + "\n-- edited\n")
        with pytest.raises(MigrationError, match="edited after it was applied"):
            await migrate(conn, directory, destination_types=DESTINATION_TYPES)
    finally:
        await conn.close()


async def test_migrate__two_concurrent_cli_runs_apply_once(empty_db_url: str) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=empty_db_url)

    async def run() -> tuple[int, bytes]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "local.cli",
            "migrate",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return proc.returncode, out

    results = await asyncio.gather(run(), run())
    assert [code for code, _ in results] == [0, 0], results
    outputs = sorted(out.decode() for _, out in results)
    assert outputs[0].startswith("applied 0 migration(s)")
    assert outputs[1].startswith(f"applied {len(discover())} migration(s)")
    conn = await connect(empty_db_url)
    try:
        cur = await conn.execute("SELECT name FROM schema_migrations ORDER BY name")
        names = [row["name"] for row in await cur.fetchall()]
    finally:
        await conn.close()
    assert names == [m.name for m in discover()]


async def test_migrate__0041_removes_the_stream_routes_of_deleted_destinations(
    empty_db_url: str, tmp_path: Path
) -> None:
    release = EarlierRelease(tmp_path, "0041_orphan_stream_routes.sql")
    conn = await connect(empty_db_url)
    try:
        await release.install(conn)
        # As an earlier release left them: a deleted destination whose stream route stayed.
        acme = await make_tenant(conn, plan="pro")
        gone = await make_destination(conn, acme)
        kept = await make_destination(conn, acme)
        await conn.execute(
            "INSERT INTO streams (id, organization_id, name) VALUES ('str_1', %(o)s, 'S')",
            {"o": acme.org},
        )
        for route, destination in (("srt_gone", gone), ("srt_kept", kept)):
            await conn.execute(
                "INSERT INTO stream_routes (id, organization_id, stream_id, destination_id)"
                " VALUES (%(r)s, %(o)s, 'str_1', %(d)s)",
                {"r": route, "o": acme.org, "d": destination},
            )
        await conn.execute(
            "UPDATE destinations SET deleted_at = now() WHERE id = %(d)s", {"d": gone}
        )
        assert await release.upgrade(conn) == ["0041_orphan_stream_routes.sql"]
        live = await rows(conn, "SELECT id FROM stream_routes WHERE deleted_at IS NULL")
    finally:
        await conn.close()
    assert live == [{"id": "srt_kept"}]


async def test_migrate__0062_keys_a_populated_installation_by_organization(
    empty_db_url: str, tmp_path: Path
) -> None:
    release = EarlierRelease(tmp_path, "0062_distribution_keys.sql")
    conn = await connect(empty_db_url)
    try:
        await release.install(conn)
        ids = await seed_organization(conn)
        before = await _row_counts(conn)
        assert await release.upgrade(conn) == ["0062_distribution_keys.sql"]
        after = await _row_counts(conn)
        key = await rows(
            conn,
            "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint"
            " WHERE conname = 'submissions_form_idempotency_key'",
        )
        # The foreign keys added again on the new keys still cascade an erasure.
        await conn.execute("DELETE FROM submissions WHERE id = %(sub)s", ids)
        left = await rows(
            conn,
            "SELECT (SELECT count(*) FROM deliveries WHERE submission_id = %(sub)s) AS deliveries,"
            " (SELECT count(*) FROM attachments WHERE submission_id = %(sub)s) AS attachments,"
            " (SELECT count(*) FROM delivery_attempts WHERE delivery_id = %(dlv)s) AS attempts",
            **ids,
        )
    finally:
        await conn.close()
    assert after == before
    assert key == [{"definition": "UNIQUE (idempotency_key, form_id, organization_id)"}]
    assert left == [{"deliveries": 0, "attachments": 0, "attempts": 0}]


async def _row_counts(conn: Conn) -> dict[str, int]:
    tables = await rows(
        conn,
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        " AND relkind IN ('r', 'p') AND NOT relispartition AND relname <> 'schema_migrations'",
    )
    counts = {}
    for table in tables:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table["relname"]))
        )
        found = await cur.fetchone()
        assert found is not None
        counts[table["relname"]] = found["n"]
    return counts


async def test_migrate__0065_moves_due_implicit_ham_into_its_queue(
    empty_db_url: str, tmp_path: Path
) -> None:
    release = EarlierRelease(tmp_path, "0065_ham_queue.sql")
    conn = await connect(empty_db_url)
    try:
        await release.install(conn)
        tenant = await make_tenant(conn, plan="pro")
        await conn.execute(
            "INSERT INTO forms (id, organization_id, name) VALUES ('frm_1', %(o)s, 'F')",
            {"o": tenant.org},
        )
        for sub, due in (("sub_due", "2026-12-08T10:00:00Z"), ("sub_done", None)):
            await conn.execute(
                'INSERT INTO submissions (id, organization_id, form_id, status, "values",'
                " payload_hash, ham_due_at) VALUES (%(s)s, %(o)s, 'frm_1', 'accepted', '{}',"
                " '\\x00', %(due)s)",
                {"s": sub, "o": tenant.org, "due": due},
            )
        assert await release.upgrade(conn) == ["0065_ham_queue.sql"]
        queued = await rows(conn, "SELECT submission_id, organization_id, due_at FROM ham_due")
        column = await rows(
            conn,
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'submissions' AND column_name = 'ham_due_at'",
        )
    finally:
        await conn.close()
    due = [(q["submission_id"], q["organization_id"], q["due_at"].isoformat()) for q in queued]
    assert due == [("sub_due", tenant.org, "2026-12-08T10:00:00+00:00")]
    assert column == []
