"""`/v1/audit`: the organization's audit trail, newest first (docs/teams.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, problems
from core.owner import audit
from core.owner.audit_export import ExportFormat, export_lines
from core.platform.errors import InvalidInput
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from core.platform.vocabulary import AuditActorKind, AuditVia

router = APIRouter(tags=["audit"], responses=problems(401, 503), route_class=AuditedRoute)


class AuditActor(BaseModel):
    """Who acted: a member, an API key, or the operator's command line."""

    kind: AuditActorKind
    id: str
    name: str


class AuditRow(BaseModel):
    """One change or read of visitors' data; never the values themselves."""

    id: str
    seq: int = Field(description="the row's place in the organization's chain, from 1")
    at: datetime
    actor: AuditActor
    action: str = Field(description="e.g. `form.updated`, `submission.read` (docs/teams.md)")
    subject: str | None = Field(description="the id of the object acted on")
    via: AuditVia
    ip: str | None
    user_agent: str | None
    changed: list[str] | None = Field(
        default=None,
        description="the names of the settings a change changed (`form.updated`), never "
        "their values; null otherwise",
    )
    prev_hash: str
    hash: str = Field(description="SHA-256 of `prev_hash` and the row's content (hex)")


def audit_row(row: dict[str, Any]) -> AuditRow:
    """A stored row as answered."""
    actor = AuditActor(kind=row["actor_kind"], id=row["actor_id"], name=row["actor_name"])
    return AuditRow.model_validate({**row, "actor": actor})


def before_seq(cursor: str | None) -> int | None:
    """The chain position a cursor of this list stands for."""
    position = decode_cursor(cursor)
    if position is None:
        return None
    if len(position) != 1 or not isinstance(position[0], int) or isinstance(position[0], bool):
        raise InvalidInput("malformed cursor", [{"field": "cursor", "message": "malformed"}])
    return position[0]


@router.get("/audit", dependencies=[needs("read_audit")], responses=problems(422))
async def list_audit(
    scope: ScopeDep,
    services: ServicesDep,
    actor: Annotated[
        str | None, Query(max_length=200, description="an actor's id or name, exactly")
    ] = None,
    action: Annotated[str | None, Query(max_length=100, description="an action, exactly")] = None,
    subject: Annotated[str | None, Query(max_length=200, description="an object's id")] = None,
    since: Annotated[datetime | None, Query(description="at or after")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Page[AuditRow]:
    """The audit trail, newest first, filtered (the admin role and above)."""
    before = before_seq(cursor)
    async with services.db.scoped(scope) as conn:
        rows = await audit.list_audit(
            conn,
            scope,
            actor=actor,
            action=action,
            subject=subject,
            since=since,
            before=before,
            limit=limit + 1,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return Page[AuditRow](
        data=[audit_row(row) for row in rows],
        next_cursor=encode_cursor([rows[-1]["seq"]]) if more else None,
    )


_MEDIA_TYPES = {"ndjson": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}


@router.get(
    "/audit/export",
    dependencies=[needs("read_audit")],
    response_class=StreamingResponse,
    responses=problems(422),
)
async def export_audit(
    scope: ScopeDep,
    services: ServicesDep,
    since: Annotated[datetime | None, Query(description="rows at or after this time")] = None,
    until: Annotated[datetime | None, Query(description="rows before this time")] = None,
    format: Annotated[ExportFormat, Query(description="`ndjson` (default) or `csv`")] = "ndjson",
) -> StreamingResponse:
    """The audit trail in chain order, oldest first, each row with `prev_hash` and `hash`
    (the CSV also with the exact `content` the hash covers), so that an outside system can
    recompute the chain (the admin role and above)."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise InvalidInput(f"{name} needs a time zone", [{"field": name, "message": "e.g. Z"}])
    if since is not None and until is not None and until <= since:
        raise InvalidInput(
            "until is not after since", [{"field": "until", "message": "after since"}]
        )
    return StreamingResponse(
        export_lines(services.db, scope, since=since, until=until, fmt=format),
        media_type=_MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="audit.{format}"'},
    )
