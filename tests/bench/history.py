"""Benchmark of history retention: a week of delivery attempts leaving by DROP of its weekly
partition (what the history pass does since migration 0061) against the same rows leaving
by the batched DELETE the pass used before (the reference, measured in the same run: it
is what still runs on the legacy partition an upgrade leaves).

For each round, on a fresh database: `--rows` attempts of one organization dated in the
first weekly partition and as many dated before it (in the legacy partition), then each
removed through the pass's own statements: the legacy rows by `prune_history_leftovers`
a batch of 5,000 at a time until none is left, the week by `drop_history_partition`.
Prints per way: seconds, WAL written (bytes between `pg_current_wal_lsn()` readings) and
the table's size after `VACUUM` (the bloat a delete leaves); then the ratios.

    .venv/bin/python -m tests.bench.history --rows 1000000 --rounds 3 \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: the machine's speed drifts, so each figure is the range over `--rounds`.
`--smoke` runs one round of 5,000 rows and fails unless both ways removed every row.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from core.platform.db import Conn, connect
from core.platform.queries import queries
from tests.bench.support import Databases, span
from tests.support.seed import seed_organization

BATCH = 5_000


@dataclass(frozen=True, slots=True)
class Removal:
    seconds: float
    wal_bytes: int
    size_after: int


async def _fill(conn: Conn, org: str, delivery: str, start: object, rows: int) -> None:
    await conn.execute(
        "INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,"
        " started_at, duration_ms, outcome, http_status)"
        " SELECT %(org)s, %(dlv)s, 1 + n %% 10, gen_random_uuid(),"
        " %(start)s + (n %% 500000) * interval '1 second', 40, 'failed', 500"
        " FROM generate_series(1, %(rows)s) AS n",
        {"org": org, "dlv": delivery, "start": start, "rows": rows},
    )


async def _wal(conn: Conn) -> str:
    cur = await conn.execute("SELECT pg_current_wal_lsn()::text AS lsn")
    row = await cur.fetchone()
    assert row is not None
    return str(row["lsn"])


async def _measure(conn: Conn, table: str, remove: Callable[[], Awaitable[None]]) -> Removal:
    start_lsn = await _wal(conn)
    started = time.perf_counter()
    await remove()
    seconds = time.perf_counter() - started
    cur = await conn.execute(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %(lsn)s::pg_lsn)::bigint AS bytes",
        {"lsn": start_lsn},
    )
    wal = await cur.fetchone()
    size = 0
    cur = await conn.execute("SELECT to_regclass(%(t)s) IS NOT NULL AS here", {"t": table})
    here = await cur.fetchone()
    if here and here["here"]:
        await conn.execute(f"VACUUM {table}")  # a table name of this module, not input
        cur = await conn.execute("SELECT pg_total_relation_size(%(t)s) AS size", {"t": table})
        sized = await cur.fetchone()
        size = int(sized["size"]) if sized else 0
    return Removal(seconds, int(wal["bytes"]) if wal else 0, size)


async def _prune_all(conn: Conn, before: object) -> None:
    while True:
        cur = await conn.execute(
            queries["prune_history_leftovers"],
            {"parent": "delivery_attempts", "before": before, "limit": BATCH},
        )
        row = await cur.fetchone()
        if not row or row["deleted"] < BATCH:
            return


async def _drop(conn: Conn, name: str) -> None:
    await conn.execute(queries["drop_history_partition"], {"name": name})


async def one_round(url: str, rows: int) -> tuple[Removal, Removal]:
    conn = await connect(url)
    try:
        seeded = await seed_organization(conn)
        cur = await conn.execute(
            "SELECT name, range_start FROM history_partitions"
            " WHERE parent = 'delivery_attempts' AND range_start > '-infinity'"
            " ORDER BY range_start LIMIT 1"
        )
        week = await cur.fetchone()
        assert week is not None
        await _fill(conn, seeded["org"], seeded["dlv"], week["range_start"], rows)
        await _fill(
            conn, seeded["org"], seeded["dlv"], week["range_start"] - timedelta(days=8), rows
        )
        await conn.execute("VACUUM ANALYZE delivery_attempts")
        name, start = str(week["name"]), week["range_start"]
        deleted = await _measure(conn, "delivery_attempts_legacy", lambda: _prune_all(conn, start))
        dropped = await _measure(conn, name, lambda: _drop(conn, name))
        cur = await conn.execute(
            "SELECT count(*) AS n FROM delivery_attempts WHERE started_at < %(end)s",
            {"end": week["range_start"] + timedelta(days=7)},
        )
        left = await cur.fetchone()
        assert left is not None and left["n"] == 0, f"{left} rows left"
        return deleted, dropped
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    rows, rounds = (5_000, 1) if args.smoke else (args.rows, args.rounds)
    results: list[tuple[Removal, Removal]] = []
    with Databases(args.admin_url) as databases:
        for _ in range(rounds):
            results.append(asyncio.run(one_round(databases.fresh(), rows)))
    print(f"{rows:,} delivery attempts of one week, {rounds} round(s)")
    for label, index in (("DELETE in batches (before)", 0), ("DROP of the week (after)", 1)):
        ways = [result[index] for result in results]
        print(
            f"  {label:28} {span([w.seconds for w in ways], ' s', digits=3)}"
            f"  WAL {span([w.wal_bytes for w in ways], ' MB', scale=1e6, digits=3)}"
            f"  size after VACUUM {span([w.size_after for w in ways], ' MB', scale=1e6, digits=3)}"
        )
    print(
        "  time ratio (drop / delete)",
        span([d.seconds / max(b.seconds, 1e-9) for b, d in results], "x", digits=3),
        " WAL ratio",
        span([d.wal_bytes / max(b.wal_bytes, 1) for b, d in results], "x", digits=3),
    )


if __name__ == "__main__":
    main()
