"""Ingest: events checked, stored and fanned out in one transaction (docs/streams.md).

One path for one event and for a batch: each event is parsed on its own (a malformed one is
`rejected` and never stored), checked against its type's schema in the checker's child
processes, then every event is inserted in one statement with one delivery per matching
route. An event whose client id (or idempotency key) the stream already holds is read back:
the same payload is a `duplicate`, another payload a conflict. Nothing is half-stored: the
events, their deliveries and the month's count are one statement, committed together or
not at all.

A stream's settings (with its schemas, routes and plan) are read with the caller's key in
one round trip, and kept, per database and stream, for later ingests, as a form is for
submits (`core.intake.form`): an ingest with kept settings sends their revision, and the
ingest key when there is one, with the insert, which stores nothing unless the stream is
still live at that revision and the key still one of its live keys (a revoked key fails at
once, in every process). Otherwise, and whenever nothing reaches the insert, the ingest
reads the settings afresh (answering as it would have from the start: 401, 403, 404, 402)
and runs again. An API key's organization is checked before (`scope_of_key`), and must be
the kept stream's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from psycopg.types.json import Jsonb
from pydantic import AwareDatetime, BaseModel, ConfigDict, StringConstraints, ValidationError

from core.owner.organizations import hash_key
from core.owner.plans import PLANS, Plan
from core.platform.clock import month_of
from core.platform.db import Conn
from core.platform.errors import (
    IdempotencyConflict,
    IngestKeyOnly,
    InvalidInput,
    NotFound,
    PlanLimitReached,
    PostbagError,
    StreamClosed,
    Unauthenticated,
    invalid_input,
)
from core.platform.ids import new_id
from core.platform.kept import Kept
from core.platform.queries import execute, queries
from core.platform.scope import OrgScope
from core.platform.services import Registry, Services
from core.platform.values import check_storable
from core.schemas.checker import judged, schema_checker
from core.schemas.versions import Version, checked_version

MAX_EVENT_BYTES = 64 * 1024
MAX_BATCH_EVENTS = 500
MAX_IDEMPOTENCY_KEY = 255

ClientId = Annotated[str, StringConstraints(min_length=1, max_length=255)]
EventType = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class EventIn(BaseModel):
    """One event as posted."""

    model_config = ConfigDict(extra="forbid")

    id: ClientId | None = None
    type: EventType
    occurred_at: AwareDatetime | None = None
    data: dict[str, Any]


@dataclass(slots=True)
class Outcome:
    """What became of one posted event: `accepted`, `quarantined`, `duplicate` or
    `rejected` (with `conflict` when its id was used with another payload)."""

    index: int
    id: str | None
    status: str
    event: str | None = None
    errors: list[dict[str, str]] | None = None
    conflict: bool = False
    # Why a rejected event was refused, as an event posted alone answers it.
    refusal: InvalidInput | None = None


@dataclass(frozen=True, slots=True)
class _Stream:
    id: str
    organization_id: str
    schema_mode: str
    retention_days: int | None
    plan: Plan
    month_events: int
    # The owner's latest version per event type (`None`: the default).
    schemas: dict[str | None, Version]
    routes: list[dict[str, Any]]
    revision: int
    # Kept from an earlier ingest: the insert confirms `revision` (see the module's doc).
    kept: bool = False


@dataclass(slots=True)
class _Candidate:
    index: int
    event: EventIn
    payload_hash: bytes
    idempotency_key: str | None
    id: str = field(default_factory=lambda: new_id("evt"))
    status: str = "accepted"
    reason: str | None = None
    errors: list[dict[str, str]] | None = None
    schema_version: int | None = None


def canonical(event: EventIn) -> bytes:
    """An event's type, time and data as compact JSON with sorted keys (its size and its
    hash: key order and spacing, and the time's zone, do not matter)."""
    occurred = event.occurred_at.astimezone(UTC).isoformat() if event.occurred_at else None
    body = {"type": event.type, "occurred_at": occurred, "data": event.data}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def parse_event(raw: Any, *, storable: bool = False) -> tuple[EventIn, bytes]:
    """One posted event and its payload hash, or InvalidInput naming what is wrong
    (UnstorableValue and InputLimit too): not storable (unless `storable` says it was
    checked already), not of the event's shape, or over 64 KiB (its type, time and data as
    compact JSON)."""
    if not storable:
        check_storable(raw)
    try:
        event = EventIn.model_validate(raw)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    text = canonical(event)
    if len(text) > MAX_EVENT_BYTES:
        raise InvalidInput(
            "the event is over 64 KiB",
            [{"field": "event", "message": f"at most {MAX_EVENT_BYTES} bytes of JSON"}],
        )
    return event, hashlib.sha256(text).digest()


def idempotency_key(header: str | None) -> str | None:
    """The `Idempotency-Key` header as kept (stripped; empty: none)."""
    key = (header or "").strip()
    if not key:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidInput(
            "the idempotency key is too long",
            [{"field": "Idempotency-Key", "message": f"at most {MAX_IDEMPOTENCY_KEY} characters"}],
        )
    return key


@dataclass(frozen=True, slots=True)
class Caller:
    """Who posts: an API key's organization, or an ingest key (`pbs_…`), which is checked
    in the same round trip as the stream's settings are read."""

    scope: OrgScope | None = None
    ingest_key: str | None = None


# Stream settings kept by the process's services (tests have several), at most KEPT_STREAMS.
KEPT_STREAMS = 1024
_KEPT: Registry[Kept[_Stream]] = Registry("kept streams", lambda: Kept(KEPT_STREAMS))


def _kept_stream(services: Services, caller: Caller, stream_id: str) -> _Stream | None:
    """The stream's settings kept from an earlier ingest, for this caller: any ingest key
    (the insert confirms it), or an API key of the stream's organization."""
    stream = services.state(_KEPT).get(stream_id)
    if stream is None or (
        caller.scope is not None and caller.scope.organization_id != stream.organization_id
    ):
        return None
    return stream


async def _fresh_stream(
    services: Services, caller: Caller, stream_id: str, now: datetime
) -> _Stream:
    """The stream's settings read now (they replace the kept ones, or drop them when the
    read refuses the caller); PlanLimitReached when the month's events are used up."""
    services.state(_KEPT).forget(stream_id)
    async with services.db.connection() as conn:
        stream = await _stream(conn, caller, stream_id, now)
    services.state(_KEPT).keep(stream_id, dataclasses.replace(stream, kept=True))
    limit = stream.plan.monthly_events
    if limit is not None and stream.month_events >= limit:
        raise PlanLimitReached(f"the {stream.plan.name} plan allows {limit} events a month")
    return stream


async def _stream(conn: Conn, caller: Caller, stream_id: str, now: datetime) -> _Stream:
    """The stream's settings; Unauthenticated for an ingest key that is not live, and
    `403 ingest_key_only` for one of another stream."""
    key_hash = hash_key(caller.ingest_key) if caller.ingest_key is not None else None
    organization = caller.scope.organization_id if caller.scope is not None else None
    cur = await conn.execute(
        queries["ingest_context"],
        {
            "stream_id": stream_id,
            "organization_id": organization,
            "key_hash": key_hash,
            "month": month_of(now),
        },
    )
    row = await cur.fetchone()
    if key_hash is not None:
        if row is None:
            raise Unauthenticated("a valid API key is required")
        if row["id"] != stream_id:
            raise IngestKeyOnly("this ingest key posts events to another stream")
    if row is None:
        raise NotFound(f"no stream {stream_id}")
    if not row["accepting"]:
        raise StreamClosed("this stream is not taking events")
    return _Stream(
        id=row["id"],
        organization_id=row["organization_id"],
        schema_mode=row["schema_mode"],
        retention_days=row["retention_days"],
        plan=PLANS[row["plan"]],
        month_events=int(row["month_events"]),
        schemas={
            s["event_type"]: Version(s["version"], s["schema"], s["source"]) for s in row["schemas"]
        },
        routes=list(row["routes"]),
        revision=row["revision"],
    )


async def _check_schema(stream: _Stream, candidate: _Candidate) -> None:
    """The stream's schema for the event's type (or its default) on the event's data:
    `enforce` quarantines what breaks it or could not be checked; `observe` accepts and
    reports the drift."""
    candidate.status, candidate.reason = "accepted", None
    candidate.errors, candidate.schema_version = None, None
    current = checked_version(stream.schema_mode, stream.schemas, candidate.event.type)
    if current is None:
        return
    candidate.schema_version = current.version
    verdict = await schema_checker().check(
        f"{stream.id}:{current.version}", current.schema, candidate.event.data
    )
    reason, errors = judged(verdict)
    if reason is None:
        return
    candidate.errors = errors
    if stream.schema_mode == "enforce":
        candidate.status, candidate.reason = "quarantined", reason


def _planned_deliveries(stream: _Stream, candidates: Sequence[_Candidate]) -> list[dict[str, str]]:
    """One delivery per event and live route that takes its type and status."""
    return [
        {"id": new_id("dlv"), "event_id": c.id, "route_id": route["route_id"]}
        for c in candidates
        for route in stream.routes
        if c.status in route["include_statuses"]
        and (route["event_types"] is None or c.event.type in route["event_types"])
    ]


def _row(stream: _Stream, c: _Candidate, n: int) -> dict[str, Any]:
    return {
        "id": c.id,
        "client_id": c.event.id,
        "idempotency_key": c.idempotency_key,
        "type": c.event.type,
        "status": c.status,
        "reason": c.reason,
        "schema_errors": c.errors,
        "schema_version": c.schema_version,
        "data": c.event.data,
        "payload_hash": c.payload_hash.hex(),
        "occurred_at": c.event.occurred_at.isoformat() if c.event.occurred_at else None,
        "retention_days": stream.plan.retention_for(c.status, stream.retention_days),
        "n": n,
    }


_Stored = tuple[set[str], dict[str, dict[str, Any]], int]


async def _store(
    conn: Conn,
    stream: _Stream,
    key_hash: bytes | None,
    candidates: list[_Candidate],
    now: datetime,
) -> _Stored | None:
    """Insert the candidates, their deliveries and their count in one statement; return
    the ids inserted, the stored events the others repeat (by client id, or by idempotency
    key), and the deliveries planned; None, storing nothing, when the stream's kept
    settings (or the ingest key, `key_hash`) were not confirmed. PlanLimitReached, storing
    nothing, when they would take the month past the plan's events."""
    params = {
        "organization_id": stream.organization_id,
        "stream_id": stream.id,
        "revision": stream.revision if stream.kept else None,
        "key_hash": key_hash if stream.kept else None,
        "now": now,
        "month": month_of(now),
        "limit": stream.plan.monthly_events,
        "events": Jsonb([_row(stream, c, n) for n, c in enumerate(candidates)]),
        "deliveries": Jsonb(_planned_deliveries(stream, candidates)),
    }
    inserted = await (await execute(conn, "insert_stream_events", params)).fetchall()
    if any(row["stale"] for row in inserted):
        return None
    if any(row["over"] for row in inserted):
        limit = stream.plan.monthly_events
        raise PlanLimitReached(f"the {stream.plan.name} plan allows {limit} events a month")
    ids = {row["id"] for row in inserted}
    deliveries = int(inserted[0]["deliveries"]) if inserted else 0
    repeats = [c for c in candidates if c.id not in ids]
    stored: dict[str, dict[str, Any]] = {}
    if repeats:
        # A concurrent ingest of the same id has committed by now (the insert waited for
        # it): this statement's snapshot sees it.
        cur = await conn.execute(
            queries["find_stream_events"],
            {
                "stream_id": stream.id,
                "client_ids": [c.event.id for c in repeats if c.event.id is not None],
                "idempotency_keys": [
                    c.idempotency_key for c in repeats if c.idempotency_key is not None
                ],
            },
        )
        for row in await cur.fetchall():
            if row["client_id"] is not None:
                stored[f"id:{row['client_id']}"] = row
            if row["idempotency_key"] is not None:
                stored[f"key:{row['idempotency_key']}"] = row
    return ids, stored, deliveries


def _repeat_key(c: _Candidate) -> str:
    return f"id:{c.event.id}" if c.event.id is not None else f"key:{c.idempotency_key}"


def _outcome_of_repeat(c: _Candidate, stored: dict[str, Any] | None) -> Outcome:
    if stored is None:  # pragma: no cover - the insert skipped it for a row that exists
        raise PostbagError("a skipped event was not found")
    if bytes(stored["payload_hash"]) != c.payload_hash:
        return Outcome(
            c.index,
            c.event.id,
            "rejected",
            event=stored["id"],
            errors=[{"field": "id", "message": "this id was used with a different payload"}],
            conflict=True,
        )
    return Outcome(c.index, c.event.id, "duplicate", event=stored["id"])


@dataclass(slots=True)
class Ingested:
    """What an ingest answered, per posted event in order, and the deliveries it planned."""

    outcomes: list[Outcome]
    deliveries: int


async def ingest(
    services: Services,
    caller: Caller,
    stream_id: str,
    events: Sequence[Any],
    *,
    key: str | None = None,
    storable: bool = False,
    now: datetime,
) -> Ingested:
    """Check and store `events` (parsed JSON, one per element) in one transaction. `key`
    (an `Idempotency-Key`) stands for the id of an event posted alone without one;
    `storable` says the events passed `check_storable` already (`load_json` checks them)."""
    stream = _kept_stream(services, caller, stream_id)
    if stream is None:
        stream = await _fresh_stream(services, caller, stream_id, now)
    outcomes: list[Outcome | None] = [None] * len(events)
    candidates: list[_Candidate] = []
    first: dict[str, _Candidate] = {}
    later: list[_Candidate] = []
    for index, raw in enumerate(events):
        try:
            event, hashed = parse_event(raw, storable=storable)
        except InvalidInput as exc:
            client_id = raw.get("id") if isinstance(raw, dict) else None
            shown = client_id if isinstance(client_id, str) and len(client_id) <= 255 else None
            outcomes[index] = Outcome(
                index, shown, "rejected", errors=exc.errors or None, refusal=exc
            )
            continue
        candidate = _Candidate(index, event, hashed, key if event.id is None and key else None)
        keyed = bool(event.id or candidate.idempotency_key)
        if keyed and _repeat_key(candidate) in first:
            later.append(candidate)  # the same id twice in one batch: the first one counts
            continue
        if keyed:
            first[_repeat_key(candidate)] = candidate
        candidates.append(candidate)
    deliveries = 0
    if not candidates and stream.kept:
        # Nothing reaches the insert to confirm the kept settings and the key.
        await _fresh_stream(services, caller, stream_id, now)
    if candidates:
        key_hash = hash_key(caller.ingest_key) if caller.ingest_key is not None else None
        while True:
            for candidate in candidates:
                await _check_schema(stream, candidate)
            async with services.db.connection() as conn:
                done = await _store(conn, stream, key_hash, candidates, now)
            if done is not None:
                break
            # The kept settings were stale: read them afresh (never stale) and run again.
            stream = await _fresh_stream(services, caller, stream_id, now)
        ids, stored, deliveries = done
        for c in candidates:
            if c.id in ids:
                outcomes[c.index] = Outcome(
                    c.index, c.event.id, c.status, event=c.id, errors=c.errors
                )
            else:
                outcomes[c.index] = _outcome_of_repeat(c, stored.get(_repeat_key(c)))
    for c in later:
        earlier = first[_repeat_key(c)]
        answer = outcomes[earlier.index]
        assert answer is not None
        same = earlier.payload_hash == c.payload_hash
        outcomes[c.index] = _outcome_of_repeat(
            c, {"id": answer.event, "payload_hash": earlier.payload_hash if same else b""}
        )
    return Ingested([o for o in outcomes if o is not None], deliveries)


def single_answer(outcome: Outcome) -> Outcome:
    """The outcome of an event posted alone, or the error it answers: `422` when it was
    malformed, `409 idempotency_conflict` when its id was used with another payload."""
    if outcome.conflict:
        raise IdempotencyConflict("this event id was used with a different payload")
    if outcome.refusal is not None:
        raise outcome.refusal
    return outcome
