"""What a worker costs the database while idle behind a transaction pooler (issue 26):
`python -m tests.bench.pooler`.

One worker on a real PgBouncer in transaction mode, idle for 30 s, first polling (no
direct URL), then listening on a direct URL; prints the transactions a second its
database committed in each case and their ratio (the reference is the listening worker,
measured in the same run).

Needs POSTBAG_TEST_DATABASE_URL (an admin URL on TCP) and pgbouncer; creates and drops its
own database.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from core.destinations.http import close_shared_client
from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import Conn, connect
from core.platform.migrate import migrate
from core.ticks.worker import Worker
from tests.support.databases import create_database, database_url, drop_database
from tests.support.pooler import pgbouncer, through
from tests.support.settings import built_services

IDLE_SECONDS = 30.0


async def _transactions(conn: Conn) -> int:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database"
        " WHERE datname = current_database()"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def _idle_rate(conn: Conn, pooled: str, **settings: str) -> float:
    """Transactions a second on the database while one deliver worker idles."""
    async with built_services(
        pooled, Path(tempfile.mkdtemp()), db_pooler="transaction", **settings
    ) as services:
        worker = Worker(services, name="worker@bench", ticks=["deliver"])
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(3)  # its first passes are behind it
        before, started = await _transactions(conn), time.monotonic()
        await asyncio.sleep(IDLE_SECONDS)
        # Each reading is a transaction of its own: leave out the second one.
        after, ended = await _transactions(conn) - 1, time.monotonic()
        worker.stop.set()
        await task
    return (after - before) / (ended - started)


async def main(url: str, pooled: str) -> None:
    conn = await connect(url)
    try:
        await migrate(conn, destination_types=DESTINATION_TYPES)
        polling = await _idle_rate(conn, pooled)
        listening = await _idle_rate(conn, pooled, direct_database_url=url)
    finally:
        await close_shared_client()
        await conn.close()
    print(f"idle worker, polling every 1.5 s: {polling:.2f} transactions/s")
    print(f"idle worker, listening:           {listening:.2f} transactions/s")
    print(f"ratio: {polling / listening:.1f}x")


if __name__ == "__main__":
    admin = os.environ["POSTBAG_TEST_DATABASE_URL"]
    name = create_database(admin)
    try:
        with pgbouncer(admin) as port:
            db = database_url(admin, name)
            asyncio.run(main(db, through(db, port)))
    finally:
        drop_database(admin, name)
