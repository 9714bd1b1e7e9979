"""The submit path (SPEC §4): resolve → parse → cheap checks → schema → one transaction.

Every outcome that reaches storage is a status; the first check that applies decides it,
in this order: honeypot (`spam`), origin, rate limit, Turnstile, schema (`quarantined`).
Later checks are skipped once one applies, so a bot costs no Turnstile call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from core.destinations.channels import MAX_ATTEMPTS, snapshot_target
from core.intake.attachments import CheckedFile, check_files
from core.intake.body import ParsedBody, UploadedFile, parse_body
from core.intake.visitor import client_hash
from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import FormClosed, IdempotencyConflict, InvalidInput, NotFound
from core.platform.ids import new_id
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.storage import storage_for

TEST_FIELD = "_test"
IDEMPOTENCY_FIELD = "_idempotency_key"
TURNSTILE_FIELD = "cf-turnstile-response"
TURNSTILE_TIMEOUT = 2.0
DOUBLE_SUBMIT_SECONDS = 60
MAX_IDEMPOTENCY_KEY = 255
MAX_SCHEMA_ERRORS = 20
_FALSY = frozenset({"", "0", "false", "no", "off"})
# What a ticked consent box (or a JSON client's consent value) sends.
_CONSENT = frozenset({"on", "yes", "true", "1"})


@dataclass(frozen=True, slots=True)
class Form:
    """A live form as the submit path sees it (read as the owner: the path is public)."""

    id: str
    organization_id: str
    name: str
    accepting: bool
    allowed_origins: tuple[str, ...]
    honeypot_field: str
    redirect_url: str | None
    retention_days: int | None
    rate_limit_max: int
    schema_mode: str
    labels: Mapping[str, Any]
    file_fields: Mapping[str, Any]
    turnstile_secret: str | None
    consent_field: str | None
    ack_email: Mapping[str, Any] | None
    plan: str
    schema_version: int | None
    schema: Mapping[str, Any] | None
    month_submissions: int
    recent_from_client: int
    routes: list[dict[str, Any]]
    client_hash: bytes


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
class Outcome:
    """The answer to a submit: a receipt, and whether it was a repeat of an earlier one."""

    receipt: str
    duplicate: bool
    status: str
    reason: str | None = None
    flags: tuple[str, ...] = ()
    deliveries: int = 0
    is_json: bool = False


@dataclass(slots=True)
class _Decision:
    status: str = "accepted"
    reason: str | None = None
    schema_errors: list[dict[str, str]] = field(default_factory=list)


def month_of(now: datetime) -> date:
    """The usage-counter month of an instant (UTC calendar month)."""
    return date(now.year, now.month, 1)


async def resolve_form(services: Services, form_id: str, *, client: str, now: datetime) -> Form:
    """The live form `form_id` (NotFound for unknown or deleted forms)."""
    hashed = client_hash(client, services.settings.require_secret_key())
    if not form_id.startswith("frm_") or len(form_id) > 64:
        raise NotFound("no such form")
    row = await services.db.fetch_one(
        queries["resolve_form"],
        {"form_id": form_id, "client_hash": hashed, "now": now, "month": month_of(now)},
    )
    if row is None:
        raise NotFound("no such form")
    return Form(
        id=row["id"],
        organization_id=row["organization_id"],
        name=row["name"],
        accepting=row["accepting"],
        allowed_origins=tuple(row["allowed_origins"]),
        honeypot_field=row["honeypot_field"],
        redirect_url=row["redirect_url"],
        retention_days=row["retention_days"],
        rate_limit_max=row["rate_limit_max"],
        schema_mode=row["schema_mode"],
        labels=row["labels"] or {},
        file_fields=row["file_fields"] or {},
        turnstile_secret=row["turnstile_secret"],
        consent_field=row["consent_field"],
        ack_email=row["ack_email"],
        plan=row["plan"],
        schema_version=row["schema_version"],
        schema=row["schema"],
        month_submissions=row["month_submissions"],
        recent_from_client=row["recent_from_client"],
        routes=row["routes"],
        client_hash=hashed,
    )


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(form: Form, origin: str | None) -> bool:
    """Whether `origin` is on the form's allowlist (an empty list allows any origin)."""
    if not form.allowed_origins:
        return True
    if not origin:
        return False
    return _normal_origin(origin) in {_normal_origin(o) for o in form.allowed_origins}


def cors_origin(form: Form, origin: str | None) -> str | None:
    """The value of `Access-Control-Allow-Origin` for this origin, or None for no CORS."""
    if origin and origin != "null" and origin_allowed(form, origin):
        return origin
    return None


def _truthy(value: Any) -> bool:
    if isinstance(value, list):
        return any(_truthy(item) for item in value)
    if isinstance(value, str):
        return value.strip().lower() not in _FALSY
    return bool(value)


def _consented(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) == 1 and _consented(value[0])
    if value is True or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
        return True
    return isinstance(value, str) and value.strip().lower() in _CONSENT


def _valid_address(value: Any) -> str | None:
    address = _first_text(value)
    if address is None or len(address) > 254:
        return None
    # Imported here: only forms that send acknowledgements need it.
    from email_validator import EmailNotValidError, validate_email

    try:
        checked = validate_email(address.strip(), check_deliverability=False)
    except EmailNotValidError:
        return None
    return str(checked.normalized)


def acknowledgement(form: Form, values: Mapping[str, Any], status: str) -> dict[str, Any] | None:
    """The acknowledgement email an accepted submission gets (consent ticked, a valid
    address in the form's field), or None: no consent or no valid address is no error."""
    ack = form.ack_email
    if status != "accepted" or not ack or not form.consent_field:
        return None
    if not _consented(values.get(form.consent_field)):
        return None
    address = _valid_address(values.get(str(ack.get("field"))))
    if address is None:
        return None
    return {
        "id": new_id("dlv"),
        "max_attempts": MAX_ATTEMPTS["email"],
        "target": {"to": [address]},
        "template": {
            "subject": ack.get("subject"),
            "text": ack.get("text"),
            "labels": dict(form.labels),
            "field_order": list(values),
            "form_name": form.name,
        },
    }


def _first_text(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) and value else None


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


def _idempotency_key(request: SubmitRequest, fields: Mapping[str, Any]) -> str | None:
    key = request.idempotency_key or _first_text(fields.get(IDEMPOTENCY_FIELD))
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


async def verify_turnstile(url: str, secret: str, token: str | None, remote_ip: str) -> str | None:
    """None when the token verifies; else the quarantine reason. Never raises."""
    if not token:
        return "turnstile_failed"
    # Imported here: only forms with a Turnstile secret need an HTTP client.
    import httpx

    try:
        async with asyncio.timeout(TURNSTILE_TIMEOUT):
            async with httpx.AsyncClient(timeout=TURNSTILE_TIMEOUT) as client:
                response = await client.post(
                    url, data={"secret": secret, "response": token, "remoteip": remote_ip}
                )
        if response.status_code != 200:
            return "turnstile_unavailable"
        body = response.json()
    except (TimeoutError, httpx.HTTPError, ValueError):
        return "turnstile_unavailable"
    if not isinstance(body, dict):
        return "turnstile_unavailable"
    return None if body.get("success") is True else "turnstile_failed"


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    # Imported here: only `enforce` forms need it, and it is a third of a cold start.
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict[str, str]]:
    """The JSON Schema violations of `values` (at most 20); an unusable schema finds none."""
    from jsonschema import SchemaError

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except SchemaError:
        log.warning("form schema is not a valid JSON Schema; not enforced")
        return []
    errors = sorted(validator.iter_errors(dict(values)), key=lambda e: list(e.absolute_path))
    return [
        {"path": "/" + "/".join(str(p) for p in e.absolute_path), "message": e.message[:300]}
        for e in errors[:MAX_SCHEMA_ERRORS]
    ]


async def _decide(
    services: Services,
    form: Form,
    request: SubmitRequest,
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
) -> _Decision:
    if _truthy(fields.get(form.honeypot_field)):
        return _Decision("spam", "honeypot")
    if not origin_allowed(form, request.origin):
        return _Decision("quarantined", "origin_rejected")
    if form.recent_from_client >= form.rate_limit_max:
        return _Decision("quarantined", "rate_limited")
    if form.turnstile_secret:
        reason = await verify_turnstile(
            str(services.settings.turnstile_verify_url),
            form.turnstile_secret,
            _first_text(fields.get(TURNSTILE_FIELD)),
            request.client,
        )
        if reason is not None:
            return _Decision("quarantined", reason)
    if form.schema_mode == "enforce" and form.schema is not None:
        errors = schema_errors(form.schema, values)
        if errors:
            return _Decision("quarantined", "schema_violation", errors)
    return _Decision()


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _locale(accept_language: str | None) -> str | None:
    if not accept_language:
        return None
    first = accept_language.split(",")[0].split(";")[0].strip()
    return first[:35] or None


async def _store_files(
    services: Services, form: Form, submission_id: str, files: list[CheckedFile], now: datetime
) -> list[dict[str, Any]]:
    """Write each file under the submission's id, recording its key first."""
    if not files:
        return []
    rows: list[dict[str, Any]] = []
    for checked in files:
        attachment_id = new_id("att")
        rows.append(
            {
                "id": attachment_id,
                "field": checked.upload.field,
                "name": checked.upload.name,
                "content_type": checked.content_type,
                "size": checked.upload.size,
                "sha256": checked.upload.sha256.hex(),
                "storage_key": f"{form.organization_id}/{submission_id}/{attachment_id}",
            }
        )
    async with services.db.connection() as conn:
        await conn.execute(
            queries["insert_stored_objects"],
            {
                "organization_id": form.organization_id,
                "submission_id": submission_id,
                "storage_keys": [row["storage_key"] for row in rows],
                "now": now,
            },
        )
    storage = storage_for(services.settings.storage_url)
    for checked, row in zip(files, rows, strict=True):
        await storage.put(row["storage_key"], checked.upload.path, content_type=row["content_type"])
    return rows


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


def _repeat(previous: Mapping[str, Any], hashed_payload: bytes, is_json: bool) -> Outcome:
    if bytes(previous["payload_hash"]) != hashed_payload:
        raise IdempotencyConflict("this idempotency key was used with a different payload")
    return Outcome(receipt=previous["id"], duplicate=True, status="received", is_json=is_json)


def _lock_key(form: Form, hashed_payload: bytes) -> int:
    digest = hashlib.sha256(form.id.encode() + form.client_hash + hashed_payload).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def _insert(services: Services, params: dict[str, Any]) -> dict[str, Any]:
    """Run the submit transaction: one statement, so one round trip and its own transaction
    on the autocommit connection. Without an idempotency key it takes the double-submit lock
    (`params["lock_key"]`) and looks for a repeat after it (see `insert_submission`).
    """
    for _ in range(3):
        async with services.db.connection() as conn:
            cur = await conn.execute(queries["insert_submission"], params)
            row = await cur.fetchone()
        if row is not None:
            return row
        # A concurrent submit with the same key committed after this statement's snapshot
        # (ON CONFLICT DO NOTHING found it): run again to read it.
    raise psycopg.OperationalError("idempotency key kept conflicting")  # pragma: no cover


async def submit(
    services: Services, form: Form, request: SubmitRequest, *, now: datetime
) -> Outcome:
    """Parse, check and store one submission; the caller answers and then notifies."""
    body = await parse_body(request.content_type, request.content_length, request.body)
    try:
        return await _submit_parsed(services, form, request, body, now=now)
    finally:
        body.cleanup()


async def _submit_parsed(
    services: Services, form: Form, request: SubmitRequest, body: ParsedBody, *, now: datetime
) -> Outcome:
    fields = body.fields
    key = _idempotency_key(request, fields)
    reserved = {form.honeypot_field, TEST_FIELD, IDEMPOTENCY_FIELD, TURNSTILE_FIELD}
    # A file field never holds a text value (a browser's empty file input, a stray field).
    reserved |= set(form.file_fields)
    values = {k: v for k, v in fields.items() if k not in reserved}
    files = check_files(body.files, form.file_fields) if form.accepting else []
    hashed = payload_hash(fields, body.files)
    if not form.accepting:
        # A repeat of what was accepted before closing still gets its receipt.
        async with services.db.connection() as conn:
            previous = await _find_previous(conn, form, key, hashed, now)
        if previous is not None:
            return _repeat(previous, hashed, body.is_json)
        raise FormClosed("this form is not taking submissions")

    decision = await _decide(services, form, request, fields, values)
    test = _truthy(fields.get(TEST_FIELD))
    plan = PLANS[form.plan]
    counted = decision.status == "accepted" and not test
    over_quota = (
        counted
        and plan.monthly_submissions is not None
        and form.month_submissions >= plan.monthly_submissions
    )
    flags = (["test"] if test else []) + (["over_quota"] if over_quota else [])
    submission_id = new_id("sub")
    attachments = await _store_files(services, form, submission_id, files, now)
    payload = {
        "event": "form.submitted",
        "receipt": submission_id,
        "form": form.id,
        "submitted_at": _iso(now),
        "test": test,
        "values": values,
        "attachments": _payload_attachments(attachments),
        "meta": {
            "origin": request.origin,
            "referrer": request.referrer,
            "locale": _locale(request.accept_language),
        },
    }
    deliveries = [
        {
            "id": new_id("dlv"),
            "route_id": route["route_id"],
            "max_attempts": MAX_ATTEMPTS[route["channel"]],
            "target": snapshot_target(route["channel"], route["config"]),
            "template": {
                "subject": (route["template"] or {}).get("subject"),
                "text": (route["template"] or {}).get("text"),
                "labels": dict(form.labels),
                "field_order": list(values),
                "form_name": form.name,
            },
        }
        for route in form.routes
        if decision.status in route["include_statuses"]
    ]
    event_data = {
        "form": form.id,
        "status": decision.status,
        "reason": decision.reason,
        "flags": flags,
    }
    events: list[dict[str, Any]] = [
        {
            "type": "submission.quarantined"
            if decision.status == "quarantined"
            else "submission.received",
            "data": event_data,
        }
    ]
    if decision.schema_errors:
        events.append(
            {
                "type": "schema.drift",
                "data": {
                    "form": form.id,
                    "schema_version": form.schema_version,
                    "errors": decision.schema_errors,
                },
            }
        )
    ack = acknowledgement(form, values, decision.status)
    retention = form.retention_days if form.retention_days is not None else plan.retention_days
    params = {
        "id": submission_id,
        "organization_id": form.organization_id,
        "form_id": form.id,
        "status": decision.status,
        "reason": decision.reason,
        "flags": flags,
        "values": Jsonb(values),
        "meta": Jsonb(payload["meta"]),
        "idempotency_key": key,
        "payload_hash": hashed,
        "client_hash": form.client_hash,
        "schema_version": form.schema_version if form.schema_mode != "off" else None,
        "now": now,
        "retention_days": retention,
        "attachments": Jsonb(attachments),
        "held": over_quota,
        "payload": Jsonb(payload),
        "deliveries": Jsonb(deliveries),
        "acknowledgements": Jsonb([ack] if ack else []),
        "events": Jsonb(events),
        "month": month_of(now),
        "counted": counted,
        "lock_key": None if key else _lock_key(form, hashed),
    }
    row = await _insert(services, params)
    if not row["created"]:
        return _repeat(row, hashed, body.is_json)
    log.info(
        "submission stored",
        extra={
            "org_id": form.organization_id,
            "form_id": form.id,
            "submission_id": submission_id,
            "detail": {"status": decision.status, "reason": decision.reason, "flags": flags},
        },
    )
    return Outcome(
        receipt=submission_id,
        duplicate=False,
        status=decision.status,
        reason=decision.reason,
        flags=tuple(flags),
        deliveries=row["deliveries"],
        is_json=body.is_json,
    )


def _payload_attachments(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["field"], []).append(
            {"id": row["id"], "name": row["name"], "type": row["content_type"], "size": row["size"]}
        )
    return grouped


class _Waker:
    """Coalesces wake-ups: at most one NOTIFY in flight per event loop, plus one more for
    everything that asked while it was in flight."""

    def __init__(self) -> None:
        self.pending = False
        self.running: asyncio.Task[None] | None = None

    async def _run(self, services: Services) -> None:
        while self.pending:
            self.pending = False
            try:
                async with services.db.connection() as conn:
                    await conn.execute(queries["notify_deliveries"], {"payload": ""})
            except Exception:
                log.warning("could not notify the delivery worker; it will poll")
                return

    async def wake(self, services: Services) -> None:
        self.pending = True
        if self.running is None or self.running.done():
            self.running = asyncio.create_task(self._run(services))
        # Waiting keeps a Lambda invocation alive until its wake-up went out.
        await asyncio.shield(self.running)


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker] = weakref.WeakKeyDictionary()


async def notify_deliveries(services: Services) -> None:
    """Wake the delivery worker; a failure only delays delivery until its next poll."""
    loop = asyncio.get_running_loop()
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = _Waker()
    await waker.wake(services)
