"""`/v1/submissions`: list, read, erase, release, mark as spam, download attachments, export
CSV."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field
from starlette.responses import StreamingResponse

from core.http.access import AuditedRoute, ChangeDep, audit_as
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import AccessDep, ScopeDep, needs
from core.http.v1.shared import REPLICA_READ, Page, problems, read_one, replica_lag_headers
from core.owner.roles import require
from core.platform.ids import id_pattern
from core.platform.pagination import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    decode_time_cursor,
    encode_time_cursor,
)
from core.platform.storage import storage_for
from core.platform.vocabulary import SubmissionFlag, SubmissionReason, SubmissionStatus
from core.spam.model import weighed_tokens
from core.submissions.erasure import erase_submission
from core.submissions.export import FROM_THE_START, export_csv, export_fields, resume_after
from core.submissions.records import get_attachment, get_submission, list_submissions
from core.submissions.review import mark_spam, release_submission
from core.submissions.search import SEARCH_CHARS

router = APIRouter(tags=["submissions"], responses=problems(401, 503), route_class=AuditedRoute)


class SubmissionSummary(BaseModel):
    """A submission as listed: its receipt and state, without values."""

    id: str
    form: str
    status: SubmissionStatus
    reason: SubmissionReason | None = Field(description="why it is quarantined or spam")
    flags: list[SubmissionFlag]
    received_at: datetime
    erase_at: datetime | None = Field(description="when the values pass their retention")
    erased_at: datetime | None
    values_state: Literal["present", "erased", "expired"]


@router.get(
    "/submissions", dependencies=[needs("read")], responses={**problems(422), **REPLICA_READ}
)
async def submissions_list(
    request: Request,
    response: Response,
    access: AccessDep,
    services: ServicesDep,
    now: NowDep,
    form: str | None = None,
    status: SubmissionStatus | None = None,
    since: datetime | None = None,
    q: Annotated[
        str | None,
        Query(
            max_length=SEARCH_CHARS,
            description=(
                "words the values must hold anywhere, in any case (`ada` finds "
                'ada@example.com; "a phrase", -word to exclude; at most 8 terms, one with 3 '
                "letters or digits in a row); erased and expired values are never found"
            ),
        ),
    ] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Page[SubmissionSummary]:
    """The organization's submissions, newest first, without values; `q` searches them
    (the operator role and above: the words found are the values; a search is recorded,
    never its text)."""
    if q is not None:
        require(access.actor, "read_values")
        audit_as(
            request, action="submission.searched", subject=form or access.scope.organization_id
        )
    scope = access.scope
    response.headers.update(replica_lag_headers(await services.db.replica_lag()))
    async with services.db.reading(scope) as conn:
        page = await list_submissions(
            conn,
            scope,
            now=now,
            form_id=form,
            status=status,
            since=since,
            before=decode_time_cursor(cursor),
            limit=limit + 1,
            q=q,
        )
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_cursor = encode_time_cursor(last["received_at"], last["id"])
    return Page[SubmissionSummary](
        data=[SubmissionSummary(**row) for row in page], next_cursor=next_cursor
    )


@router.get(
    "/submissions/export.csv",
    dependencies=[needs("read_values", "export.downloaded", subject="form")],
    response_class=StreamingResponse,
    responses={**problems(404, 422), **REPLICA_READ},
)
async def submissions_export(
    scope: ScopeDep,
    services: ServicesDep,
    now: NowDep,
    form: str,
    after: Annotated[
        str | None,
        Query(pattern=id_pattern("sub"), description="only the submissions after this receipt"),
    ] = None,
    limit: Annotated[int | None, Query(ge=1, description="at most this many rows")] = None,
) -> StreamingResponse:
    """A form's submissions received before the export began, oldest first, as CSV: its
    declared fields, then the names first seen, at most 200 field columns; formula-safe
    cells."""
    async with services.db.scoped(scope) as conn:
        fields = await export_fields(conn, scope, form, now=now)
        start = await resume_after(conn, scope, form, after) if after else FROM_THE_START
    lag = await services.db.replica_lag()
    return StreamingResponse(
        export_csv(services.db, scope, form, fields, now=now, start=start, limit=limit),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{form}.csv"',
            **replica_lag_headers(lag),
        },
    )


@router.get(
    "/submissions/{submission_id}",
    dependencies=[needs("read_values", "submission.read")],
    responses=problems(404, 422),
)
async def submissions_get(
    submission_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """One submission with values (unless erased or expired), attachments and deliveries;
    one the learned filter judged has its `spam_score` and the `spam_tokens` that weigh
    most now."""
    async with services.db.scoped(scope) as conn:
        found = await get_submission(conn, scope, submission_id, now=now)
        found["spam_tokens"] = await weighed_tokens(
            conn, scope.organization_id, found, services.settings.require_secret_key()
        )
    return found


@router.post(
    "/submissions/{submission_id}/erase",
    dependencies=[needs("operate", "submission.erased")],
    responses=problems(404, 422),
)
async def submissions_erase(
    change: ChangeDep, submission_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Erase values and files now; unsent deliveries end `skipped` (`values_erased`)."""
    await erase_submission(
        change, submission_id, storage_url=services.settings.storage_url, now=now
    )
    return await read_one(services, scope, get_submission, submission_id, now=now)


@router.post(
    "/submissions/{submission_id}/release",
    dependencies=[needs("operate", "submission.released")],
    responses=problems(404, 409, 422),
)
async def submissions_release(
    change: ChangeDep, submission_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Release a quarantined or spam submission: it becomes `accepted` and the form's live
    routes that take accepted submissions get one delivery each, once (`409
    already_released` after). Answers the submission."""
    await release_submission(change, services, submission_id, now=now)
    return await read_one(services, scope, get_submission, submission_id, now=now)


@router.post(
    "/submissions/{submission_id}/spam",
    dependencies=[needs("operate", "submission.marked_spam")],
    responses=problems(404, 409, 422),
)
async def submissions_spam(
    change: ChangeDep, submission_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Mark a submission as spam: unsent deliveries end `skipped` (`submission_spam`).
    Answers the submission."""
    await mark_spam(change, services, submission_id, now=now)
    return await read_one(services, scope, get_submission, submission_id, now=now)


@router.get(
    "/submissions/{submission_id}/attachments/{attachment_id}",
    dependencies=[needs("read_values", "attachment.downloaded", subject="submission_id")],
    responses=problems(404, 409, 422),
)
async def submissions_attachment(
    submission_id: str, attachment_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> StreamingResponse:
    """The attachment's bytes, as a download with its sniffed type."""
    async with services.db.scoped(scope) as conn:
        found = await get_attachment(conn, scope, submission_id, attachment_id, now=now)
    chunks = storage_for(services.settings.storage_url).read(found.storage_key)
    first = await anext(chunks, b"")  # a missing object is a 404 before any header is sent

    async def body() -> Any:
        yield first
        async for chunk in chunks:
            yield chunk

    return StreamingResponse(
        body(),
        media_type=found.content_type,
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(found.name)}",
            "Content-Length": str(found.size),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "private, no-store",
        },
    )
