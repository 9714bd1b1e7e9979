"""The form page's spam section: the form's spam settings and the write-only secrets of its
external checks, saved through `PATCH /v1/forms/{id}`'s use case (`update_form`), and the
organization's learned filter reset through `DELETE /v1/spam/model`'s (docs/spam.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.deps import ServicesDep
from core.owner import forms, spam_report
from core.owner.form_settings import FormPatch
from core.platform.errors import InvalidInput, invalid_input
from core.platform.ids import is_id
from core.spam.settings import SpamSecrets, SpamSettings, spam_settings

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)

SECRETS = ("hcaptcha_secret", "recaptcha_secret", "akismet_key")
_LISTS = ("blocked_words", "blocked_patterns", "blocked_email_domains")
_BOXES = ("block_disposable_email", "require_fill_token", "learned")
_SCRIPTS = re.compile(r"[\s,]+")


def spam_inputs(stored: Any) -> dict[str, str]:
    """The text each spam input shows (a box: `on` when ticked), from the settings a form
    stored."""
    settings = spam_settings(stored)
    return {
        "max_links": "" if settings.max_links is None else str(settings.max_links),
        **{name: "\n".join(getattr(settings, name)) for name in _LISTS},
        "allowed_scripts": ", ".join(settings.allowed_scripts or []),
        "min_fill_seconds": f"{settings.min_fill_seconds:g}",
        "max_token_age_seconds": str(settings.max_token_age_seconds),
        "duplicate_max": "" if settings.duplicate_max is None else str(settings.duplicate_max),
        "duplicate_window_seconds": str(settings.duplicate_window_seconds),
        "learned_threshold": f"{settings.learned_threshold:g}",
        "recaptcha_min_score": f"{settings.recaptcha_min_score:g}",
        "akismet_site": settings.akismet_site or "",
        # A ticked box: "on", as a browser posts it.
        **{name: "on" if getattr(settings, name) else "" for name in _BOXES},
    }


def _number(posted: Mapping[str, Any], name: str) -> str | None:
    text = str(posted.get(name) or "").strip()
    return text or None


def _posted_settings(stored: Any, posted: Mapping[str, Any]) -> SpamSettings:
    """The stored settings with every input of the section applied (a setting the page
    has no input for keeps its stored value)."""
    data = spam_settings(stored).model_dump()
    for name in _LISTS:
        text = str(posted.get(name) or "").replace("\r\n", "\n")
        data[name] = [line.strip() for line in text.split("\n") if line.strip()]
    scripts = [s for s in _SCRIPTS.split(str(posted.get("allowed_scripts") or "")) if s]
    data["allowed_scripts"] = scripts or None
    for name in ("max_links", "duplicate_max", "akismet_site"):
        data[name] = _number(posted, name)
    for name in (
        "min_fill_seconds",
        "max_token_age_seconds",
        "duplicate_window_seconds",
        "learned_threshold",
        "recaptcha_min_score",
    ):
        data[name] = _number(posted, name) or data[name]
    for name in _BOXES:
        data[name] = posted.get(name) == "on"
    return SpamSettings.model_validate(data)


def _posted_secrets(posted: Mapping[str, Any]) -> SpamSecrets | None:
    """The secrets typed (set) or ticked for removal (null); None when neither."""
    given: dict[str, str | None] = {}
    for name in SECRETS:
        typed = str(posted.get(name) or "")
        if typed:
            given[name] = typed
        elif posted.get(f"remove_{name}") == "on":
            given[name] = None
    return SpamSecrets.model_validate(given) if given else None


@router.post("/forms/{form_id}/spam", dependencies=[page_needs("configure", "form.updated")])
async def spam_update(
    change: ChangeDep,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
    form_id: str,
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        form = await forms.get_form(conn, session.scope, form_id=form_id)
    try:
        secrets = _posted_secrets(posted)
        fields: dict[str, Any] = {"spam": _posted_settings(form["spam"], posted)}
        if secrets is not None:
            fields["spam_secrets"] = secrets
        patch = FormPatch.model_validate(fields)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await forms.update_form(
        change,
        form_id=form_id,
        patch=patch,
        allow_http_redirect=services.settings.allow_private_targets,
    )
    return see_other(f"/app/forms/{form_id}#spam-settings")


@router.post("/spam/model/reset", dependencies=[page_needs("configure", "spam_filter.reset")])
async def model_reset(change: ChangeDep, posted: CheckedForm) -> Response:
    if posted.get("confirm") != "on":
        raise InvalidInput(
            "tick the box to confirm: the filter forgets everything it was taught",
            [{"field": "confirm", "message": "not ticked"}],
        )
    await spam_report.reset_spam_model(change)
    back = str(posted.get("form") or "")
    return see_other(f"/app/forms/{back}#spam" if is_id(back, "frm") else "/app/forms")
