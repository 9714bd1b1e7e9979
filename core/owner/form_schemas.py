"""Form schemas: the versions (`core.owner.schema_versions`, as a stream's), suggestions
adopted by the owner; the drift summary."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.owner import schema_versions
from core.owner.changes import Change
from core.owner.schema_versions import FORM
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

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


@scoped
async def append_schema(
    conn: Conn, scope: OrgScope, *, form_id: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """Append the form's next schema version (source `manual`); versions are never edited.

    Refused with InvalidSchema past a limit of `core.schemas.limits`, and with
    PlanLimitReached once the form has the plan's number of versions.
    """
    return await schema_versions.append(conn, scope, FORM, form_id, schema, source="manual")


@scoped
async def adopt_version(
    conn: Conn, scope: OrgScope, *, form_id: str, version: int
) -> dict[str, Any]:
    """Make a version the form's current schema: append a `manual` copy of its content
    (checked as any schema the owner writes)."""
    return await schema_versions.adopt(conn, scope, FORM, form_id, version)


async def add_schema(change: Change, *, form_id: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Append the form's next schema version (`append_schema`) as the change."""
    async with change as conn:
        return await append_schema(conn, change.scope, form_id=form_id, schema=schema)


async def adopt_schema(change: Change, *, form_id: str, version: int) -> dict[str, Any]:
    """Make a version the form's current schema (`adopt_version`) as the change."""
    async with change as conn:
        return await adopt_version(conn, change.scope, form_id=form_id, version=version)


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
    await schema_versions.require_live(conn, scope, FORM, form_id)
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
    return await schema_versions.page(conn, scope, FORM, form_id, after=after, limit=limit)
