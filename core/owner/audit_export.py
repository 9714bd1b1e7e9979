"""The audit trail leaves the building (docs/teams.md#the-audit-trail-leaves-the-building).

`export_lines`: an organization's rows in chain order within a time range, as NDJSON or
CSV, each with what its hash covers, so an outside system recomputes the chain. Read in
pages by `seq`, each page a short transaction of its own.

`export_to_bucket`: the scheduled export of the retention tick, one S3 object per
organization and UTC day that has rows, written once the day is over; each object's
metadata names the last hash of the object before it (`prev-hash`), so the objects chain
as the rows do.

`forget_expired`: retention, per plan (at least a year), through `audit_forget_before`,
which keeps the last forgotten row as the chain's anchor; with an export configured, no
row is forgotten before it is exported.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from core.owner.audit import ZERO_HASH, canonical_content, canonical_time
from core.owner.plans import PLANS
from core.platform.aws import S3, aws_client
from core.platform.db import Conn, Database
from core.platform.queries import queries
from core.platform.scope import OrgScope

ExportFormat = Literal["ndjson", "csv"]
# A row's fields as exported, in the order of the CSV's columns; the CSV adds `content`.
FIELDS = (
    "id",
    "organization_id",
    "seq",
    "at",
    "actor_kind",
    "actor_id",
    "actor_name",
    "action",
    "subject",
    "via",
    "ip",
    "user_agent",
    "prev_hash",
    "hash",
)
PAGE_ROWS = 1000
# Organizations looked at per round of the scheduled export.
_DUE_BATCH = 100
# A spreadsheet treats a cell starting with one of these as a formula; a cell starting with
# the quote itself is quoted too, so dropping one leading quote always gives the value back.
_QUOTED_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def exported_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as exported: its fields, the time as its hash covers it."""
    return {name: canonical_time(row["at"]) if name == "at" else row[name] for name in FIELDS}


def _csv_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_QUOTED_STARTS) else text


def _csv_text(rows: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def render(rows: Sequence[dict[str, Any]], fmt: ExportFormat) -> str:
    """Rows as NDJSON lines or CSV records (the CSV's last column is the canonical content
    the hash covers, exact where a cell is empty or quoted)."""
    if fmt == "ndjson":
        return "".join(
            json.dumps(exported_row(row), ensure_ascii=False, separators=(",", ":")) + "\n"
            for row in rows
        )
    return _csv_text(
        [
            [*(_csv_cell(value) for value in exported_row(row).values()), canonical_content(row)]
            for row in rows
        ]
    )


async def export_lines(
    db: Database,
    scope: OrgScope,
    *,
    since: datetime | None,
    until: datetime | None,
    fmt: ExportFormat,
) -> AsyncIterator[str]:
    """The organization's rows at or after `since` and before `until`, oldest first."""
    if fmt == "csv":
        yield _csv_text([[*FIELDS, "content"]])
    after = 0
    while True:
        async with db.scoped(scope) as conn:
            cur = await conn.execute(
                queries["audit_export_page"],
                {
                    "organization_id": scope.organization_id,
                    "after": after,
                    "since": since,
                    "until": until,
                    "limit": PAGE_ROWS,
                },
            )
            rows = await cur.fetchall()
        if rows:
            yield await asyncio.to_thread(render, rows, fmt)
        if len(rows) < PAGE_ROWS:
            return
        after = rows[-1]["seq"]


def bucket_of(url: str) -> tuple[str, str]:
    """The bucket and key prefix of an `s3://bucket/prefix` URL."""
    parts = urlsplit(url)
    return parts.netloc, parts.path.strip("/")


def object_key(prefix: str, organization_id: str, day: date) -> str:
    """Where one organization's day of rows is written."""
    name = f"{organization_id}/{day.isoformat()}.ndjson"
    return f"{prefix}/{name}" if prefix else name


async def _day_rows(conn: Conn, organization_id: str, after: int) -> list[dict[str, Any]]:
    """The rows after `after` from the UTC day of the first of them."""
    cur = await conn.execute(
        queries["audit_export_page"],
        {
            "organization_id": organization_id,
            "after": after,
            "since": None,
            "until": None,
            "limit": 1,
        },
    )
    first = await cur.fetchone()
    if first is None:
        return []
    start = datetime.combine(first["at"].astimezone(UTC).date(), datetime.min.time(), UTC)
    rows: list[dict[str, Any]] = []
    while True:
        cur = await conn.execute(
            queries["audit_export_page"],
            {
                "organization_id": organization_id,
                "after": after,
                "since": None,
                "until": start + timedelta(days=1),
                "limit": PAGE_ROWS,
            },
        )
        page = await cur.fetchall()
        rows.extend(page)
        if len(page) < PAGE_ROWS:
            return rows
        after = page[-1]["seq"]


async def export_to_bucket(
    db: Database, url: str, *, now: datetime, deadline: float
) -> Counter[str]:
    """Write every organization's days that are over and not yet exported, oldest first,
    one object a day, until none is due or the deadline (`time.monotonic()`) passes. An
    object written again after a crash has the same content."""
    bucket, prefix = bucket_of(url)
    today = datetime.combine(now.astimezone(UTC).date(), datetime.min.time(), UTC)
    stats: Counter[str] = Counter()
    while time.monotonic() < deadline:
        async with db.connection() as conn:
            cur = await conn.execute(
                queries["audit_exports_due"], {"today": today, "limit": _DUE_BATCH}
            )
            due = await cur.fetchall()
        if not due:
            break
        for org in due:
            if time.monotonic() >= deadline:
                break
            async with db.connection() as conn:
                rows = await _day_rows(conn, org["organization_id"], org["last_seq"] or 0)
            if not rows:
                continue
            day = rows[0]["at"].astimezone(UTC).date()
            last = rows[-1]
            metadata = {
                "prev-hash": org["last_hash"] or rows[0]["prev_hash"] or ZERO_HASH,
                "first-seq": str(rows[0]["seq"]),
                "last-seq": str(last["seq"]),
                "last-hash": last["hash"],
            }
            body = render(rows, "ndjson").encode()
            await asyncio.to_thread(
                aws_client("s3", S3).put_object,
                Bucket=bucket,
                Key=object_key(prefix, org["organization_id"], day),
                Body=body,
                ContentType="application/x-ndjson",
                Metadata=metadata,
                ServerSideEncryption="AES256",
            )
            async with db.connection() as conn:
                await conn.execute(
                    queries["record_audit_export"],
                    {
                        "organization_id": org["organization_id"],
                        "day": day,
                        "last_seq": last["seq"],
                        "last_hash": last["hash"],
                        "last_at": last["at"],
                        "now": now,
                    },
                )
            stats["audit_objects_exported"] += 1
            stats["audit_rows_exported"] += len(rows)
    return stats


async def forget_expired(conn: Conn, *, now: datetime, exporting: bool) -> int:
    """Forget each organization's rows older than its plan's audit retention (and, while
    an export is configured, only rows already exported); the rows forgotten. Runs as the
    owner, across organizations."""
    shortest = min(plan.audit_retention_days for plan in PLANS.values())
    cur = await conn.execute(
        queries["audit_retention_due"], {"oldest": now - timedelta(days=shortest)}
    )
    forgotten = 0
    for org in await cur.fetchall():
        before = now - timedelta(days=PLANS[org["plan"]].audit_retention_days)
        if exporting:
            if org["exported_through"] is None:
                continue
            before = min(before, org["exported_through"] + timedelta(microseconds=1))
        row = await (
            await conn.execute(
                queries["audit_forget_before"], {"organization_id": org["id"], "before": before}
            )
        ).fetchone()
        assert row is not None
        forgotten += row["forgotten"]
    return forgotten
