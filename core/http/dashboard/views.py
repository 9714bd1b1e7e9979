"""The dashboard's pages: inbox, receipts, forms, destinations, alerts and events.

Every read and write goes through the same `core` functions as `/v1`; these handlers only
turn forms into their arguments and results into pages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import Response

from core.destinations.base import ValidationContext
from core.destinations.http import shared_client
from core.http.dashboard.pages import CheckedForm, SessionDep, render, see_other, services_of
from core.http.dashboard.sessions import DashboardSession
from core.http.v1.forms import submit_url
from core.http.v1.submissions import _position, submissions_attachment
from core.outbox import deliveries
from core.owner import alerts, destinations, events, forms, routes
from core.owner.forms import invalid_input
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput, NotFound, PostbagError
from core.platform.pagination import encode_cursor
from core.platform.services import Services
from core.platform.storage import storage_for
from core.submissions import records as submissions

router = APIRouter(prefix="/app", include_in_schema=False)
PAGE_SIZE = 50

_REASONS = {
    "values_erased": "the values were erased",
    "values_expired": "the values passed their retention",
    "destination_paused": "the destination is paused",
    "destination_removed": "the destination was removed",
    "attempts_exhausted": "every attempt failed",
    "email_log_only": "email is set to log only on this server",
}
_HTTP = re.compile(r"http_(\d{3})")


def detail_words(detail: str | None) -> str:
    """A delivery's last detail as shown, e.g. `http_503` as `HTTP 503`."""
    if not detail:
        return ""
    found = _HTTP.fullmatch(detail)
    return f"HTTP {found.group(1)}" if found else detail.replace("_", " ")


def reason_words(reason: str | None) -> str:
    """Why a delivery ended unsent, in words."""
    if not reason:
        return ""
    if _HTTP.fullmatch(reason):
        return f"the receiver answered {detail_words(reason)}"
    return _REASONS.get(reason, reason.replace("_", " "))


def delivery_state(line: Mapping[str, Any]) -> tuple[str, str]:
    """A delivery's state in words, and its CSS class."""
    status = line["status"]
    if status in ("pending", "sending"):
        return "Waiting to send", "wait"
    if status == "failed":
        return "Will try again", "retry"
    if status == "sent":
        return "Delivered", "ok"
    return "Not delivered", "bad"


def summary_line(counts: Mapping[str, int]) -> str:
    """The inbox's one-line delivery summary, e.g. `2 delivered, 1 will try again`."""
    if not counts:
        return "No deliveries"
    parts = []
    words = [
        (("sent",), "delivered"),
        (("pending", "sending"), "waiting"),
        (("failed",), "will try again"),
        (("dead", "skipped"), "not delivered"),
    ]
    for statuses, word in words:
        n = sum(counts.get(s, 0) for s in statuses)
        if n:
            parts.append(f"{n} {word}")
    return ", ".join(parts)


async def _open_alerts(services: Services, session: SessionDep) -> int:
    async with services.db.scoped(session.scope) as conn:
        found = await alerts.list_alerts(conn, session.scope, status="open", before=None, limit=100)
    return len(found)


async def page(
    request: Request, session: SessionDep, template: str, *, title: str, **context: Any
) -> Response:
    count = await _open_alerts(services_of(request), session)
    return render(request, template, title=title, open_alerts=count, **context)


# Inbox and receipts ----------------------------------------------------------------------


@router.get("")
async def inbox(
    request: Request,
    session: SessionDep,
    form: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
) -> Response:
    services, scope, now = services_of(request), session.scope, utcnow()
    form = form or None
    wanted = status or None
    if wanted not in (None, "accepted", "spam", "quarantined", "test"):
        raise InvalidInput("unknown status", [{"field": "status", "message": "unknown"}])
    async with services.db.scoped(scope) as conn:
        rows = await submissions.list_submissions(
            conn,
            scope,
            now=now,
            form_id=form,
            status=None if wanted == "test" else wanted,
            since=None,
            before=_position(cursor),
            limit=PAGE_SIZE + 1,
            flag="test" if wanted == "test" else None,
        )
        all_forms = await forms.list_forms(conn, scope, after=None, limit=500)
        counts = await submissions.delivery_counts(conn, scope, [row["id"] for row in rows])
    next_href = None
    if len(rows) > PAGE_SIZE:
        rows = rows[:PAGE_SIZE]
        last = rows[-1]
        query = {"form": form or "", "status": wanted or ""}
        query["cursor"] = encode_cursor([last["received_at"].isoformat(), last["id"]])
        next_href = "/app?" + urlencode(query)
    names = {f["id"]: f["name"] for f in all_forms}
    for row in rows:
        row["summary"] = summary_line(counts.get(row["id"], {}))
        row["form_name"] = names.get(row["form"], row["form"])
    return await page(
        request,
        session,
        "inbox.html",
        title="Inbox",
        active="/app",
        rows=rows,
        forms=all_forms,
        form=form,
        status=wanted,
        next_href=next_href,
    )


def _ordered_values(values: Mapping[str, Any] | None, labels: Mapping[str, str]) -> list[Any]:
    if values is None:
        return []
    order = [name for name in labels if name in values]
    order += [name for name in values if name not in labels]
    shown = []
    for name in order:
        value = values[name]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown.append((labels.get(name, name), name, text))
    return shown


async def _receipt(
    request: Request, session: SessionDep, submission_id: str, *, refusal: dict[str, str] | None
) -> Response:
    services, scope, now = services_of(request), session.scope, utcnow()
    async with services.db.scoped(scope) as conn:
        found = await submissions.get_submission(conn, scope, submission_id, now=now)
        try:
            form = await forms.get_form(conn, scope, form_id=found["form"])
        except PostbagError:
            form = {"id": found["form"], "name": found["form"], "labels": {}}
    for line in found["deliveries"]:
        line["state"], line["css"] = delivery_state(line)
        line["reason_words"] = reason_words(line.get("reason"))
        line["detail_words"] = detail_words(line.get("last_detail"))
        line["can_retry"] = line["status"] in ("failed", "dead", "skipped")
    return await page(
        request,
        session,
        "receipt.html",
        title=f"Receipt {submission_id}",
        active="/app",
        sub=found,
        form=form,
        values=_ordered_values(found["values"], form.get("labels") or {}),
        refusal=refusal,
        status_code=409 if refusal else 200,
    )


@router.get("/submissions/{submission_id}")
async def receipt(request: Request, session: SessionDep, submission_id: str) -> Response:
    return await _receipt(request, session, submission_id, refusal=None)


@router.post("/submissions/{submission_id}/deliveries/{delivery_id}/retry")
async def send_again(
    request: Request, session: SessionDep, _form: CheckedForm, submission_id: str, delivery_id: str
) -> Response:
    services, scope = services_of(request), session.scope
    try:
        async with services.db.scoped(scope) as conn:
            found = await deliveries.get_delivery(conn, scope, delivery_id)
            if found["submission"] != submission_id:
                raise NotFound(f"no delivery {delivery_id}")
            await deliveries.retry_delivery(conn, scope, delivery_id, now=utcnow())
    except PostbagError as exc:
        if isinstance(exc, NotFound):
            raise
        return await _receipt(
            request, session, submission_id, refusal={"id": delivery_id, "message": str(exc)}
        )
    return see_other(f"/app/submissions/{submission_id}")


@router.get("/submissions/{submission_id}/erase")
async def erase_confirm(request: Request, session: SessionDep, submission_id: str) -> Response:
    services, scope = services_of(request), session.scope
    async with services.db.scoped(scope) as conn:
        found = await submissions.get_submission(conn, scope, submission_id, now=utcnow())
    return await page(request, session, "erase.html", title="Erase values", sub=found)


@router.post("/submissions/{submission_id}/erase")
async def erase(
    request: Request, session: SessionDep, form: CheckedForm, submission_id: str
) -> Response:
    services, scope, now = services_of(request), session.scope, utcnow()
    if form.get("confirm") != "yes":
        return see_other(f"/app/submissions/{submission_id}/erase")
    async with services.db.scoped(scope) as conn:
        erasure = await submissions.erase_values(conn, scope, submission_id, now=now)
    if erasure.storage_keys:
        storage = storage_for(services.settings.storage_url)
        await submissions.delete_objects(services.db, scope, storage, erasure.storage_keys, now=now)
    return see_other(f"/app/submissions/{submission_id}")


@router.get("/submissions/{submission_id}/attachments/{attachment_id}")
async def download(
    request: Request, session: SessionDep, submission_id: str, attachment_id: str
) -> Response:
    return await submissions_attachment(
        submission_id, attachment_id, session.scope, services_of(request), utcnow()
    )


# Forms -----------------------------------------------------------------------------------


def _lines(value: Any) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def _json(form: FormData, name: str, default: Any) -> Any:
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidInput(
            f"{name} is not valid JSON", [{"field": name, "message": "not JSON"}]
        ) from None


def _int(form: FormData, name: str, default: int | None) -> int | None:
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a whole number", [{"field": name, "message": "not a number"}]
        ) from None


def _form_settings(form: FormData) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "name": str(form.get("name") or ""),
        "accepting": form.get("accepting") == "on",
        "allowed_origins": _lines(form.get("allowed_origins")),
        "honeypot_field": str(form.get("honeypot_field") or "_gotcha"),
        "redirect_url": str(form.get("redirect_url") or "") or None,
        "retention_days": _int(form, "retention_days", None),
        "rate_limit": {
            "max": _int(form, "rate_max", 10),
            "per_seconds": _int(form, "rate_per_seconds", 600),
        },
        "schema_mode": str(form.get("schema_mode") or "off"),
        "labels": _json(form, "labels", {}),
        "file_fields": _json(form, "file_fields", {}),
        "consent_field": str(form.get("consent_field") or "") or None,
        "ack_email": _json(form, "ack_email", None),
    }
    secret = str(form.get("turnstile_secret") or "")
    if secret:
        settings["turnstile_secret"] = secret
    if form.get("remove_turnstile") == "on":
        settings["turnstile_secret"] = None
    return settings


@router.get("/forms")
async def forms_list(request: Request, session: SessionDep) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        found = await forms.list_forms(conn, session.scope, after=None, limit=500)
    return await page(
        request, session, "forms.html", title="Forms", active="/app/forms", forms=found
    )


@router.get("/forms/new")
async def form_new(request: Request, session: SessionDep) -> Response:
    return await page(
        request, session, "form_edit.html", title="New form", active="/app/forms", form=None
    )


@router.post("/forms")
async def form_create(request: Request, session: SessionDep, posted: CheckedForm) -> Response:
    try:
        fields = forms.FormFields.model_validate(_form_settings(posted) | {"accepting": True})
    except ValidationError as exc:
        raise invalid_input(exc) from None
    async with services_of(request).db.scoped(session.scope) as conn:
        row = await forms.create_form(conn, session.scope, fields=fields)
    return see_other(f"/app/forms/{row['id']}")


@router.get("/forms/{form_id}")
async def form_detail(request: Request, session: SessionDep, form_id: str) -> Response:
    services, scope = services_of(request), session.scope
    async with services.db.scoped(scope) as conn:
        form = await forms.get_form(conn, scope, form_id=form_id)
        form_routes = await routes.list_routes(conn, scope, form_id=form_id, after=None, limit=100)
        dests = await destinations.list_destinations(conn, scope, after=None, limit=500)
    url = submit_url(services.settings, form_id)
    names = {d["id"]: d for d in dests}
    fetch = (
        f'await fetch("{url}", {{\n  method: "POST",\n'
        '  headers: {"Content-Type": "application/json", '
        '"Idempotency-Key": crypto.randomUUID()},\n'
        '  body: JSON.stringify({email: "ada@example.com", message: "Hello"}),\n});'
    )
    return await page(
        request,
        session,
        "form_edit.html",
        title=form["name"],
        active="/app/forms",
        form=form,
        submit_url=url,
        html_snippet=forms.html_snippet(form, url),
        fetch_snippet=fetch,
        routes=form_routes,
        destinations=dests,
        destination_names=names,
    )


@router.post("/forms/{form_id}")
async def form_update(
    request: Request, session: SessionDep, posted: CheckedForm, form_id: str
) -> Response:
    settings = _form_settings(posted)
    try:
        patch = forms.FormPatch.model_validate(settings)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    return await _patch_form(request, session, form_id, patch)


@router.post("/forms/{form_id}/accepting")
async def form_accepting(
    request: Request, session: SessionDep, posted: CheckedForm, form_id: str
) -> Response:
    patch = forms.FormPatch(accepting=posted.get("accepting") == "on")
    return await _patch_form(request, session, form_id, patch)


async def _patch_form(
    request: Request, session: DashboardSession, form_id: str, patch: forms.FormPatch
) -> Response:
    """Apply a form change through the same core call as `PATCH /v1/forms/{id}`."""
    async with services_of(request).db.scoped(session.scope) as conn:
        await forms.update_form(conn, session.scope, form_id=form_id, patch=patch)
    return see_other(f"/app/forms/{form_id}")


@router.post("/forms/{form_id}/routes")
async def route_create(
    request: Request, session: SessionDep, posted: CheckedForm, form_id: str
) -> Response:
    mode = str(posted.get("mode") or "immediate")
    data: dict[str, Any] = {"destination_id": str(posted.get("destination_id") or ""), "mode": mode}
    if mode == "digest":
        data["period"] = str(posted.get("period") or "daily")
    try:
        fields = routes.RouteFields.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    async with services_of(request).db.scoped(session.scope) as conn:
        await routes.create_route(conn, session.scope, form_id=form_id, fields=fields)
    return see_other(f"/app/forms/{form_id}")


@router.post("/forms/{form_id}/routes/{route_id}/delete")
async def route_delete(
    request: Request, session: SessionDep, _posted: CheckedForm, form_id: str, route_id: str
) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        await routes.delete_route(conn, session.scope, route_id=route_id)
    return see_other(f"/app/forms/{form_id}")


# Destinations ----------------------------------------------------------------------------


def _context(services: Services) -> ValidationContext:
    return ValidationContext(allow_private_targets=services.settings.allow_private_targets)


def _config(kind: str, posted: FormData) -> dict[str, Any]:
    if kind == "webhook":
        return {"url": str(posted.get("url") or "")}
    if kind == "email":
        return {"to": [a.strip() for a in str(posted.get("to") or "").split(",") if a.strip()]}
    return {"chat_id": str(posted.get("chat_id") or "")}


async def _destinations_page(
    request: Request, session: SessionDep, test: dict[str, Any] | None = None
) -> Response:
    services, scope = services_of(request), session.scope
    async with services.db.scoped(scope) as conn:
        found = await destinations.list_destinations(conn, scope, after=None, limit=500)
        rates = await destinations.success_rates(conn, scope, now=utcnow())
    for row in found:
        row["shown"] = submissions.redacted_target(row["type"], row["config"]) or {}
        rate = rates.get(row["id"])
        row["rate"] = "no deliveries in 7 days" if rate is None else f"{rate:.0%} delivered"
    return await page(
        request,
        session,
        "destinations.html",
        title="Destinations",
        active="/app/destinations",
        destinations=found,
        test=test,
    )


@router.get("/destinations")
async def destinations_list(request: Request, session: SessionDep) -> Response:
    return await _destinations_page(request, session)


@router.post("/destinations")
async def destination_create(
    request: Request, session: SessionDep, posted: CheckedForm
) -> Response:
    services = services_of(request)
    kind = str(posted.get("type") or "webhook")
    data: dict[str, Any] = {
        "type": kind,
        "name": str(posted.get("name") or ""),
        "config": _config(kind, posted),
    }
    if posted.get("secret"):
        data["secret"] = str(posted.get("secret"))
    try:
        fields = destinations.DestinationFields.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    async with services.db.scoped(session.scope) as conn:
        await destinations.create_destination(
            conn, session.scope, fields=fields, ctx=_context(services)
        )
    return see_other("/app/destinations")


@router.post("/destinations/{destination_id}")
async def destination_update(
    request: Request, session: SessionDep, posted: CheckedForm, destination_id: str
) -> Response:
    services = services_of(request)
    data: dict[str, Any] = {}
    if "enabled" in posted:
        data["enabled"] = posted.get("enabled") == "on"
    if posted.get("name"):
        data["name"] = str(posted.get("name"))
    if posted.get("secret"):
        data["secret"] = str(posted.get("secret"))
    try:
        patch = destinations.DestinationPatch.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    async with services.db.scoped(session.scope) as conn:
        await destinations.update_destination(
            conn, session.scope, destination_id=destination_id, patch=patch, ctx=_context(services)
        )
    return see_other("/app/destinations")


@router.post("/destinations/{destination_id}/test")
async def destination_test(
    request: Request, session: SessionDep, _posted: CheckedForm, destination_id: str
) -> Response:
    services = services_of(request)
    async with services.db.scoped(session.scope) as conn:
        found = await deliveries.destination_for_test(conn, session.scope, destination_id)
    result = await deliveries.send_sample(
        found, settings=services.settings, http=shared_client(), now=utcnow()
    )
    return await _destinations_page(request, session, test={"id": destination_id, **result})


@router.get("/destinations/{destination_id}/delete")
async def destination_delete_confirm(
    request: Request, session: SessionDep, destination_id: str
) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        found = await destinations.get_destination(
            conn, session.scope, destination_id=destination_id
        )
    return await page(
        request, session, "destination_delete.html", title="Delete destination", dest=found
    )


@router.post("/destinations/{destination_id}/delete")
async def destination_delete(
    request: Request, session: SessionDep, _posted: CheckedForm, destination_id: str
) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        await destinations.delete_destination(conn, session.scope, destination_id=destination_id)
    return see_other("/app/destinations")


# Alerts and events -----------------------------------------------------------------------


@router.get("/alerts")
async def alerts_list(request: Request, session: SessionDep) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        found = await alerts.list_alerts(conn, session.scope, status="open", before=None, limit=100)
    return await page(
        request, session, "alerts.html", title="Alerts", active="/app/alerts", alerts=found
    )


@router.post("/alerts/{alert_id}/acknowledge")
async def alert_ack(
    request: Request, session: SessionDep, _posted: CheckedForm, alert_id: str
) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        await alerts.acknowledge(conn, session.scope, alert_id, now=utcnow())
    return see_other("/app/alerts")


@router.get("/events")
async def events_list(request: Request, session: SessionDep) -> Response:
    async with services_of(request).db.scoped(session.scope) as conn:
        found = await events.recent_events(conn, session.scope, limit=200)
    return await page(
        request, session, "events.html", title="Events", active="/app/events", events=found
    )
