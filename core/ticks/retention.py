"""The retention tick (docs/scheduled.md): expire values past `erase_at`, delete stored files, sweep
orphans, prune old events and delivery attempts, and the housekeeping (schema inference,
destination health, destinations that pause themselves, the owner's notices, quota release).

Every step is a short transaction or one statement, so a million expired rows never hold
one long transaction, and every step is safe on several machines at once: expiry locks
its batch with SKIP LOCKED, deletions are leased, inferred versions and events are
appended only by the pass that wins the version number.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from core.outbox import store
from core.outbox.pauses import pause_failing
from core.outbox.wakeup import wake_deliveries
from core.owner.alerts import raise_alert
from core.owner.dashboard_sessions import forget_idle_sessions
from core.owner.form_schemas import DRIFT_DAYS
from core.owner.members import RESET_WINDOW
from core.owner.notifications import gather, send_due
from core.owner.schema_versions import versions_full
from core.platform.db import Conn
from core.platform.errors import PostbagError
from core.platform.health import MAX_DELETE_ATTEMPTS
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.storage import Storage, storage_for
from core.schemas.inference import infer_schema
from core.spam.config import MAX_DUPLICATE_WINDOW
from core.streams.events import expire_events
from core.submissions.erasure import erase_many

# An object stored by a submit whose transaction never committed is an orphan after this.
ORPHAN_AGE = timedelta(hours=1)
# Events and delivery attempts are deleted this long after they were written
# (docs/operations.md#retention).
HISTORY_DAYS = 90
# A worker's heartbeat is forgotten this long after its last pass (every process and Lambda
# sandbox adds one; /health counts only recent ones).
HEARTBEAT_DAYS = 7


@dataclass(frozen=True, slots=True)
class RetentionOptions:
    """How much one pass takes on at once."""

    batch: int = 500
    max_batches: int = 1_000
    delete_batch: int = 200
    delete_lease: timedelta = timedelta(minutes=2)
    max_delete_attempts: int = MAX_DELETE_ATTEMPTS
    forms_per_pass: int = 100
    prune_batch: int = 5_000
    inference_sample: int = 1_000
    # Time kept back at the end of the budget for the housekeeping statements.
    margin: float = 2.0


async def expire_values(
    services: Services, *, now: datetime, options: RetentionOptions, deadline: float
) -> Counter[str]:
    """Erase submissions past `erase_at` in batches of `options.batch`, one transaction each."""
    stats: Counter[str] = Counter()
    while stats["expiry_batches"] < options.max_batches:
        async with services.db.transaction() as conn:
            cur = await conn.execute(
                queries["lock_expired_submissions"], {"now": now, "limit": options.batch}
            )
            ids = [row["id"] for row in await cur.fetchall()]
            if not ids:
                break
            done = await erase_many(conn, ids=ids, now=now, reason="expired")
        stats["expiry_batches"] += 1
        stats["expired"] += done.erased
        stats["largest_batch"] = max(stats["largest_batch"], len(ids))
        stats["deliveries_skipped"] += done.skipped_deliveries
        if len(ids) < options.batch or time.monotonic() > deadline:
            break
    return stats


async def expire_stream_events(
    services: Services, *, now: datetime, options: RetentionOptions, deadline: float
) -> Counter[str]:
    """Erase stream events past `erase_at` in batches of `options.batch`, one transaction
    each (docs/streams.md#retention)."""
    stats: Counter[str] = Counter()
    while stats["event_expiry_batches"] < options.max_batches:
        async with services.db.transaction() as conn:
            erased = await expire_events(conn, now=now, limit=options.batch)
        if not erased:
            break
        stats["event_expiry_batches"] += 1
        stats["events_expired"] += erased
        if erased < options.batch or time.monotonic() > deadline:
            break
    return stats


async def delete_stored_objects(
    services: Services,
    storage: Storage,
    *,
    now: datetime,
    options: RetentionOptions,
    deadline: float,
) -> Counter[str]:
    """Schedule orphans, then delete every object due for deletion through `storage`.

    A failure counts an attempt and is retried on the next pass; at the cap the object is
    stuck: an alert is opened and `/health` lists it.
    """
    stats: Counter[str] = Counter()
    async with services.db.connection() as conn:
        cur = await conn.execute(
            queries["mark_orphans"], {"now": now, "older_than": now - ORPHAN_AGE}
        )
        stats["orphans"] = len(await cur.fetchall())
    while time.monotonic() < deadline:
        async with services.db.connection() as conn:
            cur = await conn.execute(
                queries["claim_object_deletions"],
                {
                    "now": now,
                    "lease": options.delete_lease,
                    "max_attempts": options.max_delete_attempts,
                    "limit": options.delete_batch,
                },
            )
            claimed = await cur.fetchall()
        for row in claimed:
            await _delete_one(services, storage, row["storage_key"], now, options, stats)
        if len(claimed) < options.delete_batch:
            break
    return stats


async def _delete_one(
    services: Services,
    storage: Storage,
    key: str,
    now: datetime,
    options: RetentionOptions,
    stats: Counter[str],
) -> None:
    try:
        await storage.delete(key)
    except PostbagError as exc:
        stats["delete_failures"] += 1
        async with services.db.transaction() as conn:
            cur = await conn.execute(
                queries["mark_object_delete_failed"],
                {"storage_key": key, "error": str(exc), "now": now},
            )
            row = await cur.fetchone()
            if row is not None and row["delete_attempts"] >= options.max_delete_attempts:
                await raise_alert(
                    conn,
                    organization_id=row["organization_id"],
                    kind="storage.stuck",
                    subject_id=row["submission_id"],
                    detail=f"a stored file could not be deleted: {exc}"[:500],
                    delivery_id=None,
                    now=now,
                )
        log.warning(
            "could not delete a stored object",
            extra={"org_id": row["organization_id"] if row else None, "detail": str(exc)},
        )
        return
    async with services.db.connection() as conn:
        await conn.execute(queries["mark_object_deleted"], {"storage_key": key, "now": now})
    stats["files_deleted"] += 1


def _shape(schema: Mapping[str, Any] | None) -> Any:
    """What decides whether a schema changed: its properties and required fields."""
    if not schema:
        return None
    return json.dumps(
        {"properties": schema.get("properties"), "required": sorted(schema.get("required") or [])},
        sort_keys=True,
    )


async def infer_schemas(
    conn: Conn, *, now: datetime, options: RetentionOptions, deadline: float | None = None
) -> int:
    """Append a suggested version for each `observe` form whose observed shape changed.
    A form is read again only once new submissions arrived; inference runs in a thread."""
    appended = 0
    after: str | None = None
    while deadline is None or time.monotonic() < deadline:
        cur = await conn.execute(
            queries["observed_forms"], {"limit": options.forms_per_pass, "after": after}
        )
        forms = await cur.fetchall()
        for form in forms:
            appended += await _infer_one(conn, form, now=now, options=options)
        if len(forms) < options.forms_per_pass:
            break
        after = forms[-1]["id"]
    return appended


async def _infer_one(
    conn: Conn, form: Mapping[str, Any], *, now: datetime, options: RetentionOptions
) -> int:
    rows = await (
        await conn.execute(
            queries["observed_values"],
            {
                "form_id": form["id"],
                "since": form["version_at"],
                "limit": options.inference_sample,
            },
        )
    ).fetchall()
    samples = [row["values"] for row in rows if isinstance(row["values"], dict)]
    await conn.execute(
        queries["mark_inference_scanned"],
        {
            "form_id": form["id"],
            "organization_id": form["organization_id"],
            # The newest submission read (they come newest first), not `now`: one received
            # just before `now` but committed after this read is read next pass.
            "through": rows[0]["received_at"] if rows else now,
        },
    )
    if not samples:
        return 0
    if versions_full(form["plan"], form["version"] or 0):
        return 0  # the plan's versions per form are used up: the form keeps its latest
    schema = await asyncio.to_thread(infer_schema, samples)
    if _shape(schema) == _shape(form["schema"]):
        return 0
    added = await (
        await conn.execute(
            queries["append_suggested_schema"],
            {
                "organization_id": form["organization_id"],
                "form_id": form["id"],
                "version": (form["version"] or 0) + 1,
                "schema": Jsonb(schema),
                "now": now,
            },
        )
    ).fetchone()
    if added is None:
        return 0  # another pass appended this version first
    log.info(
        "schema suggested",
        extra={
            "org_id": form["organization_id"],
            "form_id": form["id"],
            "detail": {"version": added["version"]},
        },
    )
    return 1


async def prune_history(
    services: Services, *, now: datetime, options: RetentionOptions, deadline: float
) -> Counter[str]:
    """Delete events, delivery attempts and handled notices older than `HISTORY_DAYS`, the
    counts of acknowledgements of days gone by and of password resets whose window ended,
    heartbeats of workers long gone, duplicate fingerprints whose window is over and expired
    invitations, a batch per statement."""
    stats: Counter[str] = Counter()
    history_start = now - timedelta(days=HISTORY_DAYS)
    for name, counter, before in (
        ("prune_events", "events_pruned", history_start),
        ("prune_delivery_attempts", "attempts_pruned", history_start),
        ("prune_acknowledgement_counts", "acknowledgement_counts_pruned", now),
        ("prune_schema_drift", "drift_pruned", now - timedelta(days=DRIFT_DAYS)),
        (
            "prune_spam_fingerprints",
            "spam_fingerprints_pruned",
            now - timedelta(seconds=MAX_DUPLICATE_WINDOW),
        ),
        ("prune_heartbeats", "heartbeats_pruned", now - timedelta(days=HEARTBEAT_DAYS)),
        ("prune_notifications", "notifications_pruned", history_start),
        ("prune_invitations", "invitations_swept", now),
        ("prune_reset_counts", "reset_counts_pruned", now - RESET_WINDOW),
    ):
        while True:
            async with services.db.connection() as conn:
                cur = await conn.execute(
                    queries[name], {"before": before, "limit": options.prune_batch}
                )
            stats[counter] += cur.rowcount
            if cur.rowcount < options.prune_batch or time.monotonic() > deadline:
                break
    return stats


async def housekeeping(
    services: Services, *, now: datetime, options: RetentionOptions, deadline: float
) -> Counter[str]:
    """Schema inference, the destination health rollup, destinations failing for their
    window paused, the owner's notices gathered and folded into emails (woken at once), the
    release of held deliveries and the sweep of idle dashboard sessions (they are refused
    once idle; this forgets them)."""
    stats: Counter[str] = Counter()
    async with services.db.connection() as conn:
        stats["schemas_inferred"] = await infer_schemas(
            conn, now=now, options=options, deadline=deadline
        )
        cur = await conn.execute(queries["roll_up_destination_health"], {"now": now})
        stats["destinations_rolled_up"] = cur.rowcount
        stats["destinations_paused"] = await pause_failing(conn, now=now)
        stats["notices"] = await gather(conn, now=now)
        # The same statement the deliver tick runs first: an upgrade or a new month releases
        # held deliveries even while no delivery is due.
        stats["released"] = await store.release_held(conn, now=now)
        stats["sessions_forgotten"] = await forget_idle_sessions(conn, now=now)
    stats["notice_emails"] = await send_due(
        services.db, now=now, public_url=str(services.settings.public_url)
    )
    if stats["notice_emails"]:
        await wake_deliveries(services)
    return stats


async def run_retention(
    services: Services,
    *,
    now: datetime,
    budget: float,
    options: RetentionOptions | None = None,
    storage: Storage | None = None,
) -> dict[str, Any]:
    """One bounded retention pass; returns its counters."""
    opts = options or RetentionOptions()
    deadline = time.monotonic() + max(budget - opts.margin, 0.0)
    store = storage or storage_for(services.settings.storage_url)
    stats: Counter[str] = Counter()
    stats["batch_size"] = opts.batch
    stats.update(await expire_values(services, now=now, options=opts, deadline=deadline))
    stats.update(await expire_stream_events(services, now=now, options=opts, deadline=deadline))
    stats.update(
        await delete_stored_objects(services, store, now=now, options=opts, deadline=deadline)
    )
    stats.update(await prune_history(services, now=now, options=opts, deadline=deadline))
    stats.update(
        await housekeeping(services, now=now, options=opts, deadline=deadline + opts.margin)
    )
    return dict(stats)


async def retention_pass(services: Services, now: datetime, budget: float) -> Mapping[str, Any]:
    """The `retention` tick: one pass with the default options."""
    return await run_retention(services, now=now, budget=budget)
