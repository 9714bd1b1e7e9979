"""Benchmark of migration 0062 (organization_id in every key, docs/scale.md) on a populated
installation, against a reference measured in the same run: one index build on `id` of
each of the four large tables (what an operator knows as "a reindex of the big tables").

For each round, on a fresh database with every migration but 0062: a seeded organization, then
`--rows` submissions, as many deliveries (one each), delivery attempts and events, and
`VACUUM ANALYZE`; the reference builds and drops an index on `id` of each table; then
0062 is applied as an upgrade applies it. Prints per round the seconds of each and the
ratio.

    .venv/bin/python -m tests.bench.keys --rows 1000000 --rounds 1 \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: the machine's speed drifts, so each figure is the range over `--rounds`.
`--smoke` runs one round of 2,000 rows and fails unless 0062 kept every row and keyed
the submissions' idempotency by organization.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from psycopg import sql

from core.platform.db import Conn, connect
from tests.bench.support import span
from tests.support.databases import create_database, database_url, drop_database
from tests.support.migrations import EarlierRelease
from tests.support.seed import seed_organization

MIGRATION = "0062_distribution_keys.sql"
TABLES = ("submissions", "deliveries", "delivery_attempts", "events")

_FILL = (
    "INSERT INTO submissions (id, organization_id, form_id, status, payload_hash,"
    " idempotency_key) SELECT 'sub_b' || n, %(org)s, %(frm)s, 'accepted', '\\x01', 'key-' || n"
    " FROM generate_series(1, %(rows)s) AS n",
    "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
    " channel, max_attempts, target, status) SELECT 'dlv_b' || n, %(org)s, 'sub_b' || n,"
    " %(rte)s, %(dst)s, 'webhook', 10, '{}', 'sent' FROM generate_series(1, %(rows)s) AS n",
    "INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,"
    " started_at, duration_ms, outcome, http_status) SELECT %(org)s, 'dlv_b' || n, 1,"
    " gen_random_uuid(), now() - interval '1 day', 40, 'sent', 200"
    " FROM generate_series(1, %(rows)s) AS n",
    "INSERT INTO events (organization_id, type, subject_id, created_at)"
    " SELECT %(org)s, 'submission.received', 'sub_b' || n, now() - interval '1 day'"
    " FROM generate_series(1, %(rows)s) AS n",
)


async def _counts(conn: Conn) -> list[int]:
    found = []
    for table in TABLES:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))
        )
        row = await cur.fetchone()
        assert row is not None
        found.append(int(row["n"]))
    return found


async def _reference(conn: Conn) -> float:
    started = time.perf_counter()
    for table in TABLES:
        index = sql.Identifier(f"bench_{table}_id_idx")
        await conn.execute(
            sql.SQL("CREATE INDEX {} ON {} (id)").format(index, sql.Identifier(table))
        )
        await conn.execute(sql.SQL("DROP INDEX {}").format(index))
    return time.perf_counter() - started


async def one_round(url: str, release: EarlierRelease, rows: int) -> tuple[float, float]:
    conn = await connect(url)
    try:
        await release.install(conn)
        seeded = await seed_organization(conn)
        for statement in _FILL:
            await conn.execute(statement, {**seeded, "rows": rows})
        await conn.execute("VACUUM ANALYZE")
        before = await _counts(conn)
        reference = await _reference(conn)
        started = time.perf_counter()
        applied = await release.upgrade(conn)
        upgrade = time.perf_counter() - started
        assert applied == [MIGRATION], applied
        assert await _counts(conn) == before, "0062 lost rows"
        cur = await conn.execute(
            "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint"
            " WHERE conname = 'submissions_form_idempotency_key'"
        )
        key = await cur.fetchone()
        assert key is not None and "organization_id" in key["definition"], key
        return reference, upgrade
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    rows, rounds = (2_000, 1) if args.smoke else (args.rows, args.rounds)
    results: list[tuple[float, float]] = []
    for _ in range(rounds):
        name = create_database(args.admin_url)
        try:
            url = database_url(args.admin_url, name)
            with tempfile.TemporaryDirectory(prefix="postbag-bench-keys-") as folder:
                release = EarlierRelease(Path(folder), MIGRATION)
                results.append(asyncio.run(one_round(url, release, rows)))
        finally:
            drop_database(args.admin_url, name)
    print(f"{rows:,} rows in each of {', '.join(TABLES)}, {rounds} round(s)")
    print(f"  an index on id of each (reference)  {span([r for r, _ in results], ' s')}")
    print(f"  migration 0062                       {span([u for _, u in results], ' s')}")
    print("  ratio (0062 / reference)", span([u / max(r, 1e-9) for r, u in results], "x"))


if __name__ == "__main__":
    main()
