"""What the owner is told by email, through a channel that does not depend on their
destinations, and also, when they choose one, through a chat or webhook destination
(docs/operations.md#owner-notifications).

The organization's addresses (`notify`, at most MAX_ADDRESSES) receive a notice when a
destination pauses itself (`destination.paused`), when a `delivery.dead` alert opens (the
first dead delivery of a storm) and when the month's submissions reach the plan's quota
(`quota.reached`). A notice is a `notifications` row, written by the statement that finds
it: the pause statement writes its own, and the retention tick's `gather` writes the other
two from the alerts and usage counters. `send_due` folds them into email deliveries of kind
`notification`, sent by the outbox through the installation's email provider like any
email, with retries: at most one email per kind per hour per organization, the first at
once and the ones after it folded into one digest when the hour since ends. The same
subject and text also go, as a `notification` delivery of its own, to the organization's
`notify_destination` (a chat or webhook destination) unless that destination is removed,
paused, failing, or itself what a folded notice is about: never the failing one. Written in
the same transaction as the rows they fold, so a crash neither loses nor repeats one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, EmailStr, Field, model_validator

from core.destinations.registry import ADAPTERS
from core.destinations.text import NOTICE_EVENT, quoted
from core.owner.changes import Change
from core.owner.plans import PLANS
from core.platform.clock import month_of
from core.platform.db import Conn, Database
from core.platform.errors import InvalidInput
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
# The destination types a notice may also go to: a chat or a webhook (an email
# destination's address belongs in `notify`).
NOTICE_DESTINATION_TYPES = tuple(name for name, a in ADAPTERS.items() if a.takes_notices)


class NotifySettings(BaseModel):
    """Where the organization's notices go: `{"notify": ["ops@example.com"],
    "notify_destination": "dst_…"}`. A key left out keeps its setting; an empty list sends
    no email, a null destination none to a destination."""

    model_config = ConfigDict(extra="forbid")

    notify: list[EmailStr] | None = Field(
        default=None,
        max_length=MAX_ADDRESSES,
        description=(
            "up to 10 addresses told when a destination pauses itself, when deliveries "
            "start to fail for good, and when the monthly quota is reached"
        ),
    )
    notify_destination: str | None = Field(
        default=None,
        max_length=100,
        description=(
            "a chat or webhook destination (`dst_…`) told the same, except about itself "
            "and while it is paused or failing; null: none"
        ),
    )

    @model_validator(mode="after")
    def _something_set(self) -> NotifySettings:
        if not self.model_fields_set:
            raise ValueError("give notify, notify_destination or both")
        if "notify" in self.model_fields_set and self.notify is None:
            raise ValueError("notify is a list of addresses ([] for none)")
        return self


@scoped
async def notice_settings(conn: Conn, scope: OrgScope) -> dict[str, Any]:
    """The organization's notification addresses and notice destination."""
    cur = await conn.execute(queries["get_notify"], {"organization_id": scope.organization_id})
    row = await cur.fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    return {"notify": list(row["notify"]), "notify_destination": row["notify_destination"]}


@scoped
async def set_notices(conn: Conn, scope: OrgScope, *, settings: NotifySettings) -> dict[str, Any]:
    """Replace what `settings` names: the addresses (each once, in the order given, compared
    without case) and the notice destination (a live chat or webhook destination of the
    organization, else InvalidInput)."""
    given = settings.model_fields_set
    kept: dict[str, str] = {}
    for address in settings.notify or []:
        kept.setdefault(str(address).lower(), str(address))
    destination = settings.notify_destination
    if "notify_destination" in given and destination is not None:
        cur = await conn.execute(
            queries["notice_destination_type"],
            {"id": destination, "organization_id": scope.organization_id},
        )
        found = await cur.fetchone()
        if found is None or found["type"] not in NOTICE_DESTINATION_TYPES:
            why = (
                f"no destination {destination}"
                if found is None
                else f"a {found['type']} destination takes no notices: put addresses in notify"
            )
            raise InvalidInput(
                f"notify_destination must be a chat or webhook destination ({why})",
                [{"field": "notify_destination", "message": why}],
            )
    cur = await conn.execute(
        queries["set_notify"],
        {
            "organization_id": scope.organization_id,
            "set_notify": "notify" in given,
            "notify": list(kept.values()),
            "set_destination": "notify_destination" in given,
            "destination": destination,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    return {"notify": list(row["notify"]), "notify_destination": row["notify_destination"]}


async def update_organization(change: Change, *, settings: NotifySettings) -> dict[str, Any]:
    """Replace where the organization's notices go (`set_notices`) as the change."""
    async with change as conn:
        return await set_notices(conn, change.scope, settings=settings)


@scoped
async def recent_notices(conn: Conn, scope: OrgScope, *, limit: int) -> list[dict[str, Any]]:
    """The organization's latest notices, newest first, each with where it went: the email
    (its addresses and state) and the destination's delivery (its name and state)."""
    cur = await conn.execute(
        queries["recent_notices"], {"organization_id": scope.organization_id, "limit": limit}
    )
    return await cur.fetchall()


async def gather(conn: Conn, *, now: datetime) -> int:
    """Write the notices of quotas reached this month and of dead-delivery alerts opened
    (each once); returns how many. Runs as the owner, across organizations."""
    quota = await conn.execute(
        queries["notice_quota_reached"], {"now": now, "month": month_of(now), "limits": _LIMITS}
    )
    dead = await conn.execute(queries["notice_dead_alerts"], {"now": now})
    return quota.rowcount + dead.rowcount


async def send_due(db: Database, *, now: datetime, public_url: str) -> int:
    """Fold the notices due into emails and notice destinations' deliveries (one per
    organization and kind, each in its own transaction); returns how many folds queued one."""
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
    subject, text = notice_email(kind, [row["data"] for row in notices], public_url)
    delivery_id = destination_delivery = None
    if locked["notify_destination_id"]:
        # Never to a destination a notice is about (it paused, or its deliveries died).
        about = [
            str(row["subject_id"] if kind == "destination.paused" else row["data"].get("subject"))
            for row in notices
        ]
        cur = await conn.execute(
            queries["insert_notice_delivery"],
            {
                "id": new_id("dlv"),
                "organization_id": organization_id,
                "destination_id": locked["notify_destination_id"],
                "types": list(NOTICE_DESTINATION_TYPES),
                "about": about,
                "now": now,
                "payload": Jsonb(
                    {"event": NOTICE_EVENT, "kind": kind, "subject": subject, "text": text}
                ),
            },
        )
        found = await cur.fetchone()
        destination_delivery = found["id"] if found else None
    if addresses:
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
        queries["handle_notices"],
        {
            "ids": ids,
            "delivery_id": delivery_id,
            "destination_delivery_id": destination_delivery,
            "now": now,
        },
    )
    return 1 if delivery_id or destination_delivery else 0


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
