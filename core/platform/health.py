"""`GET /health`: is the database reachable, is a worker alive, is the outbox draining."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from core.platform.db import Database
from core.platform.errors import Unavailable
from core.platform.queries import queries

# A due delivery waiting longer than this means no worker is draining the outbox.
MAX_DUE_AGE_SECONDS = 300.0
# A stored file whose deletion failed this many times is stuck (the retention tick stops).
MAX_DELETE_ATTEMPTS = 10
# The heartbeat interval: a delivery worker records a heartbeat as each deliver pass ends,
# and starts one at least every 15 s (`postbag worker`, `postbag dev`) or every minute (the
# cloud's schedule). A worker whose last pass started longer ago than twice the longest of
# those is not counted: one late pass does not count a worker out, a stopped one is gone
# within two minutes.
LIVE_HEARTBEAT_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class Health:
    database: bool
    worker_heartbeat_age_seconds: float | None
    oldest_due_delivery_age_seconds: float | None
    # Reported, not fatal: files that could not be deleted do not stop intake or delivery,
    # and a 503 here would take a working submit endpoint out of a load balancer's rotation.
    # Each one also opens a `storage.stuck` alert for its organization.
    stuck_file_deletions: int = 0
    # Delivery workers, anywhere, whose heartbeat is younger than LIVE_HEARTBEAT_SECONDS.
    live_workers: int = 0
    # The delivery worker this process runs, by its heartbeat name; None for a process that
    # runs none (`postbag serve`, the cloud's HTTP functions).
    replica_worker: str | None = None
    # That worker's own heartbeat age (None: it runs none, or has not finished a pass yet).
    replica_worker_heartbeat_age_seconds: float | None = None

    @property
    def healthy(self) -> bool:
        """This replica can do its work: the database answers and, if it runs a worker,
        that worker is alive. Whether workers elsewhere drain the outbox is the
        installation's health (`outbox_healthy`): a replica that serves HTTP only is healthy
        without a worker, and restarting it would start none."""
        if not self.database:
            return False
        own = self.replica_worker_heartbeat_age_seconds
        return own is None or own <= LIVE_HEARTBEAT_SECONDS

    @property
    def outbox_healthy(self) -> bool:
        """The installation delivers: nothing has waited past MAX_DUE_AGE_SECONDS, and a
        worker is alive whenever something is due."""
        due = self.oldest_due_delivery_age_seconds
        if due is None:
            return True
        return due <= MAX_DUE_AGE_SECONDS and self.live_workers > 0

    def as_dict(self, *, installation: bool = False) -> dict[str, Any]:
        """The report; `installation` asks about the whole installation (this replica and
        the outbox), else about this replica only."""
        ok = self.healthy and (self.outbox_healthy or not installation)
        return {"status": "ok" if ok else "unhealthy", **asdict(self)}


async def check_health(db: Database, *, now: datetime, replica_worker: str | None = None) -> Health:
    """Read the signals; an unreachable database is reported, not raised."""
    try:
        async with db.connection() as conn:
            cur = await conn.execute(
                queries["health_snapshot"],
                {
                    "now": now,
                    "max_delete_attempts": MAX_DELETE_ATTEMPTS,
                    "alive": timedelta(seconds=LIVE_HEARTBEAT_SECONDS),
                    "replica_worker": replica_worker,
                },
            )
            row = await cur.fetchone()
    except Unavailable:
        return Health(False, None, None, replica_worker=replica_worker)
    assert row is not None

    def seconds(value: Any) -> float | None:
        return None if value is None else round(float(value), 3)

    return Health(
        True,
        seconds(row["heartbeat_age"]),
        seconds(row["oldest_due_age"]),
        int(row["stuck_deletions"]),
        int(row["live_workers"]),
        replica_worker,
        seconds(row["replica_heartbeat_age"]),
    )
