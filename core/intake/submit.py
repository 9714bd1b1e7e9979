"""The submit path (docs/submit.md): parse → checks → files to storage → one insert statement.

The HTTP layer resolves the form (`core.intake.form`), calls `submit`, answers, then wakes
the worker (`core.intake.wakeup`). Every submission that reaches storage gets a status
(`core.intake.checks` decides it); a repeat of an earlier one (the same idempotency key, or
without one the same client and payload within 60 seconds) gets its receipt instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from core.intake.attachments import check_files
from core.intake.body import ParsedBody, UploadedFile, parse_body
from core.intake.checks import Decision, decide_status, first_text, truthy
from core.intake.files import store_files
from core.intake.form import Form, fresh_form
from core.intake.payload import (
    acknowledgement,
    request_meta,
    route_deliveries,
    submission_events,
    webhook_body,
)
from core.intake.turnstile import TURNSTILE_FIELD
from core.intake.visitor import recipient_hash
from core.owner.plans import PLANS
from core.platform.clock import month_of
from core.platform.db import Conn
from core.platform.errors import FormClosed, IdempotencyConflict, InvalidInput
from core.platform.ids import new_id
from core.platform.logs import log
from core.platform.queries import execute, queries
from core.platform.services import Services

TEST_FIELD = "_test"
IDEMPOTENCY_FIELD = "_idempotency_key"
MAX_IDEMPOTENCY_KEY = 255
ACK_DAILY_MAX = 5  # acknowledgement emails per recipient address and UTC day (docs/submit.md)
# The reasons decided before the rate limit (docs/submit.md: the checks' order).
_BEFORE_RATE_LIMIT = frozenset({"honeypot", "origin_rejected", "rate_limited"})


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """What the HTTP layer hands the submit path."""

    content_type: str | None
    content_length: str | None
    body: AsyncIterator[bytes]
    client: str
    origin: str | None = None
    referrer: str | None = None
    accept_language: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a submit stored: the submission's id, and whether it repeated an earlier one."""

    id: str
    duplicate: bool
    status: str
    reason: str | None = None
    flags: tuple[str, ...] = ()
    deliveries: int = 0
    is_json: bool = False
    # The form the submission was stored under: the one passed in, or, when that one was
    # kept from an earlier submit and has changed since, the form as read again.
    form: Form | None = None


async def submit(
    services: Services, form: Form, request: SubmitRequest, *, now: datetime
) -> Receipt:
    """Parse, check and store one submission; the caller answers and then notifies."""
    body = await parse_body(request.content_type, request.content_length, request.body)
    try:
        return await _submit_parsed(services, form, request, body, now=now)
    finally:
        body.cleanup()


async def _submit_parsed(
    services: Services, form: Form, request: SubmitRequest, body: ParsedBody, *, now: datetime
) -> Receipt:
    if form.kept and body.files:
        # A kept form has no file fields; one may have been added since it was read, and
        # the files are checked (and may be refused) before the insert could tell.
        form = await fresh_form(services, form.id, client=request.client, now=now)
    fields = body.fields
    key = _idempotency_key(request, fields)
    reserved = {form.honeypot_field, TEST_FIELD, IDEMPOTENCY_FIELD, TURNSTILE_FIELD}
    # A file field never holds a text value (a browser's empty file input, a stray field).
    reserved |= set(form.file_fields)
    values = {k: v for k, v in fields.items() if k not in reserved}
    files = await check_files(body.files, form.file_fields) if form.accepting else []
    hashed = payload_hash(fields, body.files)
    if not form.accepting:
        # A repeat of what was accepted before closing still gets its receipt.
        async with services.db.connection() as conn:
            previous = await _find_previous(conn, form, key, hashed, now)
        if previous is not None:
            return _repeat(previous, hashed, body.is_json, form)
        raise FormClosed("this form is not taking submissions")

    decision = await decide_status(
        services, form, fields, values, origin=request.origin, client=request.client
    )
    # Past the rate check, the statement counts again under its lock and may store the
    # rate-limited variant instead (see `insert_submission`).
    rate_checked = decision.reason not in _BEFORE_RATE_LIMIT
    test = truthy(fields.get(TEST_FIELD))
    plan = PLANS[form.plan]
    counted = decision.status == "accepted" and not test
    over_quota = (
        counted
        and plan.monthly_submissions is not None
        and form.month_submissions >= plan.monthly_submissions
    )
    flags = (["test"] if test else []) + (["over_quota"] if over_quota else [])
    submission_id = new_id("sub")
    # Honeypot spam keeps its values for review, never its files.
    kept = files if decision.status != "spam" else []
    if kept:
        # A repeat writes no file and counts no bytes: look for it before storing (the
        # insert still catches a repeat racing this one).
        async with services.db.connection() as conn:
            previous = await _find_previous(conn, form, key, hashed, now)
        if previous is not None:
            return _repeat(previous, hashed, body.is_json, form)
    attachments = await store_files(services, form, submission_id, kept, now)
    meta = request_meta(
        origin=request.origin,
        referrer=request.referrer,
        accept_language=request.accept_language,
    )
    payload = webhook_body(form, submission_id, values, attachments, meta=meta, test=test, now=now)
    deliveries = route_deliveries(form, values, decision.status)
    events = submission_events(form, decision, flags)
    ack = acknowledgement(form, values, decision.status)
    retention = plan.retention_for(decision.status, form.retention_days)
    limited = Decision("quarantined", "rate_limited")
    limited_flags = ["test"] if test else []
    params = {
        "id": submission_id,
        "organization_id": form.organization_id,
        "form_id": form.id,
        "status": decision.status,
        "reason": decision.reason,
        "flags": flags,
        "values": Jsonb(values),
        "field_order": list(values),
        "meta": Jsonb(meta),
        "idempotency_key": key,
        "payload_hash": hashed,
        "client_hash": form.client_hash,
        "schema_version": form.schema_version if form.schema_mode != "off" else None,
        "now": now,
        "retention_days": retention,
        "limited_retention_days": plan.retention_for(limited.status, form.retention_days),
        "attachments": Jsonb(attachments),
        "held": over_quota,
        "payload": Jsonb(payload),
        "deliveries": Jsonb(deliveries),
        "acknowledgements": Jsonb([ack] if ack else []),
        "ack_recipient_hash": _ack_recipient(services, ack),
        "ack_daily_max": ACK_DAILY_MAX,
        "today": now.astimezone(UTC).date(),
        "events": Jsonb(events),
        "month": month_of(now),
        "counted": counted,
        "rate_checked": rate_checked,
        "form_revision": form.revision if form.kept else None,
        "quota": plan.monthly_submissions,
        "rate_limit_max": form.rate_limit_max,
        "rate_limit_seconds": form.rate_limit_per_seconds,
        "limited_flags": limited_flags,
        "limited_deliveries": Jsonb(route_deliveries(form, values, limited.status)),
        "limited_events": Jsonb(submission_events(form, limited, limited_flags)),
    }
    row = await _insert(services, params)
    if row["status"] == "stale":
        # The kept form has changed since it was read (or the quota was crossed): read it
        # now and decide again; a form read now is not checked again.
        fresh = await fresh_form(services, form.id, client=request.client, now=now)
        return await _submit_parsed(services, fresh, request, body, now=now)
    if not row["created"]:
        return _repeat(row, hashed, body.is_json, form)
    if row["reason"] == limited.reason and decision.reason != limited.reason:
        flags = limited_flags
    log.info(
        "submission stored",
        extra={
            "org_id": form.organization_id,
            "form_id": form.id,
            "submission_id": submission_id,
            "detail": {"status": row["status"], "reason": row["reason"], "flags": flags},
        },
    )
    return Receipt(
        id=submission_id,
        duplicate=False,
        status=row["status"],
        reason=row["reason"],
        flags=tuple(flags),
        deliveries=row["deliveries"],
        is_json=body.is_json,
        form=form,
    )


def _idempotency_key(request: SubmitRequest, fields: Mapping[str, Any]) -> str | None:
    key = request.idempotency_key or first_text(fields.get(IDEMPOTENCY_FIELD))
    if key is None:
        return None
    key = key.strip()
    if not key:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidInput(
            "the idempotency key is too long",
            [{"field": IDEMPOTENCY_FIELD, "message": f"at most {MAX_IDEMPOTENCY_KEY} characters"}],
        )
    return key


def payload_hash(fields: Mapping[str, Any], files: list[UploadedFile]) -> bytes:
    """The canonical hash of what was submitted: fields (minus the per-request tokens) and
    each file's field, name and SHA-256. Key order and JSON spacing do not matter."""
    canonical = {
        "values": {
            k: v for k, v in fields.items() if k not in (IDEMPOTENCY_FIELD, TURNSTILE_FIELD)
        },
        "files": sorted([f.field, f.name, f.sha256.hex()] for f in files),
    }
    raw = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).digest()


async def _find_previous(
    conn: Conn, form: Form, key: str | None, hashed_payload: bytes, now: datetime
) -> dict[str, Any] | None:
    cur = await conn.execute(
        queries["find_previous_submission"],
        {
            "form_id": form.id,
            "idempotency_key": key,
            "client_hash": form.client_hash,
            "payload_hash": hashed_payload,
            "now": now,
        },
    )
    return await cur.fetchone()


def _repeat(
    previous: Mapping[str, Any], hashed_payload: bytes, is_json: bool, form: Form
) -> Receipt:
    if bytes(previous["payload_hash"]) != hashed_payload:
        raise IdempotencyConflict("this idempotency key was used with a different payload")
    return Receipt(id=previous["id"], duplicate=True, status="received", is_json=is_json, form=form)


def _ack_recipient(services: Services, ack: Mapping[str, Any] | None) -> bytes | None:
    if ack is None:
        return None
    [address] = ack["target"]["to"]
    return recipient_hash(str(address), services.settings.require_secret_key())


async def _insert(services: Services, params: dict[str, Any]) -> dict[str, Any]:
    """Run the submit transaction: one statement, so one round trip and its own transaction
    on the autocommit connection. It takes the lock of the form and client, then counts the
    client's recent submissions and, without an idempotency key, looks for a repeat (see
    `insert_submission`).
    """
    dead_connections = 0
    for _ in range(3):
        async with services.db.connection() as conn:
            try:
                cur = await execute(conn, "insert_submission", params)
                row = await cur.fetchone()
            except psycopg.OperationalError:
                # A connection whose backend had died (killed, or the server restarted)
                # before the pool's check could see it: once, on another. Safe even had
                # the statement committed before the connection broke: run again, it finds
                # the submission it stored (by its key, or as the same client's same
                # payload within 60 s) and answers its receipt.
                if not conn.broken or dead_connections:
                    raise
                dead_connections += 1
                continue
        if row is not None:
            return row
        # A concurrent submit with the same key committed after this statement's snapshot
        # (ON CONFLICT DO NOTHING found it): run again to read it.
    raise psycopg.OperationalError("idempotency key kept conflicting")  # pragma: no cover
