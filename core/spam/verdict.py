"""The spam verdict on one submission (docs/spam.md): the one call the submit path makes,
after the rate limit and before Turnstile and the schema. The first check that applies
decides: the fill-time token, the content rules, duplicates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.intake.form import Form
from core.intake.values import first_text
from core.platform.services import Services
from core.spam.duplicates import duplicate_reason
from core.spam.filltime import FILL_FIELD, fill_time_reason
from core.spam.rules import rule_hit


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a submission is spam."""

    reason: str


async def spam_verdict(
    services: Services,
    form: Form,
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    now: datetime,
) -> Verdict | None:
    """The verdict on a post (`fields` as sent, `values` as they will be stored) under its
    form's spam settings, or None when nothing applies. Never raises for anything the post
    holds."""
    settings = form.spam
    reason = fill_time_reason(
        settings,
        services.settings.require_secret_key(),
        form.id,
        first_text(fields.get(FILL_FIELD)),
        now,
    )
    if reason is None:
        reason = rule_hit(settings, values)
    if reason is None:
        reason = await duplicate_reason(
            services,
            settings,
            form_id=form.id,
            organization_id=form.organization_id,
            values=values,
            now=now,
        )
    if reason is not None:
        return Verdict(reason)
    return None
