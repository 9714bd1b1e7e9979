"""What a worker costs the database while idle behind a transaction pooler (issue 26):
`python -m tests.bench.pooler`.

One worker on a real PgBouncer in transaction mode, idle for 30 s (after its first 3 s),
first polling (no direct URL), then listening on a direct URL; prints the transactions a
second its database committed in each case and their ratio (the reference is the
listening worker, measured in the same run).

Needs an admin URL on TCP (`--admin-url`, by default POSTBAG_TEST_DATABASE_URL) and
pgbouncer; creates and drops its own database. `--smoke`: idle for 2 s (after 1 s)
instead, failing unless the polling worker committed transactions.
"""

from __future__ import annotations

import argparse
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

# Seconds left out while the worker's first passes run, then seconds measured.
MEASURED = (3.0, 30.0)
SMOKE = (1.0, 2.0)


async def _transactions(conn: Conn) -> int:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database"
        " WHERE datname = current_database()"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def _idle_rate(
    conn: Conn, pooled: str, seconds: tuple[float, float], **settings: str
) -> float:
    """Transactions a second on the database while one deliver worker idles."""
    async with built_services(
        pooled, Path(tempfile.mkdtemp()), db_pooler="transaction", **settings
    ) as services:
        worker = Worker(services, name="worker@bench", ticks=["deliver"])
        task = asyncio.create_task(worker.run())
        settle, idle = seconds
        await asyncio.sleep(settle)  # its first passes are behind it
        before, started = await _transactions(conn), time.monotonic()
        await asyncio.sleep(idle)
        # Each reading is a transaction of its own: leave out the second one.
        after, ended = await _transactions(conn) - 1, time.monotonic()
        worker.stop.set()
        await task
    return (after - before) / (ended - started)


async def main(url: str, pooled: str, seconds: tuple[float, float]) -> None:
    conn = await connect(url)
    try:
        await migrate(conn, destination_types=DESTINATION_TYPES)
        polling = await _idle_rate(conn, pooled, seconds)
        listening = await _idle_rate(conn, pooled, seconds, direct_database_url=url)
    finally:
        await close_shared_client()
        await conn.close()
    print(f"idle worker, polling every 1.5 s: {polling:.2f} transactions/s")
    print(f"idle worker, listening:           {listening:.2f} transactions/s")
    # A short idle (--smoke) may see no transaction of the listening worker.
    print(f"ratio: {polling / listening:.1f}x" if listening else "ratio: none listening")
    assert polling > 0, "the polling worker committed no transaction"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("POSTBAG_TEST_DATABASE_URL"))
    parser.add_argument("--smoke", action="store_true", help=f"idle {SMOKE[1]:g} s")
    args = parser.parse_args()
    if not args.admin_url:
        parser.error("--admin-url or POSTBAG_TEST_DATABASE_URL is required")
    name = create_database(args.admin_url)
    try:
        with pgbouncer(args.admin_url) as port:
            db = database_url(args.admin_url, name)
            asyncio.run(main(db, through(db, port), SMOKE if args.smoke else MEASURED))
    finally:
        drop_database(args.admin_url, name)
