"""Destinations: their 7-day delivery rate, create, change, send a test, delete."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from core.destinations import sample
from core.destinations.base import Adapter, ValidationContext
from core.destinations.http import shared_client
from core.destinations.registry import ADAPTERS
from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.destination_fields import destination_form, posted_config, posted_rate
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import page, target_text
from core.http.deps import ServicesDep
from core.outbox.wakeup import wake_deliveries
from core.owner import destinations, email_senders
from core.owner.health import health_numbers, health_reading
from core.platform.clock import utcnow
from core.platform.errors import invalid_input
from core.platform.services import Services
from core.submissions import records

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


def _context(services: Services) -> ValidationContext:
    return ValidationContext(allow_private_targets=services.settings.allow_private_targets)


def _rotation(adapter: Adapter | None) -> str | None:
    """The input a secret is rotated with: `secret`, the config field that is the secret,
    or None for a type without one."""
    if adapter is None:
        return None
    if adapter.secret_field is not None:
        return adapter.secret_field
    return "secret" if adapter.secret_hint else None


def _pace(row: dict[str, Any]) -> str:
    """The destination's rate limit in words."""
    full = row["rate_per_second"]
    if full is None:
        return "no rate limit"
    words = f"at most {full:g} a second" + (" (its type's default)" if row["rate_default"] else "")
    if row["rate_now"] is not None and row["rate_now"] < full:
        words += f"; {row['rate_now']:g} a second for now, after the service answered 429"
    return words


async def _destinations_page(
    request: Request,
    services: Services,
    session: SessionDep,
    test: dict[str, Any] | None = None,
    shown_secret: dict[str, str] | None = None,
    *,
    dns: bool = False,
) -> Response:
    scope = session.scope
    async with services.db.scoped(scope) as conn:
        found = await destinations.list_destinations(conn, scope, after=None, limit=500)
        rates = await destinations.success_rates(conn, scope, now=utcnow())
        own = await email_senders.get_sender(conn, scope)
    sender = email_senders.shown(own)
    # Asked of the provider only on request (`?dns=1`): a page load makes no call out.
    dns_found = await email_senders.dns_records(services.settings, own) if dns else None
    for row in found:
        adapter = ADAPTERS.get(row["type"])
        row["type_label"] = adapter.label if adapter else row["type"]
        row["rotate"] = _rotation(adapter)
        row["generates"] = adapter is not None and adapter.new_secret() is not None
        row["shown"] = target_text(records.redacted_target(row["type"], row["config"]))
        row["reading"] = health_reading(row)
        row["paused_note"] = (
            f"paused itself: every attempt failed for {row['pause_after_hours']} h; "
            "its deliveries wait"
            if row["paused_reason"] == "failing"
            else None
        )
        rate = rates.get(row["id"])
        week = "no deliveries in 7 days" if rate is None else f"{rate:.0%} delivered in 7 days"
        row["rate"] = f"{health_numbers(row)}; {week}"
        row["pace"] = _pace(row)
    return await page(
        request,
        services,
        session,
        "destinations.html",
        title="Destinations",
        active="/app/destinations",
        destinations=found,
        form=destination_form(),
        test=test,
        shown_secret=shown_secret,
        sender=sender,
        dns_records=dns_found,
    )


async def _show_secret_once(
    request: Request, services: Services, session: SessionDep, row: dict[str, Any], secret: str
) -> Response:
    """The destinations page with a secret Postbag generated, shown this once (never stored
    by the browser: `no-store`)."""
    shown = {"id": row["id"], "name": row["name"], "value": secret}
    response = await _destinations_page(request, services, session, shown_secret=shown)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/destinations", dependencies=[page_needs("read")])
async def destinations_list(
    request: Request, services: ServicesDep, session: SessionDep, dns: bool = False
) -> Response:
    return await _destinations_page(request, services, session, dns=dns)


@router.post("/destinations", dependencies=[page_needs("configure", "destination.created")])
async def destination_create(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
) -> Response:
    kind = str(posted.get("type") or "")
    adapter = ADAPTERS.get(kind)
    data: dict[str, Any] = {
        "type": kind,
        "name": str(posted.get("name") or ""),
        "config": {} if adapter is None else posted_config(adapter, posted),
    }
    if posted.get("secret"):
        data["secret"] = str(posted.get("secret"))
    if (rate := posted_rate(posted)) is not None:
        data["rate_limit"] = rate
    try:
        fields = destinations.DestinationFields.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    created = await destinations.create_destination(change, fields=fields, ctx=_context(services))
    if created.generated_secret is not None:
        return await _show_secret_once(
            request, services, session, created.destination, created.generated_secret
        )
    return see_other("/app/destinations")


@router.post(
    "/destinations/{destination_id}", dependencies=[page_needs("configure", "destination.updated")]
)
async def destination_update(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
    destination_id: str,
) -> Response:
    data: dict[str, Any] = {}
    if "enabled" in posted:
        data["enabled"] = posted.get("enabled") == "on"
    if posted.get("name"):
        data["name"] = str(posted.get("name"))
    if posted.get("secret"):
        data["secret"] = str(posted.get("secret"))
    if "rate_per_second" in posted:
        data["rate_limit"] = posted_rate(posted)
    generated = None
    # A destination's type never changes: it names the secret this form may rotate.
    async with services.db.scoped(session.scope) as conn:
        found = await destinations.get_destination(
            conn, session.scope, destination_id=destination_id
        )
    adapter = ADAPTERS[found["type"]]
    if posted.get("rotate") == "generate" and "secret" not in data:
        # Rotated without a typed secret: a generated one, shown once as on creation.
        generated = adapter.new_secret()
        if generated is not None:
            data["secret"] = generated
    field = adapter.secret_field
    if field is not None and posted.get(field):
        # The config field that is the secret: a new value rotates it.
        data["config"] = {field: str(posted.get(field))}
    try:
        patch = destinations.DestinationPatch.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    row = await destinations.update_destination(
        change,
        destination_id=destination_id,
        patch=patch,
        ctx=_context(services),
        wake=partial(wake_deliveries, services),
    )
    if generated is not None:
        return await _show_secret_once(request, services, session, row, generated)
    resumed = row["resumed"]
    if resumed is not None:
        # Turned on again (what waited is sent now): offer to send what did not go through.
        since = resumed["paused_at"]
        if resumed["paused_reason"] == "failing":
            since -= timedelta(hours=resumed["pause_after_hours"])
        return see_other(
            f"/app/destinations/{destination_id}/replay?resumed={since.date().isoformat()}"
        )
    return see_other("/app/destinations")


@router.post(
    "/destinations/{destination_id}/test",
    dependencies=[page_needs("operate", "destination.tested")],
)
async def destination_test(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    _posted: CheckedForm,
    destination_id: str,
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await sample.destination_for_test(conn, session.scope, destination_id)
    result = await sample.send_sample(
        found, settings=services.settings, http=shared_client(), now=utcnow()
    )
    return await _destinations_page(
        request, services, session, test={"id": destination_id, **result}
    )


@router.get("/destinations/{destination_id}/delete", dependencies=[page_needs("configure")])
async def destination_delete_confirm(
    request: Request, services: ServicesDep, session: SessionDep, destination_id: str
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await destinations.get_destination(
            conn, session.scope, destination_id=destination_id
        )
    return await page(
        request,
        services,
        session,
        "destination_delete.html",
        title="Delete destination",
        dest=found,
    )


@router.post(
    "/destinations/{destination_id}/delete",
    dependencies=[page_needs("configure", "destination.deleted")],
)
async def destination_delete(
    change: ChangeDep, _posted: CheckedForm, destination_id: str
) -> Response:
    await destinations.delete_destination(change, destination_id=destination_id)
    return see_other("/app/destinations")
