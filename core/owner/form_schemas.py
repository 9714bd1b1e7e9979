"""Form schemas: append-only JSON Schema versions, checked against their meta-schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field

from core.owner.usage import reserve_schema_version
from core.platform.db import Conn
from core.platform.errors import InvalidSchema, NotFound
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

MAX_SCHEMA_BYTES = 64 * 1024


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


def check_schema(schema: dict[str, Any]) -> None:
    """Refuse, with InvalidSchema, what is not a valid JSON Schema of a sensible size."""
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidSchema(
            "the schema is too large",
            [{"field": "schema", "message": f"at most {MAX_SCHEMA_BYTES} bytes of JSON"}],
        )
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except SchemaError as exc:
        where = ".".join(["schema", *(str(part) for part in exc.absolute_path)])
        raise InvalidSchema(
            "the schema is not a valid JSON Schema", [{"field": where, "message": exc.message}]
        ) from None


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

    Refused with PlanLimitReached once the form has the plan's number of versions.
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
async def list_schemas(
    conn: Conn, scope: OrgScope, *, form_id: str, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` schema versions of a live form after version `after`, oldest first."""
    cur = await conn.execute(
        queries["get_form"], {"id": form_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no form {form_id}")
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
