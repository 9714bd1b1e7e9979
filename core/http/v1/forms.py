"""`/v1/forms`: a form's settings, its public submit URL and a ready-to-paste HTML snippet."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems, read_one
from core.owner import forms
from core.owner.form_settings import (
    AckEmail,
    AutoresponseSettings,
    FileField,
    FormFields,
    FormPatch,
    RateLimit,
    fields_of,
)
from core.platform.settings import Settings
from core.platform.vocabulary import SchemaMode
from core.spam.settings import SpamSettings

router = APIRouter(tags=["forms"], responses=problems(401, 503), route_class=AuditedRoute)


class SpamChecks(BaseModel):
    """Which external spam checks have a secret stored (docs/spam.md#external-checks)."""

    hcaptcha: bool
    recaptcha: bool
    akismet: bool


class Form(BaseModel):
    """A form as read: every setting except the Turnstile secret, which shows as a flag."""

    id: str
    name: str
    accepting: bool
    allowed_origins: list[str]
    honeypot_field: str
    redirect_url: str | None
    retention_days: int | None
    rate_limit: RateLimit
    schema_mode: SchemaMode
    labels: dict[str, str]
    file_fields: dict[str, FileField]
    consent_field: str | None
    ack_email: AckEmail | None
    autoresponse: AutoresponseSettings | None
    spam: SpamSettings
    spam_checks: SpamChecks
    turnstile_enabled: bool
    submit_url: str = Field(description="where the website posts: `POSTBAG_PUBLIC_URL/s/{id}`")
    html_snippet: str = Field(description="a minimal HTML form posting to `submit_url`")
    created_at: datetime
    updated_at: datetime


def _form(row: Mapping[str, Any], settings: Settings) -> Form:
    url = forms.submit_url(settings, row["id"])
    return Form.model_validate(
        {
            **fields_of(row),
            "id": row["id"],
            "turnstile_enabled": row["turnstile_enabled"],
            "spam_checks": row["spam_checks"],
            "submit_url": url,
            "html_snippet": forms.html_snippet(row, url),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
        }
    )


@router.post(
    "/forms",
    dependencies=[needs("configure", "form.created")],
    status_code=201,
    responses=problems(402, 422),
)
async def create_form(change: ChangeDep, body: FormFields, services: ServicesDep) -> Form:
    """Create a form (refused with `402 plan_limit` past the plan's form count)."""
    row = await forms.create_form(
        change, fields=body, allow_http_redirect=services.settings.allow_private_targets
    )
    return _form(row, services.settings)


@router.get("/forms", dependencies=[needs("read")], responses=problems(422))
async def list_forms(scope: ScopeDep, services: ServicesDep, page: PageDep) -> Page[Form]:
    """The organization's forms, oldest first."""
    async with services.db.scoped(scope) as conn:
        rows = await forms.list_forms(conn, scope, after=page.after_id(), limit=page.limit + 1)
    data, cursor = page.page(rows, "id")
    return Page[Form](data=[_form(row, services.settings) for row in data], next_cursor=cursor)


@router.get("/forms/{form_id}", dependencies=[needs("read")], responses=problems(404, 422))
async def get_form(form_id: str, scope: ScopeDep, services: ServicesDep) -> Form:
    """One form."""
    row = await read_one(services, scope, forms.get_form, form_id=form_id)
    return _form(row, services.settings)


@router.patch(
    "/forms/{form_id}",
    dependencies=[needs("configure", "form.updated")],
    responses=problems(404, 422),
)
async def update_form(
    change: ChangeDep, form_id: str, body: FormPatch, services: ServicesDep
) -> Form:
    """Change some settings; fields left out keep their value; `turnstile_secret: null` = off."""
    row = await forms.update_form(
        change,
        form_id=form_id,
        patch=body,
        allow_http_redirect=services.settings.allow_private_targets,
    )
    return _form(row, services.settings)


@router.delete(
    "/forms/{form_id}",
    dependencies=[needs("configure", "form.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_form(change: ChangeDep, form_id: str) -> None:
    """Delete a form and its routes; its address answers `404` from now on."""
    await forms.delete_form(change, form_id=form_id)
