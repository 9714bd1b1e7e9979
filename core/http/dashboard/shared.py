"""What the dashboard's pages share: the layout with the open-alert count, and delivery
states in words.

Every read and write goes through the same `core` functions as `/v1`; the pages only
turn forms into their arguments and results into pages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from starlette.responses import Response

from core.http.dashboard.pages import SessionDep, render
from core.owner import alerts
from core.platform.services import Services

_REASONS = {
    "values_erased": "the values were erased",
    "values_expired": "the values passed their retention",
    "destination_paused": "the destination is paused",
    "destination_removed": "the destination was removed",
    "attempts_exhausted": "every attempt failed",
    "email_log_only": "email is set to log only on this server",
    "submission_spam": "the submission was marked as spam",
}
_HTTP = re.compile(r"http_(\d{3})")


def target_text(target: Mapping[str, Any] | None) -> str:
    """A redacted target as text: `owner@example.com`, not a list's repr; `` for none."""
    parts: list[str] = []
    for value in (target or {}).values():
        parts.extend(str(v) for v in (value if isinstance(value, list) else [value]))
    return ", ".join(parts)


def detail_words(detail: str | None) -> str:
    """A delivery's last detail as shown, e.g. `http_503` as `HTTP 503`."""
    if not detail:
        return ""
    found = _HTTP.fullmatch(detail)
    return f"HTTP {found.group(1)}" if found else detail.replace("_", " ")


def reason_words(reason: str | None) -> str:
    """Why a delivery ended unsent, in words."""
    if not reason:
        return ""
    if _HTTP.fullmatch(reason):
        return f"the receiver answered {detail_words(reason)}"
    return _REASONS.get(reason, reason.replace("_", " "))


def delivery_state(line: Mapping[str, Any]) -> tuple[str, str]:
    """A delivery's state in words, and its CSS class."""
    status = line["status"]
    if status in ("pending", "sending"):
        return "Waiting to send", "wait"
    if status == "failed":
        return "Will try again", "retry"
    if status == "sent":
        return "Delivered", "ok"
    return "Not delivered", "bad"


def summary_line(counts: Mapping[str, int]) -> str:
    """The inbox's one-line delivery summary, e.g. `2 delivered, 1 will try again`."""
    if not counts:
        return "No deliveries"
    parts = []
    words = [
        (("sent",), "delivered"),
        (("pending", "sending"), "waiting"),
        (("failed",), "will try again"),
        (("dead", "skipped"), "not delivered"),
    ]
    for statuses, word in words:
        n = sum(counts.get(s, 0) for s in statuses)
        if n:
            parts.append(f"{n} {word}")
    return ", ".join(parts)


def troubled(counts: Mapping[str, int]) -> str | None:
    """`dead` when a delivery will not be tried again, `failed` when one waits for a retry,
    else None: what makes an inbox row stand out."""
    if counts.get("dead"):
        return "dead"
    return "failed" if counts.get("failed") else None


async def _open_alerts(services: Services, session: SessionDep) -> int:
    async with services.db.scoped(session.scope) as conn:
        found = await alerts.list_alerts(conn, session.scope, status="open", before=None, limit=100)
    return len(found)


async def page(
    request: Request,
    services: Services,
    session: SessionDep,
    template: str,
    *,
    title: str,
    **context: Any,
) -> Response:
    """Render a page in the layout, with the count of open alerts in the navigation."""
    count = await _open_alerts(services, session)
    return render(request, template, title=title, open_alerts=count, **context)
