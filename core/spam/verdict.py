"""The spam verdict on one submission (docs/spam.md): the one call the submit path makes,
after the rate limit and before Turnstile and the schema. The first check that applies
decides: the fill-time token, the content rules (the blocked patterns in the checker's child
processes), duplicates, the learned filter, the external checks.

Nothing here writes: the duplicates' counts and the model's are read in one read-only
statement (`spam_lookup`); the submit statement counts the post's fingerprints and stores
the learned score with the row. No verdict teaches the learned filter: only the owner's
decisions do (`core.spam.model`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.platform.fields import first_text
from core.platform.kept import Kept
from core.platform.queries import queries
from core.platform.services import Registry, Services
from core.schemas.checker import schema_checker
from core.spam.config import SpamConfig
from core.spam.duplicates import duplicate_reason, fingerprints
from core.spam.external import external_verdict
from core.spam.filltime import FILL_FIELD, fill_time_reason
from core.spam.learned import MIN_DOCS, hashed, score, tokens
from core.spam.model import counts_of
from core.spam.patterns import patterns_key, patterns_schema
from core.spam.rules import rule_hit
from core.spam.text import Piece, texts

# A rule that could not finish within its budget: kept for review, never accepted.
UNCHECKED = "spam_unchecked"
# How long a process trusts that an organization's model is not ready to judge (taught
# fewer than MIN_DOCS of a kind): meanwhile its posts need no lookup before the insert, so a
# submit is one statement. A decision taken through this process forgets it at once; a
# model made ready elsewhere judges this process's posts within this time.
UNREADY_SECONDS = 60.0
# Organization id → until when (time.monotonic()) its model is known not ready.
_UNREADY: Registry[Kept[float]] = Registry("spam.unready_models", lambda: Kept(10_000))


def model_changed(services: Services, organization_id: str) -> None:
    """The organization's model was taught: this process looks it up again on the next post."""
    services.state(_UNREADY).forget(organization_id)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a submission is spam (or, when a check could not tell, quarantined), with the
    learned filter's score when it decided."""

    reason: str
    score: float | None = None
    status: str = "spam"


@dataclass(frozen=True, slots=True)
class SpamCheck:
    """The spam checks' verdict (None: none applied), and the post's duplicate fingerprints
    when it reached the duplicates check (the submit statement counts them)."""

    verdict: Verdict | None = None
    fingerprints: tuple[bytes, ...] = ()


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
) -> SpamCheck:
    """The checks on a post (`fields` as sent, `values` as they will be stored) to form
    `form_id` under its spam `settings` and its external checks' `secrets`. Never raises
    for anything the post holds."""
    reason = fill_time_reason(
        settings,
        services.settings.require_secret_key(),
        form_id,
        first_text(fields.get(FILL_FIELD)),
        now,
    )
    pieces = texts(values)
    if reason is None:
        reason = rule_hit(settings, pieces)
    if reason is not None:
        return SpamCheck(Verdict(reason))
    if settings.blocked_patterns:
        found = await _patterns(settings.blocked_patterns, pieces)
        if found is not None:
            return SpamCheck(found)
    key = services.settings.require_secret_key()
    prints = fingerprints(values, pieces, key) if settings.duplicate_max is not None else ()
    stored = await _duplicates_and_learned(
        services,
        settings,
        pieces,
        # The statement counts the fingerprints; read first only to spare a duplicate the
        # external checks' calls, or alongside the model's counts.
        prints,
        read_prints=bool(secrets),
        organization_id=organization_id,
        form_id=form_id,
        now=now,
    )
    if stored is not None:
        return SpamCheck(stored, prints)
    if secrets:
        external = await external_verdict(
            services.settings, settings, secrets, fields, values, client=client
        )
        if external is not None:
            status, reason = external
            return SpamCheck(Verdict(reason, status=status), prints)
    return SpamCheck(None, prints)


async def _patterns(patterns: tuple[str, ...], pieces: list[Piece]) -> Verdict | None:
    """The blocked patterns, in a child process under the checker's CPU budget: a match is
    spam; a check that could not finish (its budget, no free child) is quarantined."""
    checked = await schema_checker().check(
        patterns_key(patterns),
        patterns_schema(patterns),
        {"texts": [piece.text for piece in pieces]},
    )
    if checked.outcome == "valid":
        return None
    if checked.outcome == "invalid":
        return Verdict("spam_rule:patterns")
    return Verdict(UNCHECKED, status="quarantined")


async def _duplicates_and_learned(
    services: Services,
    settings: SpamConfig,
    pieces: list[Piece],
    prints: tuple[bytes, ...],
    *,
    read_prints: bool,
    organization_id: str,
    form_id: str,
    now: datetime,
) -> Verdict | None:
    """Duplicates, then the learned filter, from one read-only statement (`spam_lookup`):
    the counts of the post's fingerprints in their windows, and the model's counts of its
    tokens. No statement when neither can decide."""
    unready = services.state(_UNREADY)
    until = unready.get(organization_id)
    judging = settings.learned and (until is None or until < time.monotonic())
    token_hashes = hashed(tokens(pieces), services.settings.require_secret_key()) if judging else []
    if not token_hashes and not (read_prints and prints):
        return None
    async with services.db.connection() as conn:
        cur = await conn.execute(
            queries["spam_lookup"],
            {
                "form_id": form_id,
                "organization_id": organization_id,
                "fingerprints": list(prints),
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
    if counts is None:
        if token_hashes:
            unready.keep(organization_id, time.monotonic() + UNREADY_SECONDS)
        return None
    if not token_hashes:
        return None
    judged = score(counts, token_hashes)
    if judged >= settings.learned_threshold:
        return Verdict("learned", judged)
    return None
