"""A form's submissions as CSV: bounded field columns, formula-safe cells, streamed.

The columns are the form's declared fields, then names first seen in its submissions, at
most MAX_FIELDS in all (`choose_columns`). Rows are the submissions received by the
export's start, read in pages by their keyset (arrival, id), each page in a short
transaction of its own: between two pages the export holds no database connection, so a
client reading slowly keeps only its own socket busy, never the pool. A page is at most
PAGE_ROWS rows and, past its first row, PAGE_BYTES of values. Each page is decoded and
written to CSV in a worker thread, so a large export never holds the event loop.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.platform.db import Conn, Database
from core.platform.errors import NotFound
from core.platform.limits import MAX_FIELDS
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

PAGE_ROWS = 500
PAGE_BYTES = 1024 * 1024

# A spreadsheet treats a cell starting with one of these as a formula.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A value as a formula-safe CSV cell (the audit trail's CSV uses it too)."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = "; ".join(csv_cell(item) for item in value)
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    if text.startswith(_FORMULA_STARTS):
        text = "'" + text
    return text


def choose_columns(declared: Sequence[str], seen: Sequence[str]) -> list[str]:
    """The field columns of an export: the declared fields first, then the names seen in
    first-seen order, each once, at most MAX_FIELDS in all."""
    return list(dict.fromkeys([*declared, *seen]))[:MAX_FIELDS]


@scoped
async def export_fields(conn: Conn, scope: OrgScope, form_id: str, *, now: datetime) -> list[str]:
    """The field columns of a form's export (NotFound for another organization's form)."""
    params: dict[str, Any] = {
        "form_id": form_id,
        "organization_id": scope.organization_id,
        "now": now,
    }
    if await (await conn.execute(queries["form_exists"], params)).fetchone() is None:
        raise NotFound("no such form")
    cur = await conn.execute(queries["export_declared_fields"], params)
    declared = [row["key"] for row in await cur.fetchall()]
    # Enough first-seen names to fill the columns even when every declared one was seen.
    cur = await conn.execute(
        queries["export_fields"], {**params, "limit": MAX_FIELDS + len(declared)}
    )
    return choose_columns(declared, [row["key"] for row in await cur.fetchall()])


def _csv_text(rows: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def _batch_text(batch: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    """One batch of submissions as CSV lines (run in a worker thread). Row by row: one C
    call over the whole batch would hold the GIL, and with it the event loop, throughout."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in batch:
        values = json.loads(row["values"]) if row["values"] else {}
        writer.writerow(
            [
                row["id"],
                row["received_at"].isoformat(),
                row["status"],
                row["reason"] or "",
                "; ".join(row["flags"]),
                *(csv_cell(values.get(name)) for name in fields),
            ]
        )
    return buffer.getvalue()


@dataclass(frozen=True, slots=True)
class Resume:
    """Where an export starts: after this submission (by arrival, then id)."""

    received_at: datetime
    id: str


FROM_THE_START = Resume(datetime(1, 1, 1, tzinfo=UTC), "")


@scoped
async def resume_after(conn: Conn, scope: OrgScope, form_id: str, submission_id: str) -> Resume:
    """The point after the form's submission `submission_id` (NotFound when it is not one of
    the form's)."""
    cur = await conn.execute(
        queries["export_after"],
        {"id": submission_id, "form_id": form_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound("no such submission in this form")
    return Resume(row["received_at"], submission_id)


async def export_csv(
    db: Database,
    scope: OrgScope,
    form_id: str,
    fields: list[str],
    *,
    now: datetime,
    start: Resume = FROM_THE_START,
    limit: int | None = None,
) -> AsyncIterator[str]:
    """The form's submissions received by `now` after `start` (at most `limit` of them) as
    CSV text, page by page, each page read in its own short transaction."""
    head = ["receipt", "received_at", "status", "reason", "flags", *fields]
    yield _csv_text([[csv_cell(h) for h in head]])
    params: dict[str, Any] = {
        "form_id": form_id,
        "organization_id": scope.organization_id,
        "now": now,
        "until": now,
        "max_bytes": PAGE_BYTES,
    }
    after, left = start, limit
    while left is None or left > 0:
        rows = PAGE_ROWS if left is None else min(PAGE_ROWS, left)
        async with db.reading(scope) as conn:
            cur = await conn.execute(
                queries["export_page"],
                {**params, "after_at": after.received_at, "after_id": after.id, "limit": rows},
            )
            batch = await cur.fetchall()
        if not batch:
            return
        # Written while no connection is held: a slow reader waits here, the pool does not.
        yield await asyncio.to_thread(_batch_text, batch, fields)
        after = Resume(batch[-1]["received_at"], batch[-1]["id"])
        if left is not None:
            left -= len(batch)
