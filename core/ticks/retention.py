"""The retention tick (docs/scheduled.md#retention-retention): the maintenance passes due,
in the order of `PASSES`, within the tick's budget. Expiry, file deletion and pruning end
`margin` seconds early, kept back for the housekeeping passes after them. A pass that fails
is logged and the others still run; the tick then fails with its error, as a tick whose
work failed always has (no heartbeat; the invocation or `postbag tick` reports it).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.platform.logs import log
from core.platform.services import Services
from core.platform.storage import Storage
from core.ticks.maintenance import MINUTE, MaintenancePass, PassContext, RetentionOptions
from core.ticks.passes import (
    audit,
    autopause,
    counts,
    drift,
    expiry,
    files,
    fingerprints,
    ham,
    health,
    heartbeats,
    history,
    inference,
    invitations,
    notices,
    orphans,
    quota,
    sessions,
    stream_expiry,
)

PASSES: tuple[MaintenancePass, ...] = (
    MaintenancePass("expiry", MINUTE, expiry.run),
    MaintenancePass("stream_expiry", MINUTE, stream_expiry.run),
    # Before `files`, so an orphan is deleted by the pass that finds it.
    MaintenancePass("orphans", MINUTE, orphans.run),
    MaintenancePass("files", MINUTE, files.run),
    MaintenancePass("history", MINUTE, history.run),
    MaintenancePass("counts", MINUTE, counts.run),
    MaintenancePass("drift", MINUTE, drift.run),
    MaintenancePass("fingerprints", MINUTE, fingerprints.run),
    MaintenancePass("ham", MINUTE, ham.run),
    MaintenancePass("heartbeats", MINUTE, heartbeats.run),
    MaintenancePass("invitations", MINUTE, invitations.run),
    # Before retention: while an export is configured, only exported rows are forgotten.
    MaintenancePass("audit_export", MINUTE, audit.export),
    MaintenancePass("audit_retention", MINUTE, audit.retention),
    MaintenancePass("inference", MINUTE, inference.run, housekeeping=True),
    MaintenancePass("health", MINUTE, health.run, housekeeping=True),
    # Before `notices`: a pause writes its notice, sent by this same tick.
    MaintenancePass("autopause", MINUTE, autopause.run, housekeeping=True),
    MaintenancePass("quota", MINUTE, quota.run, housekeeping=True),
    MaintenancePass("sessions", MINUTE, sessions.run, housekeeping=True),
    MaintenancePass("notices", MINUTE, notices.run, housekeeping=True),
)
# How often the runner fires the tick: its most frequent pass's cadence.
EVERY = min(maintenance.every for maintenance in PASSES)


async def run_retention(
    services: Services,
    *,
    now: datetime,
    budget: float,
    options: RetentionOptions | None = None,
    storage: Storage | None = None,
) -> dict[str, Any]:
    """One bounded retention tick; returns the counters of its passes."""
    opts = options or RetentionOptions()
    if storage is not None:
        opts = dataclasses.replace(opts, storage=storage)
    deadline = time.monotonic() + max(budget - opts.margin, 0.0)
    stats: Counter[str] = Counter()
    stats["batch_size"] = opts.batch
    failures: list[Exception] = []
    for maintenance in PASSES:
        if not maintenance.is_due(now, interval=EVERY):
            continue
        ends = deadline + opts.margin if maintenance.housekeeping else deadline
        try:
            stats.update(await maintenance.run(PassContext(services, now, ends, opts)))
        except Exception as exc:
            log.exception(
                "maintenance pass failed",
                extra={"tick": "retention", "detail": {"pass": maintenance.name}},
            )
            failures.append(exc)
    if failures:
        raise failures[0]
    return dict(stats)


async def retention_pass(services: Services, now: datetime, budget: float) -> Mapping[str, Any]:
    """The `retention` tick: one pass with the default options."""
    return await run_retention(services, now=now, budget=budget)
