from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import connect
from core.platform.errors import MigrationError
from core.platform.migrate import MIGRATIONS_DIR, discover, migrate
from tests.support.cli import subprocess_env


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
