"""The outbox's SQL: claim due deliveries under a lease, write fenced outcomes, hold,
throttle and release. Every call is one short statement or transaction; none spans a send.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from core.destinations.bodies import event_body, submitted_body
from core.destinations.order import field_order
from core.destinations.rates import RECOVER, TYPE_RATES
from core.outbox.backoff import BASE_DELAY, MAX_DELAY, STORM_THRESHOLD
from core.owner import hooks
from core.owner.alerts import raise_alert
from core.owner.plans import PLANS
from core.platform.clock import month_of
from core.platform.db import Conn
from core.platform.queries import execute, queries
from core.platform.scope import OrgScope

# Monthly submission limits by plan, as the SQL compares them (null: unlimited).
_LIMITS = json.dumps({name: plan.monthly_submissions for name, plan in PLANS.items()})


@dataclass(frozen=True, slots=True)
class Claim:
    """A delivery this worker holds under a lease, with what the live checks need."""

    id: str
    organization_id: str
    kind: str
    submission_id: str | None
    destination_id: str | None
    form_id: str | None
    channel: str
    attempts: int
    max_attempts: int
    claim_token: UUID
    payload: Mapping[str, Any]
    target: Mapping[str, Any]
    template: Mapping[str, Any] | None
    secret: str | None
    erased_at: datetime | None
    erase_at: datetime | None
    destination_deleted_at: datetime | None
    destination_enabled: bool | None
    # Why it is paused: `owner` (its deliveries are skipped) or `failing` (they wait).
    destination_paused_reason: str | None
    destination_health: str | None
    destination_probe_after: datetime | None
    destination_failures: int | None
    # The destination's adaptive limit of sends in flight (None: the worker's default).
    destination_send_limit: int | None
    over_quota: bool
    # A stream event's delivery: the event its payload was built from (0024).
    event_id: str | None = None

    def __repr__(self) -> str:  # the secret never reaches a log line or a traceback
        return f"Claim(id={self.id!r}, organization_id={self.organization_id!r})"

    @property
    def log_ids(self) -> dict[str, Any]:
        """The ids a log line about this delivery carries."""
        return {
            "org_id": self.organization_id,
            "delivery_id": self.id,
            "submission_id": self.submission_id,
            "destination_id": self.destination_id,
            "form_id": self.form_id,
        }

    @property
    def subject(self) -> str | None:
        """Whose `delivery.dead` alert this delivery raises when it dies and resolves when
        it is sent: its destination, or its form for acknowledgement emails."""
        return self.destination_id or self.form_id


async def claim_due(
    conn: Conn,
    *,
    now: datetime,
    limit: int,
    lease: timedelta,
    per_destination: int = 8,
    max_orgs: int | None = None,
) -> list[Claim]:
    """Claim up to `limit` due deliveries (or expired leases) into `sending` (one statement).

    Fair across organizations and their destinations; never more of a destination than its
    limit of sends in flight (at most `per_destination`) leaves free now, nor than its
    rate's bucket holds whole tokens (each row claimed spends one: core/outbox/rates.py).
    Each claim spends an attempt (`Claim.attempts` counts those spent before it).
    """
    cur = await execute(
        conn,
        "claim_due",
        {
            "now": now,
            "limit": limit,
            "max_orgs": max_orgs or limit,
            "per_destination": per_destination,
            "lease": lease,
            "recover": RECOVER,
            "type_rates": TYPE_RATES,
            "limits": _LIMITS,
            "month": month_of(now),
        },
    )
    rows = await cur.fetchall()
    return [
        Claim(
            id=row["id"],
            organization_id=row["organization_id"],
            kind=row["kind"],
            submission_id=row["submission_id"],
            destination_id=row["destination_id"],
            form_id=row["form_id"],
            channel=row["channel"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            claim_token=row["claim_token"],
            payload=event_body(row)
            if row["kind"] == "event"
            else row["payload"]
            if row["payload"] is not None
            else _submitted(row),
            target=row["target"],
            template=_template(row),
            secret=row["secret"],
            erased_at=row["event_erased_at"] if row["kind"] == "event" else row["erased_at"],
            erase_at=row["event_erase_at"] if row["kind"] == "event" else row["erase_at"],
            destination_deleted_at=row["destination_deleted_at"],
            destination_enabled=row["destination_enabled"],
            destination_paused_reason=row["destination_paused_reason"],
            destination_health=row["destination_health"],
            destination_probe_after=row["destination_probe_after"],
            destination_failures=row["destination_failures"],
            destination_send_limit=row["destination_send_limit"],
            over_quota=row["over_quota"],
            event_id=row["event_id"],
        )
        for row in rows
    ]


def _submitted(row: Mapping[str, Any]) -> dict[str, Any]:
    """The `form.submitted` body of a submission's delivery, from the submission's row (the
    one copy of its values) as the claim joined it."""
    return submitted_body(
        form_id=row["form_id"],
        snapshot=row["form_snapshot"] or {},
        submission_id=row["submission_id"],
        values=row["values"] or {},
        attachments=row["attachments"] or [],
        meta=row["meta"] or {},
        test=bool(row["test"]),
        submitted_at=row["received_at"],
    )


def _template(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The delivery's route template, with what its submission keeps once for every
    delivery: the form's name and labels as accepted, and the visitor's field order."""
    if row["submission_id"] is None:
        return row["template"]  # type: ignore[no-any-return]
    snapshot = row["form_snapshot"] or {}
    labels = snapshot.get("labels") or {}
    return {
        **(row["template"] or {}),
        "labels": labels,
        "field_order": field_order(row["values"] or {}, row["field_order"], labels),
        "form_name": snapshot.get("form_name"),
        # The names an email reads consent from and replies to (a row stored before they
        # were kept has neither).
        **{
            name: snapshot[name] for name in ("consent_field", "reply_to_field") if name in snapshot
        },
    }


@dataclass(frozen=True, slots=True)
class Attempt:
    """One send as `delivery_attempts` records it."""

    started_at: datetime
    duration_ms: int
    http_status: int | None
    error_class: str | None
    excerpt: str | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a claim, as `finish` writes it: `attempt` when a send was made (the
    claim's attempt stays spent; without one it is given back), `event` (with
    `event_data`) when the outcome appends one."""

    claim: Claim
    now: datetime
    status: str
    reason: str | None
    detail: str | None
    next_attempt_at: datetime | None = None
    attempt: Attempt | None = None
    event: str | None = None
    event_data: Mapping[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        """The outcome as one object of `finish_deliveries`' JSON array."""
        claim, attempt = self.claim, self.attempt
        return {
            "id": claim.id,
            "organization_id": claim.organization_id,
            "claim_token": str(claim.claim_token),
            "status": self.status,
            "spent": 1 if attempt is not None else 0,
            "next_attempt_at": _iso(self.next_attempt_at),
            "reason": self.reason,
            "detail": self.detail,
            "now": _iso(self.now),
            "attempt": claim.attempts + 1,
            "started_at": _iso(attempt.started_at if attempt else self.now),
            "duration_ms": attempt.duration_ms if attempt else 0,
            "http_status": attempt.http_status if attempt else None,
            "error_class": attempt.error_class if attempt else None,
            "excerpt": attempt.excerpt[:512] if attempt and attempt.excerpt else None,
            "event": self.event,
            "event_data": dict(self.event_data or {}),
            "subject_id": claim.subject,
        }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


async def finish(conn: Conn, outcomes: Sequence[Outcome]) -> list[bool]:
    """Write outcomes, each fenced by its claim token, with their attempts and events.

    One statement (one round trip, atomic) for all of them, which also resolves the open
    `delivery.dead` alert of each subject a written `sent` outcome delivered to. For each
    outcome, False when its claim had been lost (expired and taken again): nothing changed
    but the attempt, recorded as `fenced`. When one is `dead`, that statement and what each
    written death leaves (`_dead`) are one transaction: a crash or a failed write between
    them leaves none of it, the claim still ours to write again (a retry) or to lose to the
    next claim once its lease is over, which ends the delivery again.
    """
    if not any(outcome.status == "dead" for outcome in outcomes):
        return await _finish(conn, outcomes)
    async with conn.transaction():
        won = await _finish(conn, outcomes)
        await _dead(
            conn, [o for o, w in zip(outcomes, won, strict=True) if w and o.status == "dead"]
        )
    return won


async def _finish(conn: Conn, outcomes: Sequence[Outcome]) -> list[bool]:
    rows = [outcome.row() for outcome in outcomes]
    cur = await conn.execute(
        queries["finish_deliveries"],
        {"outcomes": json.dumps(rows, default=str), "ids": [row["id"] for row in rows]},
    )
    written = {(row["id"], row["claim_token"]) for row in await cur.fetchall()}
    return [(o.claim.id, o.claim.claim_token) in written for o in outcomes]


async def _dead(conn: Conn, outcomes: Sequence[Outcome]) -> None:
    """What dead deliveries leave: each its alert (one open per subject counts them), and
    the `delivery.dead` body queued to the hooks subscribed to it (never for a hook's own
    lifecycle delivery: a dead one would feed itself). Alerts are raised in the order of
    their subjects, so two groups' raises never wait on each other in a cycle; a deadlock
    with another group's resolution is a transient failure the completer tries again."""
    for outcome in sorted(outcomes, key=lambda o: (o.claim.organization_id, _alerted(o.claim))):
        claim = outcome.claim
        await raise_alert(
            conn,
            organization_id=claim.organization_id,
            kind="delivery.dead",
            subject_id=_alerted(claim),
            detail=f"{claim.id}: {outcome.reason}",
            delivery_id=claim.id,
            now=outcome.now,
        )
        if claim.kind == "lifecycle":
            continue
        data = {
            "delivery": claim.id,
            "kind": claim.kind,
            "submission": claim.submission_id,
            "event_id": claim.event_id,
            "destination": claim.destination_id,
            "reason": outcome.reason,
        }
        await hooks.queue_lifecycle(
            conn, OrgScope(claim.organization_id), event="delivery.dead", data=data, now=outcome.now
        )


def _alerted(claim: Claim) -> str:
    """The subject of a dead delivery's alert: a delivery with neither a destination nor a
    form (an account email) is its own."""
    return claim.subject or claim.id


async def give_back_claims(
    conn: Conn, claims: Sequence[Claim], *, now: datetime, detail: str
) -> list[str]:
    """Return claims to `pending` (`failed` when attempts were spent before), due again at
    once, and un-spend the attempt each claim spent: for sends stopped before they could answer (a
    pass out of budget, a worker shutting down). Fenced by claim token; returns the ids
    given back."""
    if not claims:
        return []
    rows = [{"id": c.id, "claim_token": str(c.claim_token)} for c in claims]
    cur = await conn.execute(
        queries["give_back_claims"],
        {"claims": json.dumps(rows), "ids": [c.id for c in claims], "now": now, "detail": detail},
    )
    return [row["id"] for row in await cur.fetchall()]


async def release(
    conn: Conn,
    claim: Claim,
    *,
    now: datetime,
    held: bool = False,
    throttled: bool = False,
    next_attempt_at: datetime | None = None,
    detail: str,
) -> bool:
    """Give a claim back with its attempt unspent (held for quota, or throttled)."""
    cur = await conn.execute(
        queries["release_claim"],
        {
            "id": claim.id,
            "claim_token": claim.claim_token,
            "held": held,
            "throttled": throttled,
            "next_attempt_at": next_attempt_at,
            "detail": detail,
            "now": now,
        },
    )
    return await cur.fetchone() is not None


async def release_held(conn: Conn, *, now: datetime) -> int:
    """Un-hold deliveries of organizations back within their quota; returns how many."""
    cur = await conn.execute(
        queries["release_held"], {"now": now, "month": month_of(now), "limits": _LIMITS}
    )
    return len(await cur.fetchall())


async def _open_probe_window(
    conn: Conn, destination_id: str, *, now: datetime, reopen: bool
) -> datetime | None:
    cur = await conn.execute(
        queries["open_probe_window"],
        {
            "id": destination_id,
            "now": now,
            "reopen": reopen,
            "threshold": STORM_THRESHOLD,
            "base": BASE_DELAY,
            "cap": MAX_DELAY,
        },
    )
    row = await cur.fetchone()
    return None if row is None else row["probe_after"]


async def destination_failed(
    conn: Conn, destination_id: str, *, now: datetime, probe: bool
) -> tuple[bool, datetime | None]:
    """Count a failure (of a healthy destination, or of a probe); returns (failing, window end).

    The failure of a send already in flight when the destination turned failing is not
    counted: it returns (True, None). The count and the window it opens commit together.
    """
    async with conn.transaction():
        cur = await conn.execute(
            queries["destination_failed"],
            {"id": destination_id, "probe": probe, "threshold": STORM_THRESHOLD},
        )
        row = await cur.fetchone()
        if row is None:
            return True, None
        if row["consecutive_failures"] < STORM_THRESHOLD:
            return row["health"] == "failing", row["probe_after"]
        return True, await _open_probe_window(conn, destination_id, now=now, reopen=True)


async def promote_parked(conn: Conn, destination_id: str, *, at: datetime, now: datetime) -> None:
    """Make one parked delivery of a failing destination due at `at` (the next probe)."""
    await conn.execute(queries["promote_parked"], {"id": destination_id, "at": at, "now": now})


async def park_due(
    conn: Conn,
    destination_id: str,
    *,
    now: datetime,
    until: datetime,
    detail: str = "destination_failing",
) -> int:
    """Park the due deliveries of a failing (or paused) destination in one statement;
    returns how many."""
    cur = await conn.execute(
        queries["park_due"], {"id": destination_id, "now": now, "until": until, "detail": detail}
    )
    return cur.rowcount


async def destination_succeeded(conn: Conn, destination_id: str, *, now: datetime) -> int:
    """Restore a destination after a success; returns how many deliveries it released."""
    cur = await conn.execute(queries["destination_succeeded"], {"id": destination_id})
    if await cur.fetchone() is None:
        return 0
    cur = await conn.execute(queries["release_throttled"], {"id": destination_id, "now": now})
    return cur.rowcount


async def take_probe(conn: Conn, destination_id: str, *, now: datetime) -> datetime | None:
    """Become the one probe of a failing destination; None when this window's is taken."""
    return await _open_probe_window(conn, destination_id, now=now, reopen=False)


async def probe_window_end(conn: Conn, destination_id: str) -> tuple[bool, datetime | None]:
    """Whether a destination is failing, and when its current probe window ends."""
    cur = await conn.execute(queries["destination_probe_after"], {"id": destination_id})
    row = await cur.fetchone()
    if row is None:
        return False, None
    return row["health"] == "failing", row["probe_after"]


async def adapt_send_limit(
    conn: Conn, destination_id: str, *, target: int, ceiling: int
) -> int | None:
    """Move a destination's limit of sends in flight toward `target`: down at once, up by
    one (None once it reaches `ceiling`, the worker's default). Returns the new limit."""
    cur = await conn.execute(
        queries["adapt_send_limit"], {"id": destination_id, "target": target, "ceiling": ceiling}
    )
    row = await cur.fetchone()
    return None if row is None else row["send_limit"]
