"""Send again…: a destination's bulk replay, with the filter, the count, and a confirmation."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.outbox import replays
from core.owner import destinations
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput, invalid_input
from core.platform.services import Services

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# The window the page offers first: what failed in the last week.
DEFAULT_DAYS = 7
# What the page offers first: what did not go through and what is still waiting for it.
DEFAULT_STATUSES = ["dead", "failed"]


def _asked(destination_id: str, posted: FormData) -> replays.ReplayFilter:
    """The replay the page's form asks for: the checked statuses, since the chosen day."""
    try:
        since = date.fromisoformat(str(posted.get("since") or ""))
    except ValueError:
        raise InvalidInput(
            "since is not a date", [{"field": "since", "message": "a date"}]
        ) from None
    try:
        return replays.ReplayFilter.model_validate(
            {
                "destination": destination_id,
                "status": posted.getlist("status") or DEFAULT_STATUSES,
                "since": datetime(since.year, since.month, since.day, tzinfo=UTC),
            }
        )
    except ValidationError as exc:
        raise invalid_input(exc) from None


async def _replay_page(
    request: Request,
    services: Services,
    session: SessionDep,
    destination_id: str,
    **shown: Any,
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await destinations.get_destination(
            conn, session.scope, destination_id=destination_id
        )
    return await page(
        request,
        services,
        session,
        "destination_replay.html",
        title=f"Send again to {found['name']}",
        dest=found,
        per_second=replays.DEFAULT_PER_SECOND,
        **shown,
    )


@router.get("/destinations/{destination_id}/replay", dependencies=[page_needs("operate")])
async def replay_form(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    destination_id: str,
    resumed: str | None = None,
) -> Response:
    """The form; after a resume (`resumed`: the day its failing window or pause began), the
    dead and skipped deliveries since that day, already counted."""
    if resumed is None:
        since = (utcnow() - timedelta(days=DEFAULT_DAYS)).date().isoformat()
        return await _replay_page(
            request, services, session, destination_id, since=since, statuses=DEFAULT_STATUSES
        )
    shown = {"since": resumed, "statuses": ["dead", "skipped"]}
    asked = _asked(destination_id, FormData({"since": resumed, "status": "dead"}))
    asked = asked.model_copy(update={"status": shown["statuses"]})
    async with services.db.scoped(session.scope) as conn:
        counted = await replays.count_replay(conn, session.scope, asked, now=utcnow())
    return await _replay_page(
        request, services, session, destination_id, counted=counted, resumed=True, **shown
    )


@router.post(
    "/destinations/{destination_id}/replay", dependencies=[page_needs("operate", "replay.started")]
)
async def replay_count_or_start(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
    destination_id: str,
) -> Response:
    """`count` shows how many deliveries the filter matches (changing nothing: the change is
    not made, nothing is recorded); `confirm` queues them."""
    asked = _asked(destination_id, posted)
    shown = {"since": asked.since.date().isoformat(), "statuses": sorted(set(asked.status))}
    if posted.get("action") == "confirm":
        started = await replays.start_replay(change, services, asked, now=utcnow())
        return await _replay_page(
            request, services, session, destination_id, started=started, **shown
        )
    async with services.db.scoped(session.scope) as conn:
        counted = await replays.count_replay(conn, session.scope, asked, now=utcnow())
    return await _replay_page(request, services, session, destination_id, counted=counted, **shown)
