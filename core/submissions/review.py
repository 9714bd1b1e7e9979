"""The owner's review of a submission: release it from quarantine (or spam) so the form's
live routes deliver it, or mark it as spam so nothing more is sent.

A release plans the deliveries an accepted submission would have got from the routes live
now, as the submit path plans them (`core.intake.payload`), and happens once:
the submission becomes `accepted` with `released_at`, and the status and reason it had stay
in its `submission.released` event. Both refuse erased or expired values. Both teach the
organization's learned filter (`core.spam.model`): a release as not spam, a mark as spam.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from psycopg.types.json import Jsonb

from core.intake.payload import form_snapshot, route_template
from core.outbox.wakeup import wake_deliveries
from core.owner.changes import Change
from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import AlreadyReleased, NotFound, ValuesErased, ValuesExpired
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.platform.vocabulary import TrainingLabel
from core.spam.model import train
from core.spam.verdict import model_changed
from core.submissions.records import readable


@dataclass(frozen=True, slots=True)
class Review:
    """What a review did: the submission, and how many deliveries it planned or skipped."""

    submission_id: str
    deliveries: int


async def _locked(conn: Conn, scope: OrgScope, submission_id: str, now: datetime) -> dict[str, Any]:
    cur = await conn.execute(
        queries["lock_submission_for_review"],
        {"id": submission_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound("no such submission")
    state = readable(row, now)
    if state == "erased":
        raise ValuesErased("the submission's values were erased: there is nothing to deliver")
    if state == "expired":
        raise ValuesExpired("the submission is past its retention: there is nothing to deliver")
    return row


def _erase_at(row: dict[str, Any], status: str) -> datetime | None:
    """When the values of a submission that now has `status` expire: counted from its
    arrival, as if it had arrived with that status."""
    days = PLANS[row["plan"]].retention_for(status, row["form_retention_days"])
    return None if days is None else row["received_at"] + timedelta(days=days)


def _planned(route: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": new_id("dlv"),
        "route_id": route["route_id"],
        "template": route_template(route["template"]),
    }


async def _teach(
    conn: Conn,
    scope: OrgScope,
    row: dict[str, Any],
    label: TrainingLabel,
    *,
    now: datetime,
    secret_key: bytes,
) -> None:
    """The owner's decision teaches the organization's learned filter (docs/spam.md)."""
    await train(
        conn,
        organization_id=scope.organization_id,
        submission_id=row["id"],
        label=label,
        values=row["values"] or {},
        secret_key=secret_key,
        now=now,
    )


@scoped
async def set_accepted(
    conn: Conn, scope: OrgScope, submission_id: str, *, now: datetime, secret_key: bytes
) -> Review:
    """Release a quarantined or spam submission: `accepted`, one delivery per live route that
    takes accepted submissions. Already released (or accepted): AlreadyReleased."""
    row = await _locked(conn, scope, submission_id, now)
    if row["released_at"] is not None or row["status"] == "accepted":
        raise AlreadyReleased(
            "this submission was already released"
            if row["released_at"] is not None
            else "this submission is accepted: its routes already planned its deliveries"
        )
    # A submission stored before its form's parts were kept with it gets them from the form
    # as it is now; one that has them keeps them (`coalesce` in `release_submission`).
    snapshot = form_snapshot(
        form_name=row["form_name"],
        labels=row["labels"] or {},
        consent_field=row["consent_field"],
        ack_email=row["ack_email"],
        values=row["values"] or {},
        attachments=row["attachments"],
    )
    cur = await conn.execute(
        queries["release_routes"],
        {"form_id": row["form_id"], "organization_id": scope.organization_id},
    )
    planned = [_planned(route) for route in await cur.fetchall()]
    cur = await conn.execute(
        queries["release_submission"],
        {
            "id": row["id"],
            "organization_id": scope.organization_id,
            "form_id": row["form_id"],
            "from_status": row["status"],
            "from_reason": row["reason"],
            "form_snapshot": Jsonb(snapshot),
            "deliveries": Jsonb(planned),
            "erase_at": _erase_at(row, "accepted"),
            "now": now,
        },
    )
    done = await cur.fetchone()
    assert done is not None
    await _teach(conn, scope, row, "ham", now=now, secret_key=secret_key)
    return Review(submission_id=row["id"], deliveries=int(done["deliveries"]))


@scoped
async def set_spam(
    conn: Conn, scope: OrgScope, submission_id: str, *, now: datetime, secret_key: bytes
) -> Review:
    """Mark a submission as spam: its unsent deliveries end `skipped`. Marking a spam
    submission again changes nothing."""
    row = await _locked(conn, scope, submission_id, now)
    if row["status"] == "spam":
        return Review(submission_id=row["id"], deliveries=0)
    cur = await conn.execute(
        queries["mark_submission_spam"],
        {
            "id": row["id"],
            "organization_id": scope.organization_id,
            "form_id": row["form_id"],
            "from_status": row["status"],
            "from_reason": row["reason"],
            "erase_at": _erase_at(row, "spam"),
            "now": now,
        },
    )
    done = await cur.fetchone()
    assert done is not None
    await _teach(conn, scope, row, "spam", now=now, secret_key=secret_key)
    return Review(submission_id=row["id"], deliveries=int(done["skipped"]))


async def release_submission(
    change: Change, services: Services, submission_id: str, *, now: datetime
) -> Review:
    """Release a submission (`set_accepted`) as the change; the deliverers wake once it has
    committed, when it planned any."""
    async with change as conn:
        review = await set_accepted(
            conn,
            change.scope,
            submission_id,
            now=now,
            secret_key=services.settings.require_secret_key(),
        )
        if review.deliveries:
            change.after_commit(partial(wake_deliveries, services))
    model_changed(services, change.scope.organization_id)
    return review


async def mark_spam(
    change: Change, services: Services, submission_id: str, *, now: datetime
) -> Review:
    """Mark a submission as spam (`set_spam`) as the change."""
    async with change as conn:
        review = await set_spam(
            conn,
            change.scope,
            submission_id,
            now=now,
            secret_key=services.settings.require_secret_key(),
        )
    model_changed(services, change.scope.organization_id)
    return review
