"""Benchmark at scale: the current layout (every migration: `submissions`, `events` and
`delivery_attempts` in weekly partitions, 0061_weekly_history.sql and
0067_weekly_submissions.sql) against the layout before it (a database migrated up to 0060
and given the later migrations the code needs, the reference), both holding the same
generated data, measured in the same run.

Loads `--submissions` (10,000,000) submissions with their deliveries, delivery attempts and
events across `--organizations` (200) organizations and `--months` (13) months, generated
in the database (tests/bench/scale_data.py: the shape, and how a table is bulk-loaded with
its indexes and keys built after), into each database. The reference database is migrated
up to 0060 (with NEEDED_BY_THE_CODE) and loaded. The current one is migrated by every
migration, then given a weekly partition of each weekly table for every week of the period
(their empty legacy partitions dropped, as the history pass drops them once nothing in them
is kept), as an installation that has run the partitioned layout for that long has them,
and loaded the same: its submissions land in their weeks. Everything is VACUUMed and
ANALYZEd.

Then, `--rounds` times (3), the layouts alternating sample by sample, through the code's
own functions and statements: the worker's claim (`claim_due`, the worker's batch, rolled
back so that each one claims the same rows), the inbox's first page and a page a year
deep (`list_submissions`, as GET /v1/submissions runs it: read-only, as the application
role), a search (a word 1 in 1,000 submissions hold, in the biggest organization) — each
`--repeat` (5) times, the median kept — the export of its biggest form (`export_fields`
and every page of `export_csv`, once a round), and `--submits` (2,000) submit transactions
(`insert_submission`, its parameters made by the submit path's own plan beforehand) on
`--concurrency` (4) connections. Last, once, the retention pass over the oldest month of
history: the pass as it was before 0061 (a batched DELETE of events and of attempts) on
the reference, `core/ticks/passes/history.py` on the current layout (DROP of the weeks):
its time, the WAL written (the server's, between `pg_current_wal_lsn()` readings: other
work on the server counts too) and the history tables' size after VACUUM.

    .venv/bin/python -m tests.bench.scale --submissions 1000000 --rounds 5 \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: each figure is for this machine; the ratio (current / before) is what holds.
At 10,000,000 each database takes about 48 GB: the run needs about 100 GB of free disk.
`--smoke`: 3,000 submissions of 20 organizations, one round, failing unless both layouts
hold the same rows, answer the same, and the retention removed the same rows.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from core.destinations.registry import DESTINATION_TYPES
from core.intake.checks import decide_status
from core.intake.form import resolve_form
from core.intake.plan import Submitted, insert_params, unused_parts
from core.intake.submit import payload_hash
from core.outbox import store
from core.outbox.passes import WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.ids import new_id
from core.platform.migrate import MIGRATIONS_DIR, migrate
from core.platform.pagination import DEFAULT_LIMIT
from core.platform.queries import execute, queries
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.submissions.export import export_csv, export_fields
from core.submissions.records import list_submissions
from core.ticks.maintenance import PassContext, RetentionOptions
from core.ticks.passes import history
from tests.bench.scale_data import RARE_WORD, Shape, form_id, load_base, load_history, org_id
from tests.support.databases import database_url, drop_database
from tests.support.settings import built_services

# The first migration of the current layout: the reference is migrated up to the one before.
PARTITIONING = "0061_weekly_history.sql"
# Later migrations the reference takes too: the current code's statements, which both
# layouts run, need them (the submit statement counts on usage shards up to 63 and queues
# implicit ham in `ham_due` and keeps idempotency keys in `submission_keys`).
NEEDED_BY_THE_CODE = frozenset(
    {"0064_usage_shards.sql", "0065_ham_queue.sql", "0066_submission_keys.sql"}
)
HISTORY_TABLES = ("events", "delivery_attempts")
# The current layout's tables in weekly partitions.
WEEKLY_TABLES = ("submissions", *HISTORY_TABLES)
# The history pass as it was before 0061 (core/sql/retention.sql then): a batch at a time.
PRUNED_BEFORE = {
    "events": "DELETE FROM events WHERE id IN (SELECT id FROM events"
    " WHERE created_at < %(before)s ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)",
    "delivery_attempts": "DELETE FROM delivery_attempts WHERE id IN (SELECT id"
    " FROM delivery_attempts WHERE started_at < %(before)s ORDER BY started_at"
    " LIMIT %(limit)s FOR UPDATE SKIP LOCKED)",
}
TIME_COLUMNS = {"events": "created_at", "delivery_attempts": "started_at"}


@dataclass
class Layout:
    label: str
    name: str
    url: str
    services: Services


@dataclass(frozen=True, slots=True)
class Removal:
    seconds: float
    wal_bytes: int
    history_bytes: int
    removed: int
    left: int


@dataclass
class Targets:
    """What the reads ask for, the same in both layouts."""

    scope: OrgScope
    form: str
    deep: tuple[datetime, str]
    submit_forms: list[str]


def _admin(admin_url: str, statement: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement.encode())


def _new_name(label: str) -> str:
    return f"postbag_bench_scale_{label}_{uuid.uuid4().hex[:10]}"


async def _scalar(conn: Conn, query: str, params: dict[str, Any] | None = None) -> Any:
    cur = await conn.execute(query.encode(), params or {})
    row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


def _week_start(at: datetime) -> datetime:
    return history.week_start(at)


async def _migrate_before(url: str) -> None:
    """Every migration before PARTITIONING (and NEEDED_BY_THE_CODE), as the test of an
    upgrade builds an older database."""
    with tempfile.TemporaryDirectory() as tmp:
        older = Path(tmp)
        assert (MIGRATIONS_DIR / PARTITIONING).exists()
        for path in MIGRATIONS_DIR.glob("*.sql"):
            if path.name < PARTITIONING or path.name in NEEDED_BY_THE_CODE:
                shutil.copy(path, older / path.name)
        conn = await connect(url)
        try:
            await migrate(conn, older, destination_types=DESTINATION_TYPES)
        finally:
            await conn.close()


async def _weekly(conn: Conn, shape: Shape) -> int:
    """Weeks over the whole period (the empty legacy partitions dropped): the partitions
    of an installation that has run the partitioned layout for longer; how many."""
    for table in WEEKLY_TABLES:
        await conn.execute(queries["drop_history_partition"], {"name": f"{table}_legacy"})
        week = _week_start(shape.start)
        while week <= _week_start(shape.end) + timedelta(weeks=history.WEEKS_AHEAD):
            await conn.execute(queries["add_history_week"], {"parent": table, "week_start": week})
            week += timedelta(weeks=1)
    return int(await _scalar(conn, "SELECT count(*) FROM history_partitions"))


async def _vacuum(url: str) -> None:
    conn = await connect(url)
    try:
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def load(admin_url: str, shape: Shape, timings: dict[str, float], names: list[str]) -> None:
    """The two databases, loaded; their names (before, current) appended to `names` as
    they are made (the caller drops them)."""
    before, current = _new_name("before"), _new_name("current")
    names.append(before)
    _admin(admin_url, f'CREATE DATABASE "{before}"')
    before_url = database_url(admin_url, before)
    started = time.perf_counter()
    await _migrate_before(before_url)
    conn = await connect(before_url)
    try:
        await load_base(conn, shape)
    finally:
        await conn.close()
    await _vacuum(before_url)
    timings["submissions, deliveries (before)"] = time.perf_counter() - started
    started = time.perf_counter()
    names.append(current)
    _admin(admin_url, f'CREATE DATABASE "{current}"')
    current_url = database_url(admin_url, current)
    conn = await connect(current_url)
    try:
        await migrate(conn, destination_types=DESTINATION_TYPES)
        partitions = await _weekly(conn, shape)
        await load_base(conn, shape)
    finally:
        await conn.close()
    await _vacuum(current_url)
    timings[f"submissions, deliveries (current, {partitions} weekly partitions)"] = (
        time.perf_counter() - started
    )
    for label, url in (("before", before_url), ("current", current_url)):
        started = time.perf_counter()
        conn = await connect(url)
        try:
            await load_history(conn)
        finally:
            await conn.close()
        await _vacuum(url)
        timings[f"history ({label})"] = time.perf_counter() - started


async def targets(conn: Conn, shape: Shape) -> Targets:
    """The biggest organization, its biggest form, the cursor of a page about a year deep."""
    org = org_id(1)
    cur = await conn.execute(
        "SELECT received_at, id FROM submissions WHERE organization_id = %(org)s"
        " AND received_at < %(at)s ORDER BY received_at DESC, id DESC LIMIT 1",
        {"org": org, "at": shape.start + timedelta(days=30)},
    )
    deep = await cur.fetchone()
    assert deep is not None, "no submission a year deep"
    return Targets(
        OrgScope(org),
        form_id(1, 0),
        (deep["received_at"], deep["id"]),
        # The next organizations' biggest forms: the export's form keeps its rows.
        [form_id(org, 0) for org in range(2, min(shape.organizations, 11) + 1)],
    )


# --- what is measured ----------------------------------------------------------------------


async def claim(layout: Layout, _: Targets) -> tuple[float, int]:
    options = WorkerOptions()
    async with layout.services.db.connection() as conn:
        async with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            claims = await store.claim_due(
                conn,
                now=utcnow(),
                limit=min(options.batch, options.concurrency * 4),
                lease=options.lease,
                per_destination=options.per_destination,
            )
            return time.perf_counter() - started, len(claims)


async def _page(
    layout: Layout, goal: Targets, before: tuple[datetime, str] | None, q: str | None
) -> tuple[float, int]:
    started = time.perf_counter()
    async with layout.services.db.reading(goal.scope) as conn:
        page = await list_submissions(
            conn,
            goal.scope,
            now=utcnow(),
            form_id=None,
            status=None,
            since=None,
            before=before,
            limit=DEFAULT_LIMIT + 1,
            q=q,
        )
    return time.perf_counter() - started, len(page)


async def first_page(layout: Layout, goal: Targets) -> tuple[float, int]:
    return await _page(layout, goal, None, None)


async def deep_page(layout: Layout, goal: Targets) -> tuple[float, int]:
    return await _page(layout, goal, goal.deep, None)


async def search(layout: Layout, goal: Targets) -> tuple[float, int]:
    return await _page(layout, goal, None, RARE_WORD)


async def export(layout: Layout, goal: Targets) -> tuple[float, int]:
    started = time.perf_counter()
    now = utcnow()
    async with layout.services.db.scoped(goal.scope) as conn:
        fields = await export_fields(conn, goal.scope, goal.form, now=now)
    lines = 0
    async for text in export_csv(layout.services.db, goal.scope, goal.form, fields, now=now):
        lines += text.count("\n")
    return time.perf_counter() - started, lines - 1


READS: dict[str, Callable[[Layout, Targets], Awaitable[tuple[float, int]]]] = {
    "claim (the worker's batch)": claim,
    "inbox, first page": first_page,
    "inbox, a page a year deep": deep_page,
    f"search ({RARE_WORD!r}, 1 in 1,000)": search,
    "export of the biggest form": export,
}


async def _submit_params(layout: Layout, goal: Targets, count: int) -> list[dict[str, Any]]:
    """`count` submits' parameters, as the submit path plans them (forms read, checks run)."""
    services, now = layout.services, utcnow()
    forms = [
        await resolve_form(services, form, client="198.51.100.7", now=now)
        for form in goal.submit_forms
    ]
    planned = []
    for n in range(count):
        tag = uuid.uuid4().hex
        values = {
            "name": "Ada Lovelace",
            "email": f"ada.{tag[:8]}@example.com",
            "company": "Analytical Engines Ltd",
            "phone": "+44 20 7946 0000",
            "subject": "Quote request",
            "message": "Could you send me a quote for the work described below, with your"
            f" earliest start date? We would need it before the end of March. Ref {tag}.",
            "consent": "yes",
        }
        # Each from its own client: the form's rate limit counts per client.
        form = dataclasses.replace(
            forms[n % len(forms)], client_hash=hashlib.sha256(tag.encode()).digest()
        )
        decision = await decide_status(
            services, form, values, values, origin=None, client=tag, now=now
        )
        submitted = Submitted(
            submission_id=new_id("sub"),
            values=values,
            test=False,
            idempotency_key=None,
            payload_hash=payload_hash(values, []),
            attachments=[],
            origin=None,
            referrer=None,
            accept_language=None,
        )
        planned.append(
            insert_params(
                form,
                decision,
                submitted,
                secret_key=services.settings.require_secret_key(),
                now=now,
            )
        )
    return planned


async def submit(layout: Layout, planned: list[dict[str, Any]], concurrency: int) -> float:
    """Submits per second: `planned` run on `concurrency` connections."""
    waiting = iter(planned)

    async def run() -> None:
        for params in waiting:
            async with layout.services.db.connection() as conn:
                cur = await execute(conn, "insert_submission", params, omit=unused_parts(params))
                row = await cur.fetchone()
            assert row is not None and row["created"], row

    started = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(concurrency)))
    return len(planned) / (time.perf_counter() - started)


# --- retention -----------------------------------------------------------------------------


async def _table_bytes(conn: Conn, table: str) -> int:
    """A table's size with its indexes (a partitioned one's: every partition's)."""
    return int(
        await _scalar(
            conn,
            "SELECT CASE WHEN c.relkind = 'p' THEN (SELECT sum(pg_total_relation_size(relid))"
            " FROM pg_partition_tree(c.oid)) ELSE pg_total_relation_size(c.oid) END"
            " FROM pg_class c WHERE c.oid = %(t)s::regclass",
            {"t": table},
        )
    )


async def _history_bytes(conn: Conn) -> int:
    return sum([await _table_bytes(conn, table) for table in HISTORY_TABLES])


async def _older(conn: Conn, before: datetime) -> int:
    total = 0
    for table, column in TIME_COLUMNS.items():
        total += int(
            await _scalar(
                conn,
                f"SELECT count(*) FROM {table} WHERE {column} < %(before)s",  # module's names
                {"before": before},
            )
        )
    return total


async def _prune_before_0061(layout: Layout, before: datetime) -> None:
    batch = RetentionOptions().prune_batch
    for statement in [*PRUNED_BEFORE.values(), queries["prune_notifications"]]:
        while True:
            async with layout.services.db.connection() as conn:
                cur = await conn.execute(statement.encode(), {"before": before, "limit": batch})
            if cur.rowcount < batch:
                break


async def _history_pass(layout: Layout, before: datetime) -> None:
    ctx = PassContext(
        services=layout.services,
        now=before + timedelta(days=history.HISTORY_DAYS),
        deadline=time.monotonic() + 24 * 3600,
        options=RetentionOptions(),
    )
    stats = await history.run(ctx)
    assert stats["history_weeks_busy"] == 0, stats


async def retention(layout: Layout, before: datetime, current: bool) -> Removal:
    """The history pass over everything older than `before`, measured."""
    conn = await connect(layout.url)
    try:
        older = await _older(conn, before)
        lsn = await _scalar(conn, "SELECT pg_current_wal_lsn()::text")
        started = time.perf_counter()
        await (_history_pass if current else _prune_before_0061)(layout, before)
        seconds = time.perf_counter() - started
        wal = int(
            await _scalar(
                conn,
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %(lsn)s::pg_lsn)::bigint",
                {"lsn": lsn},
            )
        )
        for table in HISTORY_TABLES:
            await conn.execute(f"VACUUM {table}".encode())  # the module's table names
        left = await _older(conn, before)
        return Removal(seconds, wal, await _history_bytes(conn), older - left, left)
    finally:
        await conn.close()


# --- the run ---------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _size(value: float) -> str:
    return f"{value / 1e9:,.2f} GB" if value >= 1e9 else f"{value / 1e6:,.1f} MB"


def _ratio(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}x"


def _row(label: str, before: str, current: str, ratio: str) -> None:
    print(f"| {label} | {before} | {current} | {ratio} |")


async def measure(layouts: list[Layout], goal: Targets, args: argparse.Namespace) -> bool:
    right = True
    medians: dict[tuple[str, str], list[float]] = {}
    found: dict[tuple[str, str], set[int]] = {}
    rates: dict[str, list[float]] = {layout.label: [] for layout in layouts}
    for layout in layouts:  # warm-up: pools, caches
        for read in READS.values():
            await read(layout, goal)
    for turn in range(args.rounds):
        # Each read alternates between the layouts, sample by sample (the machine's speed
        # drifts), the first alternating too.
        order = layouts if turn % 2 == 0 else layouts[::-1]
        for label, read in READS.items():
            samples: dict[str, list[tuple[float, int]]] = {layout.label: [] for layout in layouts}
            for n in range(1 if read is export else args.repeat):
                for layout in order if n % 2 == 0 else order[::-1]:
                    samples[layout.label].append(await read(layout, goal))
            for layout in layouts:
                key = (label, layout.label)
                taken = samples[layout.label]
                medians.setdefault(key, []).append(statistics.median(s for s, _ in taken))
                found.setdefault(key, set()).update(n for _, n in taken)
        for layout in order:
            planned = await _submit_params(layout, goal, args.submits)
            rates[layout.label].append(await submit(layout, planned, args.concurrency))
    before, current = (layout.label for layout in layouts)
    latest = sorted(MIGRATIONS_DIR.glob("*.sql"))[-1].name[:4]
    _row("measure", "before partitioning (0060)", f"every migration ({latest})", "current / before")
    _row("---", "---", "---", "---")
    for label in READS:
        b, c = medians[(label, before)], medians[(label, current)]
        rows_b, rows_c = found[(label, before)], found[(label, current)]
        ratios = [y / x for x, y in zip(b, c, strict=True)]
        _row(
            f"{label}, rows {'/'.join(str(n) for n in sorted(rows_b))}",
            _ms(statistics.median(b)),
            _ms(statistics.median(c)),
            _ratio(ratios),
        )
        if label.startswith("claim"):
            # Each claim is rolled back: every one claims the same batch, until the
            # submits of a round add due rows.
            right = right and min(rows_b) > 0 and min(rows_c) > 0
        else:
            right = right and rows_b == rows_c and min(rows_b) > 0
    ratios = [y / x for x, y in zip(rates[before], rates[current], strict=True)]
    _row(
        f"submit, {args.concurrency} connections (submits/s)",
        f"{statistics.median(rates[before]):,.0f}",
        f"{statistics.median(rates[current]):,.0f}",
        _ratio(ratios),
    )
    return right


async def run(args: argparse.Namespace) -> bool:
    end = utcnow().replace(microsecond=0)
    shape = Shape(
        submissions=args.submissions,
        organizations=args.organizations,
        start=end - timedelta(days=round(args.months * 365.25 / 12)),
        end=end,
    )
    timings: dict[str, float] = {}
    names: list[str] = []
    started = time.perf_counter()
    try:
        await load(args.admin_url, shape, timings, names)
        loaded = time.perf_counter() - started
        print(
            f"{shape.submissions:,} submissions, {shape.organizations} organizations,"
            f" {args.months} months, loaded in {loaded:,.0f} s: "
            + ", ".join(f"{label} {seconds:,.0f} s" for label, seconds in timings.items())
        )
        with tempfile.TemporaryDirectory() as tmp:
            layouts: list[Layout] = []
            async with (
                built_services(
                    database_url(args.admin_url, names[0]),
                    Path(tmp),
                    pool_max=args.concurrency + 2,
                ) as before_services,
                built_services(
                    database_url(args.admin_url, names[1]),
                    Path(tmp),
                    pool_max=args.concurrency + 2,
                ) as current_services,
            ):
                for label, name, services in (
                    ("before", names[0], before_services),
                    ("current", names[1], current_services),
                ):
                    layouts.append(
                        Layout(label, name, database_url(args.admin_url, name), services)
                    )
                return await _report(layouts, shape, args)
    finally:
        for name in names:
            drop_database(args.admin_url, name)


async def _counts(layout: Layout) -> tuple[dict[str, int], dict[str, int]]:
    """Each big table's rows; the history tables' and the database's bytes."""
    conn = await connect(layout.url)
    try:
        counts = {
            table: int(await _scalar(conn, f"SELECT count(*) FROM {table}"))  # module's names
            for table in ("submissions", "deliveries", "delivery_attempts", "events")
        }
        sizes = {
            "history bytes": await _history_bytes(conn),
            "database bytes": int(
                await _scalar(conn, "SELECT pg_database_size(current_database())")
            ),
        }
        return counts, sizes
    finally:
        await conn.close()


async def _report(layouts: list[Layout], shape: Shape, args: argparse.Namespace) -> bool:
    (rows, before_sizes), (other_rows, current_sizes) = [
        await _counts(layout) for layout in layouts
    ]
    same = rows == other_rows
    per = rows["submissions"]
    print(
        "rows (each layout): "
        + ", ".join(f"{table} {n:,} ({n / per:.2f} per submission)" for table, n in rows.items())
        + f"; {rows['delivery_attempts'] / rows['deliveries']:.2f} attempts per delivery"
        + ("" if same else f"; THE CURRENT LAYOUT HOLDS OTHERS: {other_rows}")
    )
    conn = await connect(layouts[0].url)
    try:
        goal = await targets(conn, shape)
    finally:
        await conn.close()
    print(f"{args.rounds} round(s), each read {args.repeat} times a round (medians)\n")
    right = await measure(layouts, goal, args) and same
    for label, key in (("database", "database bytes"), ("history tables", "history bytes")):
        _row(
            f"{label}, size after loading",
            _size(before_sizes[key]),
            _size(current_sizes[key]),
            _ratio([current_sizes[key] / before_sizes[key]]),
        )
    cutoff = _week_start(shape.start + timedelta(days=31))
    removals = [
        await retention(layout, cutoff, current=layout.label == "current") for layout in layouts
    ]
    b, c = removals
    label = f"retention of the oldest month ({b.removed:,} rows of history)"
    _row(f"{label}: time", _ms(b.seconds), _ms(c.seconds), _ratio([c.seconds / b.seconds]))
    _row(
        f"{label}: WAL",
        _size(b.wal_bytes),
        _size(c.wal_bytes),
        _ratio([c.wal_bytes / max(b.wal_bytes, 1)]),
    )
    _row(
        "history tables, size after it and VACUUM",
        _size(b.history_bytes),
        _size(c.history_bytes),
        _ratio([c.history_bytes / b.history_bytes]),
    )
    removed_alike = b.removed == c.removed and b.left == 0 and c.left == 0 and b.removed > 0
    if not removed_alike:
        print(f"the retention passes removed other rows: {b} {c}")
    return right and removed_alike


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--submissions", type=int, default=10_000_000)
    parser.add_argument("--organizations", type=int, default=200)
    parser.add_argument("--months", type=int, default=13)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="each read, per round")
    parser.add_argument("--submits", type=int, default=2_000, help="submits per round")
    parser.add_argument("--concurrency", type=int, default=4, help="submit connections")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.submissions, args.organizations, args.rounds = 3_000, 20, 1
        args.repeat, args.submits, args.concurrency = 2, 40, 2
    right = asyncio.run(run(args))
    if not right:
        print("the layouts did not hold or answer alike", file=sys.stderr)
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main())
