"""Reading, exporting and erasing submissions (the owner's side, always scoped).

Values are readable until `erase_at` passes (checked on every read, not by the cleanup)
or until they are erased; after that a submission keeps its receipt, status, idempotency
key and payload hash, and its delivery lines keep channel and state but not the target.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from core.destinations.base import ValidationContext
from core.destinations.registry import ADAPTERS
from core.platform.db import Conn, Database
from core.platform.errors import NotFound, PostbagError, ValuesErased, ValuesExpired
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.platform.storage import Storage, storage_for
from core.platform.vocabulary import DeliverySkipReason, EraseReason

# A spreadsheet treats a cell starting with one of these as a formula.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def readable(row: dict[str, Any], now: datetime) -> str:
    """`present`, `erased` or `expired`: whether a submission's values may be shown."""
    if row["erased_at"] is not None:
        return "erased"
    if row["erase_at"] is not None and row["erase_at"] <= now:
        return "expired"
    return "present"


def _summary(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {
        "id": row["id"],
        "form": row["form_id"],
        "status": row["status"],
        "reason": row["reason"],
        "flags": list(row["flags"]),
        "received_at": row["received_at"],
        "erase_at": row["erase_at"],
        "erased_at": row["erased_at"],
        "values_state": readable(row, now),
    }


@scoped
async def list_submissions(
    conn: Conn,
    scope: OrgScope,
    *,
    now: datetime,
    form_id: str | None,
    status: str | None,
    since: datetime | None,
    before: tuple[datetime, str] | None,
    limit: int,
    flag: str | None = None,
) -> list[dict[str, Any]]:
    """One page, newest first, without values (only those flagged `flag`, e.g. `test`)."""
    cur = await conn.execute(
        queries["list_submissions"],
        {
            "organization_id": scope.organization_id,
            "form_id": form_id,
            "status": status,
            "flag": flag,
            "since": since,
            "before_at": before[0] if before else None,
            "before_id": before[1] if before else None,
            "limit": limit,
        },
    )
    return [_summary(row, now) for row in await cur.fetchall()]


def redacted_target(channel: str, target: Any) -> dict[str, Any] | None:
    """What a delivery line may show of its target (webhook: origin and path only)."""
    adapter = ADAPTERS.get(channel)
    if adapter is None or not isinstance(target, dict):
        return None
    try:
        config = adapter.validate(target, ValidationContext(allow_private_targets=True))
    except ValueError:
        return None
    return adapter.redact(config)


@scoped
async def get_submission(
    conn: Conn, scope: OrgScope, submission_id: str, *, now: datetime
) -> dict[str, Any]:
    """One submission: values while readable, attachments, one line per delivery."""
    cur = await conn.execute(
        queries["get_submission"],
        {"id": submission_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound("no such submission")
    result = _summary(row, now)
    present = result["values_state"] == "present"
    result["values"] = row["values"] if present else None
    result["attachments"] = row["attachments"] if present else []
    lines = []
    for line in row["deliveries"]:
        target = line.pop("target")
        line["target"] = redacted_target(line["channel"], target) if present else None
        lines.append(line)
    result["deliveries"] = lines
    return result


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
    """Erase the values of `ids` (locked by the caller) in five statements, whatever their
    number: null values, end unsent deliveries `skipped`, scrub snapshots (digests too),
    mark stored objects for deletion, one `submission.erased` event each.

    `reason` is `requested` (the owner's erase) or `expired` (retention). Runs inside the
    caller's transaction; the bytes are deleted after commit.
    """
    params = {"ids": ids, "now": now, "erase_reason": reason, "skip_reason": _SKIP_REASONS[reason]}
    cur = await conn.execute(queries["erase_submission_values"], params)
    erased = await cur.fetchall()
    cur = await conn.execute(queries["erase_delivery_snapshots"], params)
    skipped = sum(1 for d in await cur.fetchall() if d["status"] == "skipped")
    await conn.execute(queries["erase_digest_snapshots"], params)
    cur = await conn.execute(queries["erase_attachments"], params)
    objects = await cur.fetchall()
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
    services: Services, scope: OrgScope, submission_id: str, *, now: datetime
) -> Erasure:
    """The owner's erase: the values in one transaction, then the stored files' bytes."""
    async with services.db.scoped(scope) as conn:
        erasure = await erase_values(conn, scope, submission_id, now=now)
    if erasure.storage_keys:
        storage = storage_for(services.settings.storage_url)
        await delete_objects(services.db, scope, storage, erasure.storage_keys, now=now)
    return erasure


@dataclass(frozen=True, slots=True)
class AttachmentFile:
    """An attachment that may be downloaded: its name, sniffed type, size and key."""

    name: str
    content_type: str
    size: int
    storage_key: str


@scoped
async def get_attachment(
    conn: Conn, scope: OrgScope, submission_id: str, attachment_id: str, *, now: datetime
) -> AttachmentFile:
    """An attachment whose bytes may still be read (ValuesErased / ValuesExpired otherwise)."""
    params = {
        "id": submission_id,
        "attachment_id": attachment_id,
        "organization_id": scope.organization_id,
    }
    row = await (await conn.execute(queries["get_attachment"], params)).fetchone()
    if row is None:
        probe = await conn.execute(
            queries["submission_state"],
            {"id": submission_id, "organization_id": scope.organization_id},
        )
        found = await probe.fetchone()
        if found is not None and found["erased_at"] is not None:
            raise ValuesErased("the submission's values and files were erased")
        raise NotFound("no such attachment")
    state = readable(row, now)
    if state == "erased":
        raise ValuesErased("the submission's values and files were erased")
    if state == "expired":
        raise ValuesExpired("the submission is past its retention")
    return AttachmentFile(
        name=row["name"],
        content_type=row["content_type"],
        size=row["size"],
        storage_key=row["storage_key"],
    )


def _cell(value: Any) -> str:
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = "; ".join(_cell(item) for item in value)
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    if text.startswith(_FORMULA_STARTS):
        text = "'" + text
    return text


@scoped
async def export_fields(conn: Conn, scope: OrgScope, form_id: str, *, now: datetime) -> list[str]:
    """The field columns of a form's export (NotFound for another organization's form)."""
    params = {"form_id": form_id, "organization_id": scope.organization_id, "now": now}
    if await (await conn.execute(queries["form_exists"], params)).fetchone() is None:
        raise NotFound("no such form")
    cur = await conn.execute(queries["export_fields"], params)
    return [row["key"] for row in await cur.fetchall()]


async def export_csv(
    db: Database, scope: OrgScope, form_id: str, fields: list[str], *, now: datetime
) -> AsyncIterator[str]:
    """The form's submissions as CSV text, streamed in batches from a server-side cursor."""
    head = ["receipt", "received_at", "status", "reason", "flags", *fields]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([_cell(h) for h in head])
    yield buffer.getvalue()
    params = {"form_id": form_id, "organization_id": scope.organization_id, "now": now}
    async with db.scoped(scope) as conn:
        async with conn.cursor(name="export_rows") as cursor:
            await cursor.execute(queries["export_rows"], params)
            while batch := await cursor.fetchmany(500):
                buffer.seek(0)
                buffer.truncate()
                for row in batch:
                    values = row["values"] or {}
                    writer.writerow(
                        [
                            row["id"],
                            row["received_at"].isoformat(),
                            row["status"],
                            row["reason"] or "",
                            "; ".join(row["flags"]),
                            *(_cell(values.get(name)) for name in fields),
                        ]
                    )
                yield buffer.getvalue()


@scoped
async def delivery_counts(
    conn: Conn, scope: OrgScope, submission_ids: list[str]
) -> dict[str, dict[str, int]]:
    """For each submission, how many of its deliveries are in each state."""
    cur = await conn.execute(
        queries["delivery_counts_for_submissions"],
        {"organization_id": scope.organization_id, "ids": submission_ids},
    )
    counts: dict[str, dict[str, int]] = {}
    for row in await cur.fetchall():
        counts.setdefault(row["submission_id"], {})[row["status"]] = row["n"]
    return counts
