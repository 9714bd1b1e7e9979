"""The submit path (docs/submit.md): parse → checks → files to storage → plan → one insert.

The HTTP layer resolves the form (`core.intake.form`), calls `submit`, answers, then wakes
the worker (`core.outbox.wakeup`). Every submission that reaches storage gets a status
(`core.intake.checks` decides it); a repeat of an earlier one (the same idempotency key, or
without one the same client and payload within 60 seconds) gets its receipt instead.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

import psycopg

from core.intake.attachments import check_files
from core.intake.body import MULTIPART, ParsedBody, UploadedFile, media_type, parse_body
from core.intake.checks import decide_status
from core.intake.files import store_files
from core.intake.form import Form, forget_form, fresh_form
from core.intake.plan import Submitted, insert_params, unused_parts
from core.intake.turnstile import TURNSTILE_FIELD
from core.platform.db import Conn
from core.platform.errors import (
    FormClosed,
    IdempotencyConflict,
    InvalidInput,
    PostbagError,
    StorageLimitReached,
    TooManySubmissions,
)
from core.platform.fields import first_text, truthy
from core.platform.ids import new_id
from core.platform.logs import log
from core.platform.queries import execute, queries
from core.platform.services import Services
from core.spam.external import EXTERNAL_FIELDS
from core.spam.filltime import FILL_FIELD

TEST_FIELD = "_test"
IDEMPOTENCY_FIELD = "_idempotency_key"
MAX_IDEMPOTENCY_KEY = 255
# The per-request tokens of the checks: never stored as values, not part of the payload.
TOKEN_FIELDS = (TURNSTILE_FIELD, FILL_FIELD, *EXTERNAL_FIELDS)


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
    if form.kept and media_type(request.content_type)[0] == MULTIPART:
        # Only the form's file fields are spooled, and a kept form has none: a field may
        # have been added since it was read. Read it now, before the body.
        form = await fresh_form(services, form.id, client=request.client, now=now)
    body = await parse_body(
        request.content_type,
        request.content_length,
        request.body,
        file_fields=form.file_fields.keys(),
        spool_limit=services.settings.upload_spool_mb * 1024 * 1024,
    )
    try:
        return await _submit_parsed(services, form, request, body, now=now)
    finally:
        body.cleanup()


async def _submit_parsed(
    services: Services, form: Form, request: SubmitRequest, body: ParsedBody, *, now: datetime
) -> Receipt:
    key = _idempotency_key(request, body.fields)
    hashed = payload_hash(body.fields, body.files)
    while True:
        try:
            receipt = await _attempt(services, form, request, body, key, hashed, now=now)
        except PostbagError:
            raise
        except Exception:
            if not form.kept:
                raise
            # Whatever failed may come from the form as kept (a schema since fixed, a form
            # since deleted): never again from this copy. Read it and run again.
            log.exception("submit failed with a kept form; reading it again")
            forget_form(services, form.id)
            receipt = None
        if receipt is not None:
            return receipt
        # The kept form has changed since it was read (or the quota was crossed): read it
        # now and decide again. A form read now is never stale, so this runs at most twice.
        form = await fresh_form(services, form.id, client=request.client, now=now)


async def _attempt(
    services: Services,
    form: Form,
    request: SubmitRequest,
    body: ParsedBody,
    key: str | None,
    hashed: bytes,
    *,
    now: datetime,
) -> Receipt | None:
    """Check and store the submission with `form` as given; None when the insert found a
    kept form stale (nothing stored)."""
    fields = body.fields
    reserved = {form.honeypot_field, TEST_FIELD, IDEMPOTENCY_FIELD, *TOKEN_FIELDS}
    # A file field never holds a text value (a browser's empty file input, a stray field).
    reserved |= set(form.file_fields)
    values = {k: v for k, v in fields.items() if k not in reserved}
    files = await check_files(body.files, form.file_fields, body.unwanted) if form.accepting else []
    if not form.accepting:
        # A repeat of what was accepted before closing still gets its receipt.
        async with services.db.connection() as conn:
            previous = await _find_previous(conn, form, key, hashed, now)
        if previous is not None:
            return _repeat(previous, hashed, body.is_json, form)
        raise FormClosed("this form is not taking submissions")

    decision = await decide_status(
        services, form, fields, values, origin=request.origin, client=request.client, now=now
    )
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
    submitted = Submitted(
        submission_id=submission_id,
        values=values,
        test=truthy(fields.get(TEST_FIELD)),
        idempotency_key=key,
        payload_hash=hashed,
        attachments=await store_files(services, form, submission_id, kept, now),
        origin=request.origin,
        referrer=request.referrer,
        accept_language=request.accept_language,
    )
    params = insert_params(
        form, decision, submitted, secret_key=services.settings.require_secret_key(), now=now
    )
    row = await _insert(services, params)
    if row["status"] == "stale":
        return None
    if row["status"] == "flooded":
        _refuse("flooded", await _flood_retry_at(services, params), form, now=now)
    if row["status"] == "review_full":
        _refuse("review_full", row["retry_at"], form, now=now)
    if not row["created"]:
        return _repeat(row, hashed, body.is_json, form)
    flags = params["flags"]
    if row["reason"] != decision.reason:
        # The statement stored its rate-limited or duplicate variant instead.
        flags = params["limited_flags"]
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


def _refuse(status: str, retry_at: datetime, form: Form, *, now: datetime) -> NoReturn:
    """Refuse a submission the insert did not store: the client's flood past its limit, or
    the organization's month of review bytes full (docs/submit.md#floods)."""
    retry_after = max(1, math.ceil((retry_at - now).total_seconds()))
    log.info(
        "submission refused",
        extra={
            "org_id": form.organization_id,
            "form_id": form.id,
            "detail": {"status": status, "retry_after": retry_after},
        },
    )
    if status == "flooded":
        raise TooManySubmissions(
            "too many submissions from this client to this form; try again later", retry_after
        )
    raise StorageLimitReached(
        "this form's organization has reached its plan's monthly storage for submissions "
        "kept for review; try again next month",
        retry_after,
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
            k: v for k, v in fields.items() if k != IDEMPOTENCY_FIELD and k not in TOKEN_FIELDS
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


async def _flood_retry_at(services: Services, params: Mapping[str, Any]) -> datetime:
    """When the flooding client of a refused post may post again."""
    async with services.db.connection() as conn:
        cur = await conn.execute(queries["flood_retry_at"], params)
        row = await cur.fetchone()
    assert row is not None
    # None when the client's rows left the window since the refusal: it may post at once.
    retry_at: datetime | None = row["retry_at"]
    return retry_at or params["now"]


async def _insert(services: Services, params: dict[str, Any]) -> dict[str, Any]:
    """Run the submit transaction: one statement, so one round trip and its own transaction
    on the autocommit connection. It takes the lock of the form and client, then counts the
    client's recent submissions and, without an idempotency key, looks for a repeat (see
    `insert_submission`).
    """
    dead_connections = 0
    omit = unused_parts(params)
    for _ in range(3):
        async with services.db.connection() as conn:
            try:
                cur = await execute(conn, "insert_submission", params, omit=omit)
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
