"""The status a submission is stored with (docs/submit.md).

The first check that applies decides the status, in this order: honeypot (`spam`), origin,
rate limit (`quarantined`), the spam checks (`spam`, or `quarantined` when one cannot
tell: `core.spam.verdict`), Turnstile, schema (`quarantined`). Later checks are skipped
once one applies, so a bot costs no Turnstile call and no schema check; the insert may
still store the duplicate variant when it counts the post's fingerprints over the form's
limit (`core.intake.plan`). The schema
check runs in the checker's child processes within a budget (`core.schemas.checker`):
whatever it answers, the submission gets a status, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.intake.form import Form
from core.intake.turnstile import TURNSTILE_FIELD, verify_turnstile
from core.platform.fields import first_text, truthy
from core.platform.services import Services
from core.schemas.checker import judged, schema_checker
from core.schemas.versions import checked_version
from core.spam.verdict import spam_verdict


@dataclass(slots=True)
class Decision:
    """The status the checks gave a submission, why, and the schema drift it showed: the
    paths and keywords of the violations (`observe` records them on an accepted one)."""

    status: str = "accepted"
    reason: str | None = None
    drift: list[dict[str, str]] = field(default_factory=list)
    # The learned filter's score when it decided, stored with the row.
    spam_score: float | None = None
    # The post's duplicate fingerprints when it reached that check: the insert counts them
    # and stores it as `duplicate_content` when one is over the form's limit.
    fingerprints: tuple[bytes, ...] = ()


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(form: Form, origin: str | None) -> bool:
    """Whether `origin` is on the form's allowlist (an empty list allows any origin)."""
    if not form.allowed_origins:
        return True
    if not origin:
        return False
    return _normal_origin(origin) in {_normal_origin(o) for o in form.allowed_origins}


async def decide_status(
    services: Services,
    form: Form,
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    origin: str | None,
    client: str,
    now: datetime,
) -> Decision:
    """The status of a submission: the first check that applies decides it."""
    if truthy(fields.get(form.honeypot_field)):
        return Decision("spam", "honeypot")
    if not origin_allowed(form, origin):
        return Decision("quarantined", "origin_rejected")
    if form.recent_from_client >= form.rate_limit_max:
        return Decision("quarantined", "rate_limited")
    checked = await spam_verdict(
        services,
        form.spam,
        fields,
        values,
        form_id=form.id,
        organization_id=form.organization_id,
        secrets=form.spam_secrets,
        client=client,
        now=now,
    )
    prints = checked.fingerprints
    if checked.verdict is not None:
        verdict = checked.verdict
        return Decision(
            verdict.status, verdict.reason, spam_score=verdict.score, fingerprints=prints
        )
    if form.turnstile_secret:
        reason = await verify_turnstile(
            str(services.settings.turnstile_verify_url),
            form.turnstile_secret,
            first_text(fields.get(TURNSTILE_FIELD)),
            client,
        )
        if reason is not None:
            return Decision("quarantined", reason, fingerprints=prints)
    decision = await schema_decision(form, values)
    decision.fingerprints = prints
    return decision


async def schema_decision(form: Form, values: Mapping[str, Any]) -> Decision:
    """What the form's schema says of `values`. `enforce` checks the owner's current schema
    and quarantines what breaks it, or what could not be checked; `observe` accepts and
    records drift against the owner's schema, or the latest suggestion when the owner has
    written none."""
    current = checked_version(form.schema_mode, form.current_schemas)
    if current is None:
        return Decision()
    enforce = form.schema_mode == "enforce"
    verdict = await schema_checker().check(f"{form.id}:{current.version}", current.schema, values)
    reason, drift = judged(verdict)
    if reason is None:
        return Decision()
    if enforce:
        return Decision("quarantined", reason, drift)
    return Decision(drift=drift)
