"""`/v1/forms/{id}/schemas` and `/drift`: a form's JSON Schema versions (append-only, the
owner's and the suggested ones), adopting a suggestion, and the drift seen against them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.owner import form_schemas as schemas
from core.owner.form_schemas import SchemaFields
from core.platform.vocabulary import SchemaSource

router = APIRouter(tags=["schemas"], responses=problems(401, 503), route_class=AuditedRoute)


class FormSchema(BaseModel):
    """One schema version of a form."""

    model_config = ConfigDict(serialize_by_alias=True)

    version: int
    json_schema: dict[str, Any] = Field(alias="schema")
    source: SchemaSource
    created_at: datetime


def _schema(row: dict[str, Any]) -> FormSchema:
    return FormSchema.model_validate(
        {
            "version": row["version"],
            "schema": row["schema"],
            "source": row["source"],
            "created_at": row["created_at"],
        }
    )


@router.get("/forms/{form_id}/schemas", dependencies=[needs("read")], responses=problems(404, 422))
async def list_schemas(
    form_id: str, scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[FormSchema]:
    """The form's schema versions, oldest first (the last one is current)."""
    async with services.db.scoped(scope) as conn:
        rows = await schemas.list_schemas(
            conn, scope, form_id=form_id, after=page.after_number(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "version")
    return Page[FormSchema](data=[_schema(row) for row in data], next_cursor=cursor)


@router.post(
    "/forms/{form_id}/schemas",
    dependencies=[needs("configure", "schema.added", subject="form_id")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def add_schema(change: ChangeDep, form_id: str, body: SchemaFields) -> FormSchema:
    """Append version n+1 (source `manual`), which becomes the current schema. Refused with
    `invalid_schema` and the location when it is not a valid JSON Schema or is past a
    documented limit (size, remote or unresolvable references, reference cycles,
    composition depth and width, expanded size, patterns the linear-time engine refuses)."""
    row = await schemas.add_schema(change, form_id=form_id, schema=body.json_schema)
    return _schema(row)


@router.post(
    "/forms/{form_id}/schemas/{version}/adopt",
    dependencies=[needs("configure", "schema.adopted", subject="form_id")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def adopt_schema(change: ChangeDep, form_id: str, version: int) -> FormSchema:
    """Make a version (a suggestion, or an earlier version) the current schema: appends a
    `manual` version with its content."""
    row = await schemas.adopt_schema(change, form_id=form_id, version=version)
    return _schema(row)


class Drift(BaseModel):
    """Values that broke one rule of the schema: where and which keyword (never the values),
    how often, first and last seen."""

    path: str
    keyword: str
    count: int
    first_seen: datetime
    last_seen: datetime


@router.get("/forms/{form_id}/drift", dependencies=[needs("read")], responses=problems(404, 422))
async def form_drift(
    form_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> Page[Drift]:
    """What broke the form's schema over the last 30 days, per value path and keyword, the
    latest first: one page of at most 500 rows (`next_cursor` is always null)."""
    async with services.db.scoped(scope) as conn:
        rows = await schemas.drift_summary(conn, scope, form_id=form_id, now=now)
    return Page[Drift](data=[Drift.model_validate(row) for row in rows], next_cursor=None)
