"""Reading submissions (the owner's side, always scoped): lists, one receipt, attachments.

Values are readable until `erase_at` passes (checked on every read, not by the cleanup)
or until they are erased; after that a submission keeps its receipt, status, idempotency
key and payload hash, and its delivery lines keep channel and state but not the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from core.destinations.base import ValidationContext
from core.destinations.order import in_field_order
from core.destinations.registry import ADAPTERS
from core.platform.db import Conn
from core.platform.errors import NotFound, ValuesErased, ValuesExpired
from core.platform.ids import id_bound
from core.platform.queries import execute, queries
from core.platform.scope import OrgScope, scoped
from core.submissions.search import SEARCH_TIMEOUT, read_search, refused


def readable(row: dict[str, Any], now: datetime) -> str:
    """`present`, `erased` or `expired`: whether a submission's values may be shown."""
    if row["erased_at"] is not None:
        return "erased"
    if row["erase_at"] is not None and row["erase_at"] <= now:
        return "expired"
    return "present"


def _summary(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {
        "id": row["id"],
        "form": row["form_id"],
        "status": row["status"],
        "reason": row["reason"],
        "flags": list(row["flags"]),
        "received_at": row["received_at"],
        "erase_at": row["erase_at"],
        "erased_at": row["erased_at"],
        "values_state": readable(row, now),
    }


@scoped
async def list_submissions(
    conn: Conn,
    scope: OrgScope,
    *,
    now: datetime,
    form_id: str | None,
    status: str | None,
    since: datetime | None,
    before: tuple[datetime, str] | None,
    limit: int,
    flag: str | None = None,
    q: str | None = None,
) -> list[dict[str, Any]]:
    """One page, newest first, without values (only those flagged `flag`, e.g. `test`, and
    with `q` those whose readable values hold its terms: `core/submissions/search.py`).

    A `q` past its bounds, or a search that runs past SEARCH_TIMEOUT, is InvalidSearch.
    """
    params: dict[str, Any] = {
        "organization_id": scope.organization_id,
        "now": now,
        "form_id": form_id,
        "status": status,
        "flag": flag,
        "since": since,
        "before_at": before[0] if before else None,
        "before_id": before[1] if before else None,
        "limit": limit,
    }
    if q is None:
        return [_summary(row, now) for row in await _page(conn, params)]
    search = read_search(q)
    params.update(anchor=search.anchor, others=list(search.others), excluded=list(search.excluded))
    await conn.execute(queries["search_time_bound"], {"timeout": SEARCH_TIMEOUT})
    try:
        cur = await conn.execute(queries["search_submissions"], params)
    except psycopg.errors.QueryCanceled as exc:
        raise refused(
            f"it took longer than {SEARCH_TIMEOUT}: add a word, or choose a form or a status"
        ) from exc
    return [_summary(row, now) for row in await cur.fetchall()]


# A page is first read from the weeks of submissions whose ids were made in the RECENT_REACH
# before its start (now, or its cursor's time). An id is made as its submission arrives, on
# the clock of `received_at`, and never more than ID_SKEW before it (the submit gate relies on
# the same: migrations/0069_gate_recent_weeks.sql). So once that read fills the page with
# submissions received since RECENT_REACH - ID_SKEW before its start, no older week can hold
# one that belongs on it; otherwise every week is read.
RECENT_REACH = timedelta(days=15)
ID_SKEW = timedelta(days=8)


async def _page(conn: Conn, params: dict[str, Any]) -> list[dict[str, Any]]:
    """One page of `list_submissions`: from the recent weeks alone when they settle it, else
    from every week (a busy inbox's first pages read two or three weeks, not all of them)."""
    recent_since = (params["before_at"] or params["now"]) - RECENT_REACH
    recent_id = id_bound("sub", int(recent_since.timestamp() * 1000))
    cur = await execute(conn, "list_submissions", {**params, "recent_id": recent_id})
    rows = await cur.fetchall()
    if len(rows) == params["limit"] and rows[-1]["received_at"] >= recent_since + ID_SKEW:
        return rows
    cur = await execute(conn, "list_submissions", params, omit=frozenset({"recent"}))
    return await cur.fetchall()


def redacted_target(channel: str, target: Any) -> dict[str, Any] | None:
    """What a delivery line may show of its target (webhook: origin and path only)."""
    adapter = ADAPTERS.get(channel)
    if adapter is None or not isinstance(target, dict):
        return None
    try:
        config = adapter.validate(target, ValidationContext(allow_private_targets=True))
    except ValueError:
        return None
    return adapter.redact(config)


@scoped
async def get_submission(
    conn: Conn, scope: OrgScope, submission_id: str, *, now: datetime
) -> dict[str, Any]:
    """One submission: values while readable, attachments, one line per delivery."""
    cur = await conn.execute(
        queries["get_submission"],
        {"id": submission_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound("no such submission")
    result = _summary(row, now)
    present = result["values_state"] == "present"
    result["values"] = (
        in_field_order(row["values"], row["field_order"], row["form_labels"] or {})
        if present and row["values"] is not None
        else None
    )
    result["attachments"] = row["attachments"] if present else []
    result["released_at"] = row["released_at"]
    result["spam_score"] = row["spam_score"]
    result["history"] = row["history"]
    lines = []
    for line in row["deliveries"]:
        target = line.pop("target")
        line["target"] = redacted_target(line["channel"], target) if present else None
        lines.append(line)
    result["deliveries"] = lines
    return result


@dataclass(frozen=True, slots=True)
class AttachmentFile:
    """An attachment that may be downloaded: its name, sniffed type, size and key."""

    name: str
    content_type: str
    size: int
    storage_key: str


@scoped
async def get_attachment(
    conn: Conn, scope: OrgScope, submission_id: str, attachment_id: str, *, now: datetime
) -> AttachmentFile:
    """An attachment whose bytes may still be read (ValuesErased / ValuesExpired otherwise)."""
    params = {
        "id": submission_id,
        "attachment_id": attachment_id,
        "organization_id": scope.organization_id,
    }
    row = await (await conn.execute(queries["get_attachment"], params)).fetchone()
    if row is None:
        probe = await conn.execute(
            queries["submission_state"],
            {"id": submission_id, "organization_id": scope.organization_id},
        )
        found = await probe.fetchone()
        if found is not None and found["erased_at"] is not None:
            raise ValuesErased("the submission's values and files were erased")
        raise NotFound("no such attachment")
    state = readable(row, now)
    if state == "erased":
        raise ValuesErased("the submission's values and files were erased")
    if state == "expired":
        raise ValuesExpired("the submission is past its retention")
    return AttachmentFile(
        name=row["name"],
        content_type=row["content_type"],
        size=row["size"],
        storage_key=row["storage_key"],
    )


@scoped
async def delivery_counts(
    conn: Conn, scope: OrgScope, submission_ids: list[str]
) -> dict[str, dict[str, int]]:
    """For each submission, how many of its deliveries are in each state."""
    cur = await conn.execute(
        queries["delivery_counts_for_submissions"],
        {"organization_id": scope.organization_id, "ids": submission_ids},
    )
    counts: dict[str, dict[str, int]] = {}
    for row in await cur.fetchall():
        counts.setdefault(row["submission_id"], {})[row["status"]] = row["n"]
    return counts
