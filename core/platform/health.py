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
# A worker that has not finished a pass for this long is presumed gone.
MAX_HEARTBEAT_AGE_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Health:
    database: bool
    worker_heartbeat_age_seconds: float | None
    oldest_due_delivery_age_seconds: float | None
    # Reported, not fatal: files that could not be deleted do not stop intake or delivery,
    # and a 503 here would take a working submit endpoint out of a load balancer's rotation.
    # Each one also opens a `storage.stuck` alert for its organization.
    stuck_file_deletions: int = 0
    # Delivery workers, anywhere, whose heartbeat is younger than MAX_HEARTBEAT_AGE_SECONDS.
    live_workers: int = 0
    # The delivery worker this process runs, by its heartbeat name; None for a process that
    # runs none (`postbag serve`, the cloud's HTTP functions), which is healthy as long as a
    # worker elsewhere drains the outbox.
    replica_worker: str | None = None

    @property
    def healthy(self) -> bool:
        if not self.database:
            return False
        due = self.oldest_due_delivery_age_seconds
        if due is not None and due > MAX_DUE_AGE_SECONDS:
            return False
        beat = self.worker_heartbeat_age_seconds
        return beat is None or beat <= MAX_HEARTBEAT_AGE_SECONDS or due is None

    def as_dict(self) -> dict[str, Any]:
        return {"status": "ok" if self.healthy else "unhealthy", **asdict(self)}


async def check_health(db: Database, *, now: datetime, replica_worker: str | None = None) -> Health:
    """Read the signals; an unreachable database is reported, not raised."""
    try:
        async with db.connection() as conn:
            cur = await conn.execute(
                queries["health_snapshot"],
                {
                    "now": now,
                    "max_delete_attempts": MAX_DELETE_ATTEMPTS,
                    "alive": timedelta(seconds=MAX_HEARTBEAT_AGE_SECONDS),
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
    )
