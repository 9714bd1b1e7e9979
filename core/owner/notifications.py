"""What the owner is told by email, through a channel that does not depend on their
destinations (docs/operations.md#owner-notifications).

The organization's addresses (`notify`, at most MAX_ADDRESSES) receive a notice when a
destination pauses itself (`destination.paused`), when a `delivery.dead` alert opens (the
first dead delivery of a storm) and when the month's submissions reach the plan's quota
(`quota.reached`). A notice is a `notifications` row, written by the statement that finds
it: the pause statement writes its own, and the retention tick's `gather` writes the other
two from the alerts and usage counters. `send_due` folds them into email deliveries of kind
`notification`, sent by the outbox through the installation's email provider like any
email, with retries: at most one email per kind per hour per organization, the first at
once and the ones after it folded into one digest when the hour since ends. Written in the
same transaction as the rows they fold, so a crash neither loses nor repeats one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, EmailStr, Field

from core.destinations.text import NOTICE_EVENT, quoted
from core.owner.changes import Change
from core.owner.plans import PLANS
from core.platform.clock import month_of
from core.platform.db import Conn, Database
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import NotificationKind

MAX_ADDRESSES = 10
# The (organization, kind) pairs one pass sends at most; the rest wait for the next pass.
BATCH = 100
# How many notices a digest lists by name (the count says the rest).
LISTED = 20
_LIMITS = json.dumps({name: plan.monthly_submissions for name, plan in PLANS.items()})


class NotifySettings(BaseModel):
    """Where the organization's notices go: `{"notify": ["ops@example.com"]}` (an empty
    list sends none)."""

    model_config = ConfigDict(extra="forbid")

    notify: list[EmailStr] = Field(
        max_length=MAX_ADDRESSES,
        description=(
            "up to 10 addresses told when a destination pauses itself, when deliveries "
            "start to fail for good, and when the monthly quota is reached"
        ),
    )


@scoped
async def get_notify(conn: Conn, scope: OrgScope) -> list[str]:
    """The organization's notification addresses."""
    cur = await conn.execute(queries["get_notify"], {"organization_id": scope.organization_id})
    row = await cur.fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    return list(row["notify"])


@scoped
async def set_notify(conn: Conn, scope: OrgScope, *, settings: NotifySettings) -> list[str]:
    """Replace the addresses (each once, in the order given, compared without case)."""
    kept: dict[str, str] = {}
    for address in settings.notify:
        kept.setdefault(str(address).lower(), str(address))
    cur = await conn.execute(
        queries["set_notify"],
        {"organization_id": scope.organization_id, "notify": list(kept.values())},
    )
    row = await cur.fetchone()
    assert row is not None
    return list(row["notify"])


async def update_organization(change: Change, *, settings: NotifySettings) -> list[str]:
    """Replace the organization's notification addresses (`set_notify`) as the change."""
    async with change as conn:
        return await set_notify(conn, change.scope, settings=settings)


async def gather(conn: Conn, *, now: datetime) -> int:
    """Write the notices of quotas reached this month and of dead-delivery alerts opened
    (each once); returns how many. Runs as the owner, across organizations."""
    quota = await conn.execute(
        queries["notice_quota_reached"], {"now": now, "month": month_of(now), "limits": _LIMITS}
    )
    dead = await conn.execute(queries["notice_dead_alerts"], {"now": now})
    return quota.rowcount + dead.rowcount


async def send_due(db: Database, *, now: datetime, public_url: str) -> int:
    """Fold the notices due into emails (one per organization and kind, each in its own
    transaction); returns how many emails were queued."""
    async with db.connection() as conn:
        cur = await conn.execute(queries["notices_due"], {"now": now, "limit": BATCH})
        due = await cur.fetchall()
    queued = 0
    for pair in due:
        async with db.transaction() as conn:
            queued += await _fold(
                conn, pair["organization_id"], pair["kind"], now=now, public_url=public_url
            )
    return queued


async def _fold(
    conn: Conn, organization_id: str, kind: NotificationKind, *, now: datetime, public_url: str
) -> int:
    params = {"organization_id": organization_id, "kind": kind, "now": now}
    locked = await (await conn.execute(queries["lock_notifying_organization"], params)).fetchone()
    if locked is None:
        return 0  # removed meanwhile
    notices = await (await conn.execute(queries["notices_to_fold"], params)).fetchall()
    if not notices:
        return 0  # another worker sent them, or the hour is not over
    ids = [row["id"] for row in notices]
    addresses = list(locked["notify"])
    delivery_id = None
    if addresses:
        subject, text = notice_email(kind, [row["data"] for row in notices], public_url)
        delivery_id = new_id("dlv")
        await conn.execute(
            queries["insert_notice_email"],
            {
                "id": delivery_id,
                "organization_id": organization_id,
                "now": now,
                "payload": Jsonb({"event": NOTICE_EVENT, "subject": subject, "text": text}),
                "target": Jsonb({"to": addresses}),
            },
        )
    await conn.execute(
        queries["handle_notices"], {"ids": ids, "delivery_id": delivery_id, "now": now}
    )
    return 1 if delivery_id else 0


def notice_email(
    kind: NotificationKind, notices: Sequence[Mapping[str, Any]], public_url: str
) -> tuple[str, str]:
    """The subject and text of one email about `notices` of one kind (oldest first)."""
    app = f"{public_url.rstrip('/')}/app"
    count = len(notices)
    if kind == "destination.paused":
        names = [_quoted(n.get("name")) for n in notices]
        subject = (
            f"Postbag paused the destination {names[0]}"
            if count == 1
            else f"Postbag paused {count} destinations"
        )
        lines = [
            f"Every attempt to {'it' if count == 1 else 'each'} failed for its window, so "
            "Postbag stopped sending to it. Its queued deliveries wait; none is lost.",
            "",
            *(
                f"- {name}: {_failed_for(notice)}"
                for name, notice in zip(names[:LISTED], notices[:LISTED], strict=True)
            ),
            *_more(count),
            "",
            "When the receiver works again, turn the destination back on (Paused · Turn on)",
            "and send again what did not go through:",
            f"{app}/destinations",
        ]
    elif kind == "delivery.dead":
        names = [_quoted(n.get("name")) for n in notices]
        subject = (
            f"Deliveries to {names[0]} are failing"
            if count == 1
            else f"Deliveries are failing to {count} destinations or forms"
        )
        lines = [
            "A delivery ended dead (every attempt failed, or the receiver refused it) to:",
            "",
            *(f"- {name}" for name in names[:LISTED]),
            *_more(count),
            "",
            "The alert counts the ones after it. See them and send them again:",
            f"{app}/alerts",
        ]
    else:
        first = notices[-1]
        subject = f"Postbag: this month's submissions reached the plan's {first.get('limit')}"
        lines = [
            f"{first.get('submissions')} submissions in {first.get('month')}, the plan's "
            f"monthly quota of {first.get('limit')}. Submissions over it are stored and "
            "their deliveries held until the quota allows them (a new month, or a larger plan).",
            "",
            app,
        ]
    return subject, "\n".join(lines)


def _failed_for(notice: Mapping[str, Any]) -> str:
    """A pause's figures: the attempts that failed in the window and the owner's threshold
    (a notice queued before it was kept has only the count)."""
    attempts, hours = notice.get("attempts"), notice.get("hours")
    said = f"{attempts} attempt{'s' if attempts != 1 else ''} in {hours} hours, none sent"
    threshold = notice.get("threshold")
    if threshold is None:
        return said
    return f"{said} (it pauses after {threshold} failed in {hours} hours)"


def _quoted(name: object) -> str:
    # A destination's or form's name is tenant-written: quoted on one line, never a link.
    return quoted(name) if name else "(removed)"


def _more(count: int) -> list[str]:
    return [f"… and {count - LISTED} more"] if count > LISTED else []
