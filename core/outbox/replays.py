"""Bulk replay: queue again, at a bounded rate, the deliveries a filter matches.

Each matched delivery is queued as retry by hand does (the same id, receipt and template,
attempts reset; sent to its destination as it is at the attempt), due one after another at
`per_second` (default 10), so a receiver that just recovered is not flooded and other
organizations' deliveries keep their turn. A destination the storm breaker holds `failing`
is probed at once (the replay says its receiver is back), not at its probe window's end.
Never a delivery whose values are erased or
expired, whose submission is now spam, or whose destination is removed or paused.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.outbox.wakeup import wake_deliveries
from core.owner.changes import Change
from core.platform.db import Conn
from core.platform.errors import InvalidInput, NotFound
from core.platform.ids import id_pattern, new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services

# The most deliveries one replay queues: a wider filter is refused (narrow `since`/`until`).
MAX_REPLAY = 10_000
DEFAULT_PER_SECOND = 10
ReplayableStatus = Literal["dead", "skipped", "failed"]


class ReplayFilter(BaseModel):
    """Which deliveries to queue again: by status (default `dead`), creation time
    (`since` ≤ created < `until`, default now), and optionally destination, form and
    stream."""

    model_config = ConfigDict(extra="forbid")

    status: list[ReplayableStatus] = Field(default=["dead"], min_length=1, max_length=3)
    since: datetime
    until: datetime | None = None
    destination: str | None = Field(default=None, pattern=id_pattern("dst"))
    form: str | None = Field(default=None, pattern=id_pattern("frm"))
    stream: str | None = Field(default=None, pattern=id_pattern("str"))
    per_second: int = Field(default=DEFAULT_PER_SECOND, ge=1, le=50)
    dry_run: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> ReplayFilter:
        if self.until is not None and self.until <= self.since:
            raise ValueError("until must be after since")
        return self


def _shown(replay: ReplayFilter, until: datetime) -> dict[str, Any]:
    return {
        "status": sorted(set(replay.status)),
        "since": replay.since.isoformat(),
        "until": until.isoformat(),
        "destination": replay.destination,
        "form": replay.form,
        "stream": replay.stream,
    }


async def _matches(
    conn: Conn, scope: OrgScope, replay: ReplayFilter, until: datetime, now: datetime
) -> tuple[list[str], int]:
    named = {
        "organization_id": scope.organization_id,
        "destination_id": replay.destination,
        "form_id": replay.form,
        "stream_id": replay.stream,
    }
    owned = await (await conn.execute(queries["replay_filter_owned"], named)).fetchone()
    if owned is None or not owned["owned"]:
        raise NotFound("no such destination or form")
    cur = await conn.execute(
        queries["replay_matches"],
        {
            **named,
            "statuses": sorted(set(replay.status)),
            "since": replay.since,
            "until": until,
            "now": now,
            "limit": MAX_REPLAY + 1,
        },
    )
    found = await cur.fetchall()
    return [row["id"] for row in found], (found[0]["total"] if found else 0)


@scoped
async def count_replay(
    conn: Conn, scope: OrgScope, replay: ReplayFilter, *, now: datetime
) -> dict[str, Any]:
    """What a replay would queue (`dry_run`): the count and the filter, nothing changed."""
    until = replay.until or now
    _, total = await _matches(conn, scope, replay, until, now)
    return {"count": total, "limit": MAX_REPLAY, "filter": _shown(replay, until)}


@scoped
async def queue_replay(
    conn: Conn, scope: OrgScope, replay: ReplayFilter, *, now: datetime
) -> dict[str, Any]:
    """Queue the matched deliveries again and record the replay; answer it (the caller wakes
    the deliverers once it has committed: `wake_deliveries`)."""
    until = replay.until or now
    ids, total = await _matches(conn, scope, replay, until, now)
    if total > MAX_REPLAY:
        raise InvalidInput(
            f"the filter matches {total} deliveries; one replay queues at most {MAX_REPLAY}",
            [{"field": "since", "message": "narrow since/until (or the destination or form)"}],
        )
    replay_id = new_id("rpl")
    params = {"organization_id": scope.organization_id, "now": now}
    await conn.execute(
        queries["insert_replay"],
        {
            **params,
            "id": replay_id,
            "filter": json.dumps(_shown(replay, until)),
            "total": total,
            "per_second": replay.per_second,
        },
    )
    await conn.execute(
        queries["queue_replay_deliveries"],
        {**params, "replay_id": replay_id, "ids": ids, "per_second": replay.per_second},
    )
    await conn.execute(queries["probe_replayed_destinations"], {**params, "ids": ids})
    return await get_replay(conn, scope, replay_id)


async def start_replay(
    change: Change, services: Services, replay: ReplayFilter, *, now: datetime
) -> dict[str, Any]:
    """Start a replay (`queue_replay`) as the change; the deliverers wake once it has
    committed, when it queued any."""
    async with change as conn:
        started = await queue_replay(conn, change.scope, replay, now=now)
        change.subject = started["id"]
        if started["total"]:
            change.after_commit(partial(wake_deliveries, services))
    return started


@scoped
async def get_replay(conn: Conn, scope: OrgScope, replay_id: str) -> dict[str, Any]:
    """A replay with its progress: queued (waiting or retrying), sent, failed (dead),
    skipped since (erased meanwhile, say)."""
    cur = await conn.execute(
        queries["get_replay"], {"id": replay_id, "organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no replay {replay_id}")
    return dict(row)
