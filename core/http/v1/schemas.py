"""`/v1/forms/{id}/schemas`: a form's JSON Schema versions, append-only."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, PageDep, problems
from core.owner import form_schemas as schemas
from core.owner.form_schemas import SchemaFields
from core.platform.vocabulary import SchemaSource

router = APIRouter(tags=["schemas"], responses=problems(401, 503))


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


@router.get("/forms/{form_id}/schemas", responses=problems(404, 422))
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


@router.post("/forms/{form_id}/schemas", status_code=201, responses=problems(402, 404, 422))
async def add_schema(
    form_id: str, body: SchemaFields, scope: ScopeDep, services: ServicesDep
) -> FormSchema:
    """Append version n+1; the schema must be valid against its JSON Schema meta-schema."""
    async with services.db.scoped(scope) as conn:
        row = await schemas.add_schema(conn, scope, form_id=form_id, schema=body.json_schema)
    return _schema(row)
