"""The audit page: the organization's audit trail with `/v1/audit`'s filters, and its CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from core.http.access import AuditedRoute
from core.http.dashboard.pages import SessionDep, page_needs
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.http.v1.audit import before_seq
from core.owner import audit
from core.platform.errors import InvalidInput
from core.platform.pagination import encode_cursor
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.submissions.export import csv_cell

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
PAGE_SIZE = 100
_CSV_BATCH = 1000
COLUMNS = [
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
    "changed",
    "id",
    "prev_hash",
    "hash",
]


def _filters(
    actor: str | None, action: str | None, subject: str | None, since: str | None
) -> dict[str, Any]:
    """The page's filters as the query takes them (empty fields are no filter)."""
    when = None
    if since:
        try:
            when = datetime.fromisoformat(since)
        except ValueError:
            raise InvalidInput(
                "since is a date or a time", [{"field": "since", "message": "e.g. 2026-12-01"}]
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
    for name, value in (("actor", actor), ("action", action), ("subject", subject)):
        if value is not None and len(value) > 200:
            raise InvalidInput(f"{name} is too long", [{"field": name, "message": "too long"}])
    return {
        "actor": actor or None,
        "action": action or None,
        "subject": subject or None,
        "since": when,
    }


@router.get("/audit", dependencies=[page_needs("read_audit")])
async def audit_page(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    actor: str | None = None,
    action: str | None = None,
    subject: str | None = None,
    since: str | None = None,
    cursor: str | None = None,
) -> Response:
    found = _filters(actor, action, subject, since)
    async with services.db.scoped(session.scope) as conn:
        rows = await audit.list_audit(
            conn, session.scope, **found, before=before_seq(cursor), limit=PAGE_SIZE + 1
        )
    shown = {
        "actor": actor or "",
        "action": action or "",
        "subject": subject or "",
        "since": since or "",
    }
    next_href = None
    if len(rows) > PAGE_SIZE:
        rows = rows[:PAGE_SIZE]
        next_href = "/app/audit?" + urlencode({**shown, "cursor": encode_cursor([rows[-1]["seq"]])})
    return await page(
        request,
        services,
        session,
        "audit.html",
        title="Audit",
        active="/app/audit",
        rows=rows,
        next_href=next_href,
        csv_href="/app/audit.csv?" + urlencode(shown),
        **shown,
    )


async def _csv(services: Services, scope: OrgScope, found: dict[str, Any]) -> AsyncIterator[str]:
    """Every matching row, newest first, in batches (each its own short transaction)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    yield buffer.getvalue()
    before = None
    while True:
        async with services.db.scoped(scope) as conn:
            rows = await audit.list_audit(conn, scope, **found, before=before, limit=_CSV_BATCH)
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        for row in rows:
            at: datetime = row["at"]
            cells = {**row, "at": at.isoformat(), "changed": " ".join(row["changed"] or [])}
            writer.writerow(csv_cell(cells[name]) for name in COLUMNS)
        yield buffer.getvalue()
        if len(rows) < _CSV_BATCH:
            return
        before = rows[-1]["seq"]


@router.get("/audit.csv", dependencies=[page_needs("read_audit")])
async def audit_csv(
    services: ServicesDep,
    session: SessionDep,
    actor: str | None = None,
    action: str | None = None,
    subject: str | None = None,
    since: str | None = None,
) -> StreamingResponse:
    """The audit trail with the page's filters as CSV, newest first (formula-safe cells)."""
    found = _filters(actor, action, subject, since)
    return StreamingResponse(
        _csv(services, session.scope, found),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="audit.csv"'},
    )
