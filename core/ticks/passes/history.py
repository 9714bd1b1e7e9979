"""History: events and delivery attempts live in weekly partitions (docs/scale.md); this pass
creates the weeks ahead, drops each week whose every row is older than `HISTORY_DAYS`, and
deletes old rows a batch at a time from the partitions no week holds (the legacy one an
upgrade left, and the default one). Handled notices older than the period are deleted in
batches (docs/operations.md#retention)."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import psycopg

from core.platform.logs import log
from core.platform.queries import queries
from core.platform.vocabulary import HistoryTable
from core.ticks.maintenance import PassContext, prune

HISTORY_DAYS = 90
# Weeks kept ready after the current one, so a late tick never sends a row to the default.
WEEKS_AHEAD = 4
# Each partitioned table, with the counter of its rows pruned in batches.
HISTORY_TABLES: dict[HistoryTable, str] = {
    "events": "events_pruned",
    "delivery_attempts": "attempts_pruned",
}


def week_start(at: datetime) -> datetime:
    """The Monday, 00:00 UTC, that begins `at`'s week (where a weekly partition starts)."""
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


async def run(ctx: PassContext) -> Counter[str]:
    before = ctx.now - timedelta(days=HISTORY_DAYS)
    stats: Counter[str] = Counter()
    first = week_start(ctx.now)
    for table in HISTORY_TABLES:
        for week in range(WEEKS_AHEAD + 1):
            outcome = await _locked(
                ctx,
                "add_history_week",
                {"parent": table, "week_start": first + timedelta(weeks=week)},
            )
            stats["history_weeks_added" if outcome == "done" else "history_weeks_busy"] += (
                outcome != "skipped"
            )
    async with ctx.services.db.connection() as conn:
        cur = await conn.execute(queries["history_partitions_past"], {"before": before})
        past = [row["name"] for row in await cur.fetchall()]
    for name in past:
        if time.monotonic() > ctx.deadline:
            break
        outcome = await _locked(ctx, "drop_history_partition", {"name": name})
        stats["history_weeks_dropped" if outcome == "done" else "history_weeks_busy"] += 1
    for table, counter in HISTORY_TABLES.items():
        stats[counter] = await _prune_leftovers(ctx, table, before)
    stats["notifications_pruned"] = await prune(ctx, "prune_notifications", before=before)
    return stats


async def _locked(ctx: PassContext, statement: str, params: dict[str, object]) -> str:
    """Run a statement that attaches or detaches a partition, waiting for its locks no
    longer than the lock timeout: `done`, `skipped` (it had nothing to do: the week was
    there) or `busy` (a reader held the table; the next tick tries again, and no insert
    or read queued behind it for longer than the timeout)."""
    async with ctx.services.db.connection() as conn:
        try:
            async with conn.transaction():
                await conn.execute(queries["history_lock_timeout"])
                cur = await conn.execute(queries[statement], params)
                row = await cur.fetchone()
        except psycopg.errors.LockNotAvailable:
            log.info("history partition busy", extra={"detail": {"statement": statement}})
            return "busy"
    return "done" if row is None or row.get("changed", True) else "skipped"


async def _prune_leftovers(ctx: PassContext, table: str, before: datetime) -> int:
    deleted = 0
    while True:
        async with ctx.services.db.connection() as conn:
            cur = await conn.execute(
                queries["prune_history_leftovers"],
                {"parent": table, "before": before, "limit": ctx.options.prune_batch},
            )
            row = await cur.fetchone()
        batch = int(row["deleted"]) if row else 0
        deleted += batch
        if batch < ctx.options.prune_batch or time.monotonic() > ctx.deadline:
            return deleted
