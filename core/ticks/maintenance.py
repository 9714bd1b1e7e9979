"""A maintenance pass of the retention tick: a named unit of work with its cadence, run by
`core/ticks/retention.py` in the order of its `PASSES` (docs/scheduled.md#retention-retention).

Every pass is a short transaction or one statement at a time, so a million expired rows
never hold one long transaction, and is safe on several machines at once.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.platform.health import MAX_DELETE_ATTEMPTS
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.storage import Storage

MINUTE = timedelta(minutes=1)
# Cadence windows are counted from here, so every machine agrees on when one begins.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RetentionOptions:
    """How much one pass takes on at once, and the store files are deleted from (default:
    the settings' `storage_url`)."""

    batch: int = 500
    max_batches: int = 1_000
    delete_batch: int = 200
    delete_lease: timedelta = timedelta(minutes=2)
    max_delete_attempts: int = MAX_DELETE_ATTEMPTS
    forms_per_pass: int = 100
    prune_batch: int = 5_000
    inference_sample: int = 1_000
    # Implicit ham taught per transaction (each is a few statements on the model).
    ham_batch: int = 100
    # Time kept back at the end of the budget for the housekeeping passes.
    margin: float = 2.0
    storage: Storage | None = None


@dataclass(frozen=True, slots=True)
class PassContext:
    """What a pass runs with; `deadline` (a `time.monotonic()` value) bounds its batches."""

    services: Services
    now: datetime
    deadline: float
    options: RetentionOptions


# A pass's work, returning its counters.
PassRun = Callable[[PassContext], Awaitable[Counter[str]]]


@dataclass(frozen=True, slots=True)
class MaintenancePass:
    """One pass: its name, how often it runs, its work, and whether it is housekeeping (it
    may also use the time kept back at the end of the tick's budget)."""

    name: str
    every: timedelta
    run: PassRun
    housekeeping: bool = False

    def is_due(self, now: datetime, *, interval: timedelta) -> bool:
        """Whether a tick firing every `interval` runs this pass at `now`: on every tick when
        its cadence is no longer than the tick's, else on the first tick of each window."""
        return self.every <= interval or (now - _EPOCH) % self.every < interval


async def prune(ctx: PassContext, statement: str, *, before: datetime) -> int:
    """Run the pruning `statement` (rows older than `before`) a batch at a time until it
    deletes less than a batch or the deadline passes; the rows deleted."""
    deleted = 0
    while True:
        async with ctx.services.db.connection() as conn:
            cur = await conn.execute(
                queries[statement], {"before": before, "limit": ctx.options.prune_batch}
            )
        deleted += cur.rowcount
        if cur.rowcount < ctx.options.prune_batch or time.monotonic() > ctx.deadline:
            return deleted
