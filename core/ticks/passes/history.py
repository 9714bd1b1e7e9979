"""History and submissions: events, delivery attempts and submissions live in weekly
partitions (docs/scale.md); this pass creates each table's weeks ahead, drops each history
week whose every row is older than `HISTORY_DAYS` and each week of submissions whose every
row is erased and past its erase time (after what references them), and deletes old history
rows a batch at a time from the partitions no week holds (the legacy one an upgrade left,
and the default one). Handled notices older than the period are deleted in batches
(docs/operations.md#retention)."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import psycopg

from core.platform.logs import log
from core.platform.queries import queries
from core.platform.vocabulary import WeeklyTable
from core.ticks.maintenance import PassContext, prune

HISTORY_DAYS = 90
# Weeks kept ready after the current one, so a late tick never sends a row to the default.
WEEKS_AHEAD = 4
# Each history table, with the counter of its rows pruned in batches.
HISTORY_TABLES: dict[WeeklyTable, str] = {
    "events": "events_pruned",
    "delivery_attempts": "attempts_pruned",
}
# Each weekly partitioned table, with the prefix of its counters (`…_weeks_added`,
# `…_weeks_dropped`, `…_weeks_busy`).
WEEKLY_TABLES: dict[WeeklyTable, str] = {
    "events": "history",
    "delivery_attempts": "history",
    "submissions": "submission",
}


def week_start(at: datetime) -> datetime:
    """The Monday, 00:00 UTC, that begins `at`'s week (where a weekly partition starts)."""
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


async def run(ctx: PassContext) -> Counter[str]:
    before = ctx.now - timedelta(days=HISTORY_DAYS)
    stats: Counter[str] = Counter()
    first = week_start(ctx.now)
    for table, prefix in WEEKLY_TABLES.items():
        for week in range(WEEKS_AHEAD + 1):
            outcome = await _locked(
                ctx,
                "add_history_week",
                {"parent": table, "week_start": first + timedelta(weeks=week)},
            )
            stats[f"{prefix}_weeks_added" if outcome == "done" else f"{prefix}_weeks_busy"] += (
                outcome != "skipped"
            )
    await _drop_past(ctx, "history", "history_partitions_past", {"before": before}, stats)
    await _drop_past(ctx, "submission", "submission_weeks_past", {"now": ctx.now}, stats)
    for table, counter in HISTORY_TABLES.items():
        stats[counter] = await _prune_leftovers(ctx, table, before)
    stats["notifications_pruned"] = await prune(ctx, "prune_notifications", before=before)
    return stats


async def _drop_past(
    ctx: PassContext,
    prefix: str,
    statement: str,
    params: dict[str, object],
    stats: Counter[str],
) -> None:
    """Drop each week `statement` finds past, oldest first, while the budget lasts."""
    async with ctx.services.db.connection() as conn:
        cur = await conn.execute(queries[statement], params)
        past = [row["name"] for row in await cur.fetchall()]
    for name in past:
        if time.monotonic() > ctx.deadline:
            break
        outcome = await _locked(ctx, "drop_history_partition", {"name": name})
        stats[f"{prefix}_weeks_dropped" if outcome == "done" else f"{prefix}_weeks_busy"] += 1


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
