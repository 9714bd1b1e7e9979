"""The inbox: the organization's submissions, newest first, with a delivery summary each."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from core.http.access import AuditedRoute, audit_as, reads_fresh
from core.http.dashboard.pages import SessionDep, page_needs
from core.http.dashboard.shared import page, summary_line, troubled
from core.http.deps import ServicesDep
from core.http.v1.submissions import submissions_export
from core.owner import forms
from core.owner.roles import require
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput
from core.platform.pagination import decode_time_cursor, encode_time_cursor
from core.submissions import records

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
PAGE_SIZE = 50
# Past this lag (seconds) of the read replica, the inbox says how old what it shows is.
LAG_NOTICE_SECONDS = 5.0


@router.get("", dependencies=[page_needs("read")])
async def inbox(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    form: str | None = None,
    status: str | None = None,
    q: str | None = None,
    cursor: str | None = None,
) -> Response:
    scope, now = session.scope, utcnow()
    form = form or None
    wanted = status or None
    q = (q or "").strip() or None
    if wanted not in (None, "accepted", "spam", "quarantined", "test"):
        raise InvalidInput("unknown status", [{"field": "status", "message": "unknown"}])
    if q is not None:
        require(session.actor, "read_values")  # the words found are the values
        audit_as(request, action="submission.searched", subject=form or scope.organization_id)
    fresh = reads_fresh(request)
    lag = await services.db.replica_lag(fresh=fresh)
    async with services.db.reading(scope, fresh=fresh) as conn:
        rows = await records.list_submissions(
            conn,
            scope,
            now=now,
            form_id=form,
            status=None if wanted == "test" else wanted,
            since=None,
            before=decode_time_cursor(cursor),
            limit=PAGE_SIZE + 1,
            flag="test" if wanted == "test" else None,
            q=q,
        )
        all_forms = await forms.list_forms(conn, scope, after=None, limit=500)
        counts = await records.delivery_counts(conn, scope, [row["id"] for row in rows])
    next_href = None
    if len(rows) > PAGE_SIZE:
        rows = rows[:PAGE_SIZE]
        last = rows[-1]
        query = {"form": form or "", "status": wanted or "", "q": q or ""}
        query["cursor"] = encode_time_cursor(last["received_at"], last["id"])
        next_href = "/app?" + urlencode(query)
    names = {f["id"]: f["name"] for f in all_forms}
    for row in rows:
        row["summary"] = summary_line(counts.get(row["id"], {}))
        row["trouble"] = troubled(counts.get(row["id"], {}))
        row["form_name"] = names.get(row["form"], row["form"])
    return await page(
        request,
        services,
        session,
        "inbox.html",
        title="Inbox",
        active="/app",
        rows=rows,
        forms=all_forms,
        form=form,
        status=wanted,
        q=q,
        export_href=f"/app/export.csv?{urlencode({'form': form})}" if form else None,
        next_href=next_href,
        lag_seconds=(
            round(lag.seconds)
            if lag is not None and lag.seconds is not None and lag.seconds > LAG_NOTICE_SECONDS
            else None
        ),
    )


@router.get(
    "/export.csv", dependencies=[page_needs("read_values", "export.downloaded", subject="form")]
)
async def inbox_export(services: ServicesDep, session: SessionDep, form: str) -> StreamingResponse:
    """The selected form's submissions as CSV: the API's export, for the signed-in owner."""
    return await submissions_export(session.scope, services, utcnow(), form)
