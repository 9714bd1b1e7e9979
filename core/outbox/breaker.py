"""Storm throttling as a pass sees it (docs/delivery.md): a destination that failed too
often in a row gets one probe per window; its other deliveries are parked until a probe
succeeds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from core.destinations.base import Result
from core.outbox import store
from core.outbox.backoff import MAX_DELAY
from core.outbox.store import Claim
from core.platform.db import Database

# Failures that say nothing about the receiver's health (no request was made, or the
# adapter itself raised).
_NOT_THE_DESTINATION = frozenset(
    {"invalid_target", "secret_missing", "email_not_configured", "adapter_error"}
)


def counts_against(result: Result) -> bool:
    """Whether a send's `result` is a failure of its destination (one that counts to `failing`)."""
    return (
        not result.ok
        and result.skip_reason is None
        and result.error_class not in _NOT_THE_DESTINATION
    )


class Breaker:
    """The health of the destinations one pass sends to, and the writes that change it."""

    def __init__(self, db: Database, stats: Counter[str], clock: Callable[[], datetime]) -> None:
        self._db = db
        self._stats = stats
        self._now = clock
        self._failing: dict[str, bool] = {}
        # Destinations that may have a failure count to reset on the next success.
        self._dirty: dict[str, bool] = {}

    def learn(self, destination: str, claim: Claim) -> None:
        """Take `destination`'s health from the first of its claims in this pass."""
        self._failing.setdefault(destination, claim.destination_health == "failing")
        self._dirty.setdefault(
            destination,
            claim.destination_health != "healthy" or bool(claim.destination_failures),
        )

    def failing(self, destination: str) -> bool:
        """Whether only probes go to `destination`."""
        return self._failing[destination]

    async def take_probe(self, claim: Claim, destination: str) -> bool:
        """Whether this delivery is its failing destination's probe; if not, push it back."""
        async with self._db.connection() as conn:
            if await store.take_probe(conn, destination, now=self._now()) is not None:
                self._stats["probes"] += 1
                return True
            is_failing, _ = await store.probe_window_end(conn, destination)
            if not is_failing:
                # Restored meanwhile (another worker's probe succeeded): send normally.
                self._failing[destination] = False
                return True
            # Parked: the probe's success releases it at once; if no probe ever succeeds it
            # comes back after the longest backoff, like any retry. The rest of the
            # destination's due backlog is parked with it, rather than claimed to be parked.
            until = self._now() + timedelta(seconds=MAX_DELAY)
            await store.release(
                conn,
                claim,
                now=self._now(),
                throttled=True,
                next_attempt_at=until,
                detail="destination_failing",
            )
            parked = await store.park_due(conn, destination, now=self._now(), until=until)
        self._stats["throttled"] += 1 + parked
        return False

    async def probe_failed(self, destination: str, *, now: datetime) -> datetime | None:
        """Count a failed probe before its outcome is written: it opens the next window,
        whose end (returned) is when the next probe is due."""
        return await self._count(destination, now=now, probe=True)

    async def promote_next_probe(self, destination: str, *, at: datetime, now: datetime) -> None:
        """A failed probe ended dead: make one parked delivery the next probe, due `at`."""
        async with self._db.connection() as conn:
            await store.promote_parked(conn, destination, at=at, now=now)

    async def failed(self, destination: str, *, now: datetime, probe: bool) -> None:
        """A failure's outcome is written: count it (a probe's is counted already)."""
        if not probe:
            await self._count(destination, now=now, probe=False)
        self._dirty[destination] = True

    async def succeeded(self, destination: str, *, now: datetime) -> None:
        """A success's outcome is written: restore the destination and release its parked
        deliveries, unless it is known healthy with no failures since."""
        if not self._dirty.get(destination, True):
            return
        async with self._db.connection() as conn:
            released = await store.destination_succeeded(conn, destination, now=now)
        self._failing[destination] = False
        # Known healthy with no failures since: later successes need not write.
        self._dirty[destination] = False
        self._stats["unthrottled"] += released

    async def _count(self, destination: str, *, now: datetime, probe: bool) -> datetime | None:
        async with self._db.connection() as conn:
            is_failing, window_end = await store.destination_failed(
                conn, destination, now=now, probe=probe
            )
        self._failing[destination] = is_failing
        return window_end
