"""A submission's receipt (values, files, deliveries, history): send again, deliver anyway,
mark as spam, erase, download."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep, audit_as
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import (
    delivery_state,
    detail_words,
    page,
    reason_words,
    target_text,
)
from core.http.deps import ServicesDep
from core.http.v1.submissions import submissions_attachment
from core.outbox import deliveries
from core.owner import forms
from core.owner.changes import Change
from core.owner.roles import may
from core.owner.spam_report import spam_reason_words
from core.platform.clock import utcnow
from core.platform.errors import NotFound, PostbagError
from core.platform.services import Services
from core.spam.model import weighed_tokens
from core.spam.settings import spam_settings
from core.submissions import records
from core.submissions.erasure import erase_submission
from core.submissions.review import Review, mark_spam, release_submission

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


def _shown_values(values: Mapping[str, Any] | None, labels: Mapping[str, str]) -> list[Any]:
    """(label, name, text) per value, in the order `records` gives them (the visitor's)."""
    shown = []
    for name, value in (values or {}).items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown.append((labels.get(name, name), name, text))
    return shown


def _was(data: Mapping[str, Any]) -> str:
    status = str(data.get("from_status") or "")
    reason = data.get("from_reason")
    return status + (f" · {str(reason).replace('_', ' ')}" if reason else "")


def _history_line(event: Mapping[str, Any], spam_words: Callable[[str | None], str]) -> str:
    """One event of the submission in words; a release or spam mark names what it was, a
    spam verdict why (`Received as spam: 12 links, more than 5`)."""
    data: Mapping[str, Any] = event.get("data") or {}
    kind = str(event["type"]).removeprefix("submission.")
    if kind == "received":
        status = data.get("status", "accepted")
        why = spam_words(data.get("reason")) if status == "spam" else ""
        return f"Received as {status}" + (f": {why}" if why else "")
    if kind == "quarantined":
        return f"Quarantined · {str(data.get('reason') or '').replace('_', ' ')}"
    if kind == "released":
        return f"Released (was {_was(data)}): {data.get('deliveries', 0)} deliveries planned"
    if kind == "marked_spam":
        return f"Marked as spam (was {_was(data)}): {data.get('skipped', 0)} deliveries skipped"
    if kind == "erased":
        return "Erased on request" if data.get("reason") == "requested" else "Erased at retention"
    return kind.replace("_", " ").capitalize()


async def _receipt(
    request: Request,
    services: Services,
    session: SessionDep,
    submission_id: str,
    *,
    refusal: dict[str, str] | None,
) -> Response:
    scope, now = session.scope, utcnow()
    async with services.db.scoped(scope) as conn:
        found = await records.get_submission(conn, scope, submission_id, now=now)
        spam_tokens = await weighed_tokens(
            conn, scope.organization_id, found, services.settings.require_secret_key()
        )
        try:
            form = await forms.get_form(conn, scope, form_id=found["form"])
        except PostbagError:
            form = {"id": found["form"], "name": found["form"], "labels": {}, "spam": {}}
    for line in found["deliveries"]:
        line["state"], line["css"] = delivery_state(line)
        line["reason_words"] = reason_words(line.get("reason"))
        line["detail_words"] = detail_words(line.get("last_detail"))
        line["can_retry"] = line["status"] in ("failed", "dead", "skipped")
        line["target_text"] = target_text(line["target"])
    readable = may(session.role, "read_values")
    settings = spam_settings(form.get("spam"))

    def spam_words(reason: str | None) -> str:
        # A viewer reads the threshold, never a count taken from the values.
        return spam_reason_words(
            reason,
            settings=settings,
            values=found["values"] if readable else None,
            score=found.get("spam_score"),
        )

    history = [(event["at"], _history_line(event, spam_words)) for event in found["history"]]
    found["reason_words"] = spam_words(found["reason"]) if found["status"] == "spam" else ""
    if readable:
        audit_as(request, action="submission.read")
    else:
        # A viewer sees the receipt, its statuses and delivery states: no value, no file
        # name, no target, no word the filter weighed (and reads nothing the trail records).
        found["values"], found["attachments"], spam_tokens = None, [], []
        for line in found["deliveries"]:
            line["target"] = None
    present = found["values_state"] == "present"
    return await page(
        request,
        services,
        session,
        "receipt.html",
        title=f"Receipt {submission_id}",
        active="/app",
        sub=found,
        form=form,
        values=_shown_values(found["values"], form.get("labels") or {}),
        history=history,
        spam_tokens=spam_tokens,
        can_release=present and found["status"] != "accepted" and not found["released_at"],
        can_mark_spam=present and found["status"] != "spam",
        # Marked as spam after it went out: the receipt says so rather than "not delivered".
        delivered=any(line["status"] == "sent" for line in found["deliveries"]),
        refusal=refusal,
        status_code=409 if refusal else 200,
    )


@router.get("/submissions/{submission_id}", dependencies=[page_needs("read")])
async def receipt(
    request: Request, services: ServicesDep, session: SessionDep, submission_id: str
) -> Response:
    return await _receipt(request, services, session, submission_id, refusal=None)


@router.post(
    "/submissions/{submission_id}/deliveries/{delivery_id}/retry",
    dependencies=[page_needs("operate", "delivery.retried")],
)
async def send_again(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    _form: CheckedForm,
    submission_id: str,
    delivery_id: str,
) -> Response:
    try:
        await deliveries.retry_delivery(
            change, services, delivery_id, now=utcnow(), submission_id=submission_id
        )
    except PostbagError as exc:
        if isinstance(exc, NotFound):
            raise
        return await _receipt(
            request,
            services,
            session,
            submission_id,
            refusal={"id": delivery_id, "message": str(exc)},
        )
    return see_other(f"/app/submissions/{submission_id}")


async def _review(
    change: Change,
    request: Request,
    services: Services,
    session: SessionDep,
    submission_id: str,
    action: Callable[..., Awaitable[Review]],
) -> Response:
    try:
        await action(change, services, submission_id, now=utcnow())
    except PostbagError as exc:
        if isinstance(exc, NotFound):
            raise
        return await _receipt(
            request,
            services,
            session,
            submission_id,
            refusal={"id": "review", "message": str(exc)},
        )
    return see_other(f"/app/submissions/{submission_id}")


@router.post(
    "/submissions/{submission_id}/release",
    dependencies=[page_needs("operate", "submission.released")],
)
async def deliver_anyway(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    _form: CheckedForm,
    submission_id: str,
) -> Response:
    return await _review(change, request, services, session, submission_id, release_submission)


@router.post(
    "/submissions/{submission_id}/spam",
    dependencies=[page_needs("operate", "submission.marked_spam")],
)
async def mark_as_spam(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    _form: CheckedForm,
    submission_id: str,
) -> Response:
    return await _review(change, request, services, session, submission_id, mark_spam)


@router.get("/submissions/{submission_id}/erase", dependencies=[page_needs("operate")])
async def erase_confirm(
    request: Request, services: ServicesDep, session: SessionDep, submission_id: str
) -> Response:
    scope = session.scope
    async with services.db.scoped(scope) as conn:
        found = await records.get_submission(conn, scope, submission_id, now=utcnow())
    return await page(request, services, session, "erase.html", title="Erase values", sub=found)


@router.post(
    "/submissions/{submission_id}/erase", dependencies=[page_needs("operate", "submission.erased")]
)
async def erase(
    change: ChangeDep, services: ServicesDep, form: CheckedForm, submission_id: str
) -> Response:
    if form.get("confirm") != "yes":
        return see_other(f"/app/submissions/{submission_id}/erase")
    await erase_submission(
        change, submission_id, storage_url=services.settings.storage_url, now=utcnow()
    )
    return see_other(f"/app/submissions/{submission_id}")


@router.get(
    "/submissions/{submission_id}/attachments/{attachment_id}",
    dependencies=[page_needs("read_values", "attachment.downloaded", subject="submission_id")],
)
async def download(
    services: ServicesDep, session: SessionDep, submission_id: str, attachment_id: str
) -> Response:
    return await submissions_attachment(
        submission_id, attachment_id, session.scope, services, utcnow()
    )
