"""A form's submissions as CSV: one column per field seen, formula-safe cells."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from core.platform.db import Conn, Database
from core.platform.errors import NotFound
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

# A spreadsheet treats a cell starting with one of these as a formula.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


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
