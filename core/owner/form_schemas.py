"""Form schemas: append-only JSON Schema versions, checked against the limits of
`core.schemas.limits` when saved; suggestions adopted by the owner; the drift summary."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field

from core.owner.usage import reserve_schema_version
from core.platform.db import Conn
from core.platform.errors import NotFound
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.schemas.limits import check_schema

# How far back the drift summary looks (drift rows are kept as long, then pruned).
DRIFT_DAYS = 30
# The drift summary lists at most this many paths and keywords.
DRIFT_ROWS = 500


class SchemaFields(BaseModel):
    """A new schema version: a JSON Schema object (draft 2020-12 unless `$schema` says)."""

    model_config = ConfigDict(extra="forbid")

    # Named `json_schema` in Python: `schema` would shadow a BaseModel attribute.
    json_schema: dict[str, Any] = Field(
        alias="schema",
        examples=[
            {
                "type": "object",
                "required": ["email"],
                "properties": {"email": {"type": "string", "format": "email"}},
            }
        ],
    )


async def _require_live_form(conn: Conn, scope: OrgScope, form_id: str) -> None:
    cur = await conn.execute(
        queries["get_form"], {"id": form_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no form {form_id}")


async def _lock_live_form(conn: Conn, scope: OrgScope, form_id: str) -> None:
    cur = await conn.execute(
        queries["lock_form"], {"id": form_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no form {form_id}")


@scoped
async def add_schema(
    conn: Conn, scope: OrgScope, *, form_id: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """Append the form's next schema version (source `manual`); versions are never edited.

    Refused with InvalidSchema past a limit of `core.schemas.limits`, and with
    PlanLimitReached once the form has the plan's number of versions.
    """
    check_schema(schema)
    # The form's row lock serialises appends, so two at once get versions n+1 and n+2.
    await _lock_live_form(conn, scope, form_id)
    await reserve_schema_version(conn, scope, form_id=form_id)
    cur = await conn.execute(
        queries["insert_form_schema"],
        {"organization_id": scope.organization_id, "form_id": form_id, "schema": Jsonb(schema)},
    )
    row = await cur.fetchone()
    assert row is not None
    return row


@scoped
async def adopt_schema(
    conn: Conn, scope: OrgScope, *, form_id: str, version: int
) -> dict[str, Any]:
    """Make a version the form's current schema: append a `manual` copy of its content
    (checked as any schema the owner writes)."""
    cur = await conn.execute(
        queries["get_form_schema"],
        {"organization_id": scope.organization_id, "form_id": form_id, "version": version},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no schema version {version} of form {form_id}")
    added: dict[str, Any] = await add_schema(conn, scope, form_id=form_id, schema=row["schema"])
    return added


@scoped
async def recent_schemas(
    conn: Conn, scope: OrgScope, *, form_id: str, limit: int
) -> list[dict[str, Any]]:
    """The form's latest `limit` versions, newest first, and its current one even when older;
    each row also holds `total`, the form's number of versions."""
    cur = await conn.execute(
        queries["recent_form_schemas"],
        {"organization_id": scope.organization_id, "form_id": form_id, "limit": limit},
    )
    return await cur.fetchall()


@scoped
async def drift_summary(
    conn: Conn, scope: OrgScope, *, form_id: str, now: datetime
) -> list[dict[str, Any]]:
    """The form's drift over the last DRIFT_DAYS days: path, keyword, count, first and last
    seen, the latest first."""
    await _require_live_form(conn, scope, form_id)
    cur = await conn.execute(
        queries["form_drift"],
        {
            "organization_id": scope.organization_id,
            "form_id": form_id,
            "since": now - timedelta(days=DRIFT_DAYS),
            "limit": DRIFT_ROWS,
        },
    )
    return await cur.fetchall()


@scoped
async def list_schemas(
    conn: Conn, scope: OrgScope, *, form_id: str, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` schema versions of a live form after version `after`, oldest first."""
    await _require_live_form(conn, scope, form_id)
    cur = await conn.execute(
        queries["list_form_schemas"],
        {
            "organization_id": scope.organization_id,
            "form_id": form_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()
