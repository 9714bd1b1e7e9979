"""What a form's spam checks decided over the last 30 days, with the organization's learned
filter: `GET /v1/forms/{id}/spam` and the dashboard's form page (docs/spam.md#see-and-tune);
the owner's reset of that filter; a spam reason in words, with the threshold it crossed, as
the receipt shows it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from core.owner.changes import Change
from core.owner.forms import get_form
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.spam.model import model_state, reset_model
from core.spam.rules import count_links
from core.spam.settings import SpamSettings, spam_settings
from core.spam.text import phrase_of, texts

REPORT_DAYS = 30
_FIXED = {
    "honeypot": "the hidden honeypot field was filled",
    "spam_rule:patterns": "a blocked pattern matched",
    "spam_rule:email_domain": "an email address at a blocked domain",
    "spam_rule:disposable_email": "an email address at a disposable-mail domain",
    "missing_token": "no fill-time token, and the form requires one",
    "marked_spam": "marked as spam by hand",
    "forged_token": "a fill-time token that was not issued for this form",
    "akismet": "Akismet judged it spam",
}


@scoped
async def spam_report(
    conn: Conn, scope: OrgScope, *, form_id: str, now: datetime
) -> dict[str, Any]:
    """The form's submissions of the last REPORT_DAYS days per status and reason, its
    learned-filter settings and the organization's model (NotFound for no such form)."""
    form = await get_form(conn, scope, form_id=form_id)
    since = now - timedelta(days=REPORT_DAYS)
    cur = await conn.execute(
        queries["spam_counts"],
        {"form_id": form_id, "organization_id": scope.organization_id, "since": since},
    )
    settings = spam_settings(form["spam"])
    return {
        "form_id": form_id,
        "since": since,
        "counts": await cur.fetchall(),
        "learned": settings.learned,
        "learned_threshold": settings.learned_threshold,
        "model": await model_state(conn, scope.organization_id),
    }


async def reset_spam_model(change: Change) -> None:
    """Forget everything the organization's learned filter was taught (`reset_model`) as
    the change."""
    async with change as conn:
        await reset_model(conn, change.scope.organization_id)


def _seconds(value: float) -> str:
    """A duration as a person reads it: `2 s`, `5 min`, `6 h`, `1 day`."""
    for unit, size in (("day", 86_400), ("h", 3_600), ("min", 60)):
        if value >= size and value % size == 0:
            count = int(value // size)
            return f"{count} {unit}{'s' if unit == 'day' and count != 1 else ''}"
    return f"{value:g} s"


def _links_words(settings: SpamSettings, values: Mapping[str, Any] | None) -> str:
    limit = settings.max_links
    if values is None:
        return "more links than allowed" if limit is None else f"more than {limit} links"
    count = count_links(texts(values))
    noun = "link" if count == 1 else "links"
    if limit is None:
        return f"{count} {noun} (no limit is set now)"
    if count > limit:
        return f"{count} {noun}, more than {limit}"
    return f"{count} {noun} (the limit is {limit} now)"


def _words_words(settings: SpamSettings, values: Mapping[str, Any] | None) -> str:
    if values is not None:
        phrases = [piece.phrase for piece in texts(values)]
        for word in settings.blocked_words:
            if any(phrase_of(word) in phrase for phrase in phrases):
                return f"the blocked word “{word}”"
    return "a blocked word"


def spam_reason_words(
    reason: str | None,
    *,
    settings: SpamSettings,
    values: Mapping[str, Any] | None,
    score: float | None,
) -> str:
    """Why a submission was held as spam, in words, with the threshold it crossed under the
    form's settings (now): `12 links, more than 5`, `score 0.97, at or above 0.9`. Without
    `values` (a viewer's receipt, erased values) only the threshold."""
    if not reason:
        return ""
    if reason in _FIXED:
        return _FIXED[reason]
    if reason == "spam_rule:links":
        return _links_words(settings, values)
    if reason == "spam_rule:words":
        return _words_words(settings, values)
    if reason == "spam_rule:script":
        allowed = ", ".join(settings.allowed_scripts or []) or "the allowed scripts"
        return f"most letters outside {allowed}"
    if reason == "too_fast":
        return f"sent sooner than {_seconds(settings.min_fill_seconds)} after the form loaded"
    if reason == "stale_token":
        return f"a fill-time token older than {_seconds(settings.max_token_age_seconds)}"
    if reason == "duplicate_content":
        return (
            f"the same values more than {settings.duplicate_max} times within "
            f"{_seconds(settings.duplicate_window_seconds)}"
        )
    if reason == "learned":
        scored = f"score {score:.2f}, " if score is not None else "a score "
        return f"the learned filter: {scored}at or above {settings.learned_threshold:g}"
    return reason.replace("_", " ").replace(":", ": ")
