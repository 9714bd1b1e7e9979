"""The status a submission is stored with (docs/submit.md), and how field values read as yes or no.

The first check that applies decides the status, in this order: honeypot (`spam`), origin,
rate limit, Turnstile, schema (`quarantined`). Later checks are skipped once one applies,
so a bot costs no Turnstile call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.intake.form import Form
from core.intake.schema import schema_errors
from core.intake.turnstile import TURNSTILE_FIELD, verify_turnstile
from core.platform.services import Services

_FALSY = frozenset({"", "0", "false", "no", "off"})
# What a ticked consent box (or a JSON client's consent value) sends.
_CONSENT = frozenset({"on", "yes", "true", "1"})


@dataclass(slots=True)
class Decision:
    """The status the checks gave a submission, why, and any schema violations found."""

    status: str = "accepted"
    reason: str | None = None
    schema_errors: list[dict[str, str]] = field(default_factory=list)


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(form: Form, origin: str | None) -> bool:
    """Whether `origin` is on the form's allowlist (an empty list allows any origin)."""
    if not form.allowed_origins:
        return True
    if not origin:
        return False
    return _normal_origin(origin) in {_normal_origin(o) for o in form.allowed_origins}


def truthy(value: Any) -> bool:
    """Whether a field's value means yes (a honeypot filled in, `_test` set)."""
    if isinstance(value, list):
        return any(truthy(item) for item in value)
    if isinstance(value, str):
        return value.strip().lower() not in _FALSY
    return bool(value)


def consented(value: Any) -> bool:
    """Whether a consent field's value is one ticked box (or a JSON client's `true`)."""
    if isinstance(value, list):
        return len(value) == 1 and consented(value[0])
    if value is True or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
        return True
    return isinstance(value, str) and value.strip().lower() in _CONSENT


def first_text(value: Any) -> str | None:
    """A field's text: the first of repeated values; None when empty or not text."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) and value else None


async def decide_status(
    services: Services,
    form: Form,
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    origin: str | None,
    client: str,
) -> Decision:
    """The status of a submission: the first check that applies decides it."""
    if truthy(fields.get(form.honeypot_field)):
        return Decision("spam", "honeypot")
    if not origin_allowed(form, origin):
        return Decision("quarantined", "origin_rejected")
    if form.recent_from_client >= form.rate_limit_max:
        return Decision("quarantined", "rate_limited")
    if form.turnstile_secret:
        reason = await verify_turnstile(
            str(services.settings.turnstile_verify_url),
            form.turnstile_secret,
            first_text(fields.get(TURNSTILE_FIELD)),
            client,
        )
        if reason is not None:
            return Decision("quarantined", reason)
    if form.schema_mode == "enforce" and form.schema is not None:
        errors = schema_errors(form.schema, values)
        if errors:
            return Decision("quarantined", "schema_violation", errors)
    return Decision()
