"""The spam verdict on one submission (docs/spam.md): the one call the submit path makes,
after the rate limit and before Turnstile and the schema. The first check that applies
decides: the fill-time token, the content rules, duplicates, the learned filter, the
external checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from core.platform.fields import first_text
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services
from core.spam.config import SpamConfig
from core.spam.duplicates import duplicate_reason, fingerprint
from core.spam.external import external_verdict
from core.spam.filltime import FILL_FIELD, fill_time_reason
from core.spam.learned import MIN_DOCS, hashed, score, tokens
from core.spam.model import counts_of, train
from core.spam.rules import rule_hit


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a submission is spam (or, when an external check could not tell, quarantined),
    with the learned filter's score when it decided."""

    reason: str
    score: float | None = None
    status: str = "spam"


async def spam_verdict(
    services: Services,
    settings: SpamConfig,
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    form_id: str,
    organization_id: str,
    secrets: Mapping[str, str],
    client: str,
    now: datetime,
) -> Verdict | None:
    """The verdict on a post (`fields` as sent, `values` as they will be stored) to form
    `form_id` under its spam `settings` and its external checks' `secrets`, or None when
    nothing applies. Never raises for anything the post holds."""
    reason = fill_time_reason(
        settings,
        services.settings.require_secret_key(),
        form_id,
        first_text(fields.get(FILL_FIELD)),
        now,
    )
    if reason is None:
        reason = rule_hit(settings, values)
    if reason is not None:
        return Verdict(reason)
    stored = await _duplicates_and_learned(
        services, settings, values, form_id=form_id, organization_id=organization_id, now=now
    )
    if stored is not None:
        return stored
    if secrets:
        found = await external_verdict(
            services.settings, settings, secrets, fields, values, client=client
        )
        if found is not None:
            status, reason = found
            return Verdict(reason, status=status)
    return None


async def _duplicates_and_learned(
    services: Services,
    settings: SpamConfig,
    values: Mapping[str, Any],
    *,
    form_id: str,
    organization_id: str,
    now: datetime,
) -> Verdict | None:
    """Duplicates, then the learned filter, from one statement (`spam_lookup`): the post's
    fingerprint counted, and the model's counts of its tokens read."""
    key = services.settings.require_secret_key()
    hashed_values = fingerprint(values, key) if settings.duplicate_max is not None else None
    token_hashes = hashed(tokens(values), key) if settings.learned else []
    if hashed_values is None and not token_hashes:
        return None
    async with services.db.connection() as conn:
        cur = await conn.execute(
            queries["spam_lookup"],
            {
                "form_id": form_id,
                "organization_id": organization_id,
                "fingerprint": hashed_values,
                "now": now,
                "window": settings.duplicate_window_seconds,
                "tokens": token_hashes,
                "min_docs": MIN_DOCS,
            },
        )
        found = await cur.fetchall()
    reason = duplicate_reason(settings, found[0]["duplicates"])
    if reason is not None:
        return Verdict(reason)
    counts = counts_of(found)
    if counts is None or not token_hashes:
        return None
    judged = score(counts, token_hashes)
    if judged >= settings.learned_threshold:
        return Verdict("learned", judged)
    return None


async def record_verdict(
    services: Services,
    organization_id: str,
    submission_id: str,
    verdict: Verdict,
    values: Mapping[str, Any],
    *,
    now: datetime,
) -> None:
    """After a submission was stored as spam by `verdict`: keep the learned filter's score,
    or teach the filter a content rule's hit. A failure is logged, never raised: the
    submission is stored already."""
    if verdict.score is None and not verdict.reason.startswith("spam_rule:"):
        return
    try:
        async with services.db.connection() as conn, conn.transaction():
            if verdict.score is not None:
                await conn.execute(
                    queries["set_spam_score"],
                    {
                        "id": submission_id,
                        "organization_id": organization_id,
                        "score": verdict.score,
                    },
                )
            else:
                await train(
                    conn,
                    organization_id=organization_id,
                    submission_id=submission_id,
                    label="spam",
                    values=values,
                    secret_key=services.settings.require_secret_key(),
                    now=now,
                )
    except psycopg.Error:
        # The submission is stored: its answer does not wait on, or fail for, the filter.
        log.warning(
            "could not record the spam verdict",
            extra={"org_id": organization_id, "submission_id": submission_id},
        )
