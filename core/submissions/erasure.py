"""Erasing submissions: the owner's erase and the retention tick's batches, values first
(in one transaction), then the stored files' bytes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb

from core.owner.changes import Change
from core.platform.db import Conn, Database
from core.platform.errors import NotFound, PostbagError
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.storage import Storage, storage_for
from core.platform.vocabulary import DeliverySkipReason, EraseReason
from core.spam.model import forget_erased


@dataclass(frozen=True, slots=True)
class Erasure:
    """What an erase did: the submission and the storage keys whose bytes must go."""

    submission_id: str
    storage_keys: list[str]
    skipped_deliveries: int


@dataclass(frozen=True, slots=True)
class BatchErasure:
    """What erasing several submissions did (the retention tick's batches)."""

    erased: int
    skipped_deliveries: int
    storage_keys: list[str]


_SKIP_REASONS: dict[EraseReason, DeliverySkipReason] = {
    "requested": "values_erased",
    "expired": "values_expired",
}


async def erase_many(
    conn: Conn, *, ids: list[str], now: datetime, reason: EraseReason
) -> BatchErasure:
    """Erase the values of `ids` (locked by the caller) in six statements, whatever their
    number: null values (the deliveries' bodies are built from them), end unsent
    deliveries `skipped`, scrub the digests that listed them, scrub what receivers answered
    (excerpts, service error texts, an acknowledgement's address), mark stored objects for
    deletion, one `submission.erased` event each; and take what they taught the learned
    filter out of it (`core.spam.model.forget_erased`).

    `reason` is `requested` (the owner's erase) or `expired` (retention). Runs inside the
    caller's transaction; the bytes are deleted after commit.
    """
    params = {"ids": ids, "now": now, "erase_reason": reason, "skip_reason": _SKIP_REASONS[reason]}
    cur = await conn.execute(queries["erase_submission_values"], params)
    erased = await cur.fetchall()
    cur = await conn.execute(queries["skip_erased_deliveries"], params)
    skipped = sum(1 for d in await cur.fetchall() if d["status"] == "skipped")
    await conn.execute(queries["erase_digest_snapshots"], params)
    await conn.execute(queries["erase_delivery_traces"], params)
    cur = await conn.execute(queries["erase_attachments"], params)
    objects = await cur.fetchall()
    await forget_erased(conn, ids, now)
    files: dict[str, int] = {}
    for obj in objects:
        files[obj["submission_id"]] = files.get(obj["submission_id"], 0) + 1
    if erased:
        rows = [
            {"id": r["id"], "organization_id": r["organization_id"], "files": files.get(r["id"], 0)}
            for r in erased
        ]
        await conn.execute(queries["insert_erased_events"], {**params, "erased": Jsonb(rows)})
    return BatchErasure(
        erased=len(erased),
        skipped_deliveries=skipped,
        storage_keys=[obj["storage_key"] for obj in objects],
    )


@scoped
async def erase_values(
    conn: Conn,
    scope: OrgScope,
    submission_id: str,
    *,
    now: datetime,
    reason: EraseReason = "requested",
) -> Erasure:
    """Null the values, drop attachment records, skip unsent deliveries, scrub snapshots.

    Runs inside the caller's transaction; the caller deletes the bytes after commit
    (`delete_objects`). Erasing twice is harmless.
    """
    cur = await conn.execute(
        queries["lock_submission"], {"id": submission_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound("no such submission")
    done = await erase_many(conn, ids=[submission_id], now=now, reason=reason)
    return Erasure(
        submission_id=submission_id,
        storage_keys=done.storage_keys,
        skipped_deliveries=done.skipped_deliveries,
    )


async def delete_objects(
    db: Database, scope: OrgScope, storage: Storage, keys: Iterable[str], *, now: datetime
) -> None:
    """Delete stored bytes, recording each success or failure (failures are retried later)."""
    for key in keys:
        try:
            await storage.delete(key)
        except PostbagError as exc:
            log.warning("could not delete a stored object", extra={"org_id": scope.organization_id})
            async with db.scoped(scope) as conn:
                await conn.execute(
                    queries["mark_object_delete_failed"],
                    {"storage_key": key, "error": str(exc), "now": now},
                )
            continue
        async with db.scoped(scope) as conn:
            await conn.execute(queries["mark_object_deleted"], {"storage_key": key, "now": now})


async def erase_submission(
    change: Change, submission_id: str, *, storage_url: str, now: datetime
) -> Erasure:
    """The owner's erase: the values in the change's transaction (with its audit row), then
    the stored files' bytes."""
    async with change as conn:
        erasure = await erase_values(conn, change.scope, submission_id, now=now)
    if erasure.storage_keys:
        storage = storage_for(storage_url)
        await delete_objects(change.db, change.scope, storage, erasure.storage_keys, now=now)
    return erasure
