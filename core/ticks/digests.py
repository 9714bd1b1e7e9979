"""The digest tick (docs/scheduled.md): one summary delivery per closed period of a digest route.

For each live route in `digest` mode, the periods after its last digest (from the period
holding the route's creation when it has none) are visited oldest first, jumping straight
to the next period that holds a matching submission, so empty periods cost nothing and
produce nothing. Each digest is one statement: the `digests` row (unique per route and
period key, so a rerun or a concurrent pass is a no-op) and its delivery.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from psycopg.types.json import Jsonb

from core.destinations.registry import ADAPTERS
from core.platform.clock import iso_ms
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.ticks.periods import Window, window_of

# Submissions listed by value in one digest; the rest are counted and linked.
LISTED = 100
# A period counts as closed this long after its end, so a submit transaction in flight
# across the boundary (its arrival time is taken before it commits) is not left out.
GRACE = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class DigestOptions:
    """How much one pass takes on at once."""

    # Routes read per page (every digest route is visited while the budget lasts).
    routes: int = 500
    # Periods caught up per route per pass (a long outage catches up over several passes).
    periods_per_route: int = 48


def digest_payload(
    route: Mapping[str, Any],
    window: Window,
    *,
    count: int,
    listed: list[dict[str, Any]],
    public_url: str,
) -> dict[str, Any]:
    """What a digest delivery sends: the summary, rendered by the destination's type."""
    query = urlencode({"form": route["form_id"], "since": iso_ms(window.start)})
    submissions = [
        {**item, "submitted_at": iso_ms(datetime.fromisoformat(item["submitted_at"]))}
        for item in listed
    ]
    summary: dict[str, Any] = {
        "event": "form.digest",
        "form": route["form_id"],
        "period": window.key,
        "period_start": iso_ms(window.start),
        "period_end": iso_ms(window.end),
        "count": count,
        "submissions": submissions,
        "more_url": f"{public_url.rstrip('/')}/v1/submissions?{query}",
    }
    return ADAPTERS[route["channel"]].digest(summary, form_name=route["form_name"])


async def _digest_route(
    conn: Conn,
    route: Mapping[str, Any],
    *,
    now: datetime,
    options: DigestOptions,
    public_url: str,
    stats: Counter[str],
) -> None:
    period = route["period"]
    since = route["last_end"] or window_of(period, route["updated_at"]).start
    until = window_of(period, now - GRACE).start  # the end of the last closed period
    statuses = list(route["include_statuses"])
    for _ in range(options.periods_per_route):
        cur = await conn.execute(
            queries["first_undigested_submission"],
            {"form_id": route["form_id"], "statuses": statuses, "since": since, "until": until},
        )
        first = await cur.fetchone()
        if first is None:
            return
        window = window_of(period, first["received_at"])
        cur = await conn.execute(
            queries["digest_submissions"],
            {
                "form_id": route["form_id"],
                "statuses": statuses,
                "start": window.start,
                "end": window.end,
                "now": now,
                "listed": LISTED,
            },
        )
        found = await cur.fetchone()
        assert found is not None
        payload = digest_payload(
            route, window, count=found["total"], listed=found["listed"], public_url=public_url
        )
        cur = await conn.execute(
            queries["insert_digest"],
            {
                "id": new_id("dgs"),
                "delivery_id": new_id("dlv"),
                "organization_id": route["organization_id"],
                "route_id": route["id"],
                "destination_id": route["destination_id"],
                "period_key": window.key,
                "start": window.start,
                "end": window.end,
                "count": found["total"],
                "channel": route["channel"],
                "payload": Jsonb(payload),
                "target": Jsonb(route["config"]),
                "secret_version": route["secret_version"],
                "now": now,
            },
        )
        if await cur.fetchone() is not None:
            stats["digests"] += 1
            log.info(
                "digest created",
                extra={
                    "org_id": route["organization_id"],
                    "form_id": route["form_id"],
                    "detail": {"route": route["id"], "period": window.key},
                },
            )
        else:
            stats["already_digested"] += 1
        since = window.end


async def run_digests(
    services: Services, *, now: datetime, budget: float, options: DigestOptions | None = None
) -> dict[str, Any]:
    """One bounded digest pass over every digest route; returns its counters."""
    opts = options or DigestOptions()
    deadline = time.monotonic() + budget
    stats: Counter[str] = Counter()
    public_url = str(services.settings.public_url)
    after: str | None = None
    async with services.db.connection() as conn:
        while time.monotonic() < deadline:
            cur = await conn.execute(
                queries["digest_routes"], {"limit": opts.routes, "after": after}
            )
            routes = await cur.fetchall()
            for route in routes:
                if time.monotonic() > deadline:
                    break
                stats["routes"] += 1
                await _digest_route(
                    conn, route, now=now, options=opts, public_url=public_url, stats=stats
                )
            if len(routes) < opts.routes:
                break
            after = routes[-1]["id"]
    return dict(stats)


async def digest_pass(services: Services, now: datetime, budget: float) -> Mapping[str, Any]:
    """The `digest` tick: one pass with the default options."""
    return await run_digests(services, now=now, budget=budget)


@scoped
async def list_digests(
    conn: Conn, scope: OrgScope, *, route_id: str | None, before: str | None, limit: int
) -> list[dict[str, Any]]:
    """A page of the organization's digests, newest first, optionally of one route."""
    cur = await conn.execute(
        queries["list_digests"],
        {
            "organization_id": scope.organization_id,
            "route_id": route_id,
            "before": before,
            "limit": limit,
        },
    )
    return [
        {
            "id": row["id"],
            "route": row["route_id"],
            "period": row["period_key"],
            "period_start": row["period_start"],
            "period_end": row["period_end"],
            "count": row["submission_count"],
            "delivery": row["delivery_id"],
            "delivery_status": row["delivery_status"],
            "created_at": row["created_at"],
        }
        for row in await cur.fetchall()
    ]
