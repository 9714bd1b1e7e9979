"""Forms and their routes: list, create, change settings, route to a destination.

Saving the settings changes only what the owner changed: the page posts back the text it
showed (`shown`), and a setting whose inputs still read the same is left out of the patch,
so a save never rewrites a setting nobody touched, even one changed elsewhere meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, get_args

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from core.destinations.order import field_order
from core.destinations.registry import ADAPTERS
from core.destinations.sample import sample_payload
from core.destinations.templates import template_errors
from core.destinations.text import message
from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard import schemas
from core.http.dashboard import spam as spam_section
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import page
from core.http.deps import NowDep, ServicesDep
from core.owner import destinations, forms, routes
from core.owner.changes import Change
from core.owner.form_settings import FormFields, FormPatch, fields_of
from core.owner.routes import RoutePatch, Template
from core.owner.spam_report import spam_report
from core.platform.errors import InvalidInput, invalid_input
from core.platform.services import Services
from core.platform.vocabulary import SchemaMode

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)

# The schema modes the select offers: exactly the API's.
SCHEMA_MODES: tuple[str, ...] = get_args(SchemaMode)

# Each setting's inputs on the settings form; the Turnstile inputs are write-only and act
# only when filled in or ticked.
SETTING_INPUTS: Mapping[str, tuple[str, ...]] = {
    "name": ("name",),
    "allowed_origins": ("allowed_origins",),
    "honeypot_field": ("honeypot_field",),
    "redirect_url": ("redirect_url",),
    "retention_days": ("retention_days",),
    "rate_limit": ("rate_max", "rate_per_seconds"),
    "schema_mode": ("schema_mode",),
    "labels": ("labels",),
    "file_fields": ("file_fields",),
    "consent_field": ("consent_field",),
    "ack_email": ("ack_email",),
    "autoresponse": ("autoresponse",),
}


def _lines(value: Any) -> list[str]:
    return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def _json(form: Mapping[str, Any], name: str, default: Any) -> Any:
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidInput(
            f"{name} is not valid JSON", [{"field": name, "message": "not JSON"}]
        ) from None


def _int(form: Mapping[str, Any], name: str, default: int | None) -> int | None:
    text = str(form.get(name) or "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a whole number", [{"field": name, "message": "not a number"}]
        ) from None


def _form_settings(form: Mapping[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "name": str(form.get("name") or ""),
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
        "autoresponse": _json(form, "autoresponse", None),
    }
    secret = str(form.get("turnstile_secret") or "")
    if secret:
        settings["turnstile_secret"] = secret
    if form.get("remove_turnstile") == "on":
        settings["turnstile_secret"] = None
    return settings


def _json_text(value: Any) -> str:
    # Not Jinja's `tojson`: it sorts keys, and labels show in the order they are stored.
    return json.dumps(value, ensure_ascii=False) if value else ""


def _inputs(settings: Mapping[str, Any]) -> dict[str, str]:
    """The text each settings input shows, from settings in FormFields' shape."""
    return {
        "name": settings["name"],
        "allowed_origins": "\n".join(settings["allowed_origins"]),
        "honeypot_field": settings["honeypot_field"],
        "redirect_url": settings["redirect_url"] or "",
        "retention_days": str(settings["retention_days"] or ""),
        "rate_max": str(settings["rate_limit"]["max"]),
        "rate_per_seconds": str(settings["rate_limit"]["per_seconds"]),
        "schema_mode": settings["schema_mode"],
        "labels": _json_text(settings["labels"]),
        "file_fields": _json_text(settings["file_fields"]),
        "consent_field": settings["consent_field"] or "",
        "ack_email": _json_text(settings["ack_email"]),
        "autoresponse": _json_text(settings["autoresponse"]),
    }


def _new_form_inputs() -> dict[str, str]:
    return _inputs(FormFields.model_construct(name="").model_dump())


def _text(value: Any) -> str:
    # Browsers post a textarea's line breaks as CRLF.
    return str(value or "").replace("\r\n", "\n").strip()


def _changed_settings(posted: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with an input posted that differs from what the page showed, and the
    Turnstile secret when one was typed or its removal ticked."""
    try:
        shown = json.loads(str(posted.get("shown") or ""))
    except ValueError:
        shown = None
    if not isinstance(shown, dict):
        raise InvalidInput(
            "the page was out of date; reload it and make the change again",
            [{"field": "shown", "message": "missing: reload the page"}],
        )
    # An input left out of the post reads as the page showed it.
    values = {name: shown.get(name) for names in SETTING_INPUTS.values() for name in names}
    values.update(posted)
    touched = {
        setting
        for setting, names in SETTING_INPUTS.items()
        if any(_text(values.get(name)) != _text(shown.get(name)) for name in names)
    }
    settings = _form_settings(values)
    return {k: v for k, v in settings.items() if k in touched or k not in SETTING_INPUTS}


@router.get("/forms", dependencies=[page_needs("read")])
async def forms_list(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await forms.list_forms(conn, session.scope, after=None, limit=500)
    return await page(
        request, services, session, "forms.html", title="Forms", active="/app/forms", forms=found
    )


@router.get("/forms/new", dependencies=[page_needs("configure")])
async def form_new(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    return await page(
        request,
        services,
        session,
        "form_edit.html",
        title="New form",
        active="/app/forms",
        form=None,
        inputs=_new_form_inputs(),
        schema_modes=SCHEMA_MODES,
    )


@router.post("/forms", dependencies=[page_needs("configure", "form.created")])
async def form_create(change: ChangeDep, services: ServicesDep, posted: CheckedForm) -> Response:
    try:
        fields = FormFields.model_validate(_form_settings(posted))
    except ValidationError as exc:
        raise invalid_input(exc) from None
    row = await forms.create_form(
        change, fields=fields, allow_http_redirect=services.settings.allow_private_targets
    )
    return see_other(f"/app/forms/{row['id']}")


@router.get("/forms/{form_id}", dependencies=[page_needs("read")])
async def form_detail(
    request: Request, services: ServicesDep, session: SessionDep, now: NowDep, form_id: str
) -> Response:
    return await _form_page(request, services, session, now, form_id)


async def _form_page(
    request: Request,
    services: Services,
    session: SessionDep,
    now: datetime,
    form_id: str,
    preview: Mapping[str, Any] | None = None,
) -> Response:
    scope = session.scope
    async with services.db.scoped(scope) as conn:
        form = await forms.get_form(conn, scope, form_id=form_id)
        form_routes = await routes.list_routes(conn, scope, form_id=form_id, after=None, limit=100)
        dests = await destinations.list_destinations(conn, scope, after=None, limit=500)
        schema = await schemas.schema_section(conn, scope, form_id=form_id, now=now)
        spam = await spam_report(conn, scope, form_id=form_id, now=now)
    url = forms.submit_url(services.settings, form_id)
    names = {d["id"]: d for d in dests}
    fetch = (
        f'await fetch("{url}", {{\n  method: "POST",\n'
        '  headers: {"Content-Type": "application/json", '
        '"Idempotency-Key": crypto.randomUUID()},\n'
        '  body: JSON.stringify({email: "ada@example.com", message: "Hello"}),\n});'
    )
    return await page(
        request,
        services,
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
        templated={name for name, adapter in ADAPTERS.items() if adapter.templates},
        preview=preview,
        inputs=_inputs(fields_of(form)),
        schema_modes=SCHEMA_MODES,
        schema=schema,
        spam=spam,
        spam_inputs=spam_section.spam_inputs(form["spam"]),
        spam_secrets=spam_section.SECRETS,
    )


def _posted_template(posted: Mapping[str, Any]) -> dict[str, str | None]:
    return {name: _text(posted.get(name)) or None for name in ("subject", "text")}


@router.post("/forms/{form_id}/routes/{route_id}/preview", dependencies=[page_needs("configure")])
async def route_template_preview(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    now: NowDep,
    posted: CheckedForm,
    form_id: str,
    route_id: str,
) -> Response:
    """The form page with a route's notification template as the sample submission would
    render it (nothing stored)."""
    template = _posted_template(posted)
    problems = [p for value in template.values() if value for p in template_errors(value)]
    async with services.db.scoped(session.scope) as conn:
        form = await forms.get_form(conn, session.scope, form_id=form_id)
    sample = sample_payload(now)
    labels = form["labels"] or {}
    subject, text = message(
        sample,
        {
            **template,
            "labels": labels,
            "form_name": form["name"],
            "field_order": field_order(sample["values"], None, labels),
        },
    )
    preview = {"route": route_id, **template, "rendered_subject": subject, "rendered_text": text}
    if problems:
        preview["error"] = problems[0]
    return await _form_page(request, services, session, now, form_id, preview=preview)


@router.post(
    "/forms/{form_id}/routes/{route_id}/template",
    dependencies=[page_needs("configure", "route.updated")],
)
async def route_template_save(
    change: ChangeDep, posted: CheckedForm, form_id: str, route_id: str
) -> Response:
    """Save a route's notification template (both empty: the default message)."""
    template = _posted_template(posted)
    try:
        patch = RoutePatch(template=Template(**template) if any(template.values()) else None)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await routes.update_route(change, route_id=route_id, patch=patch)
    return see_other(f"/app/forms/{form_id}")


@router.post("/forms/{form_id}", dependencies=[page_needs("configure", "form.updated")])
async def form_update(
    change: ChangeDep, services: ServicesDep, posted: CheckedForm, form_id: str
) -> Response:
    try:
        patch = FormPatch.model_validate(_changed_settings(posted))
    except ValidationError as exc:
        raise invalid_input(exc) from None
    return await _patch_form(change, services, form_id, patch)


@router.post("/forms/{form_id}/accepting", dependencies=[page_needs("configure", "form.updated")])
async def form_accepting(
    change: ChangeDep, services: ServicesDep, posted: CheckedForm, form_id: str
) -> Response:
    patch = FormPatch(accepting=posted.get("accepting") == "on")
    return await _patch_form(change, services, form_id, patch)


async def _patch_form(
    change: Change, services: Services, form_id: str, patch: FormPatch
) -> Response:
    """Apply a form change through the same use case as `PATCH /v1/forms/{id}`."""
    await forms.update_form(
        change,
        form_id=form_id,
        patch=patch,
        allow_http_redirect=services.settings.allow_private_targets,
    )
    return see_other(f"/app/forms/{form_id}")


@router.post("/forms/{form_id}/routes", dependencies=[page_needs("configure", "route.created")])
async def route_create(change: ChangeDep, posted: CheckedForm, form_id: str) -> Response:
    mode = str(posted.get("mode") or "immediate")
    data: dict[str, Any] = {"destination_id": str(posted.get("destination_id") or ""), "mode": mode}
    if mode == "digest":
        data["period"] = str(posted.get("period") or "daily")
    try:
        fields = routes.RouteFields.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await routes.create_route(change, form_id=form_id, fields=fields)
    return see_other(f"/app/forms/{form_id}")


@router.post(
    "/forms/{form_id}/routes/{route_id}/delete",
    dependencies=[page_needs("configure", "route.deleted")],
)
async def route_delete(
    change: ChangeDep, _posted: CheckedForm, form_id: str, route_id: str
) -> Response:
    await routes.delete_route(change, route_id=route_id)
    return see_other(f"/app/forms/{form_id}")
