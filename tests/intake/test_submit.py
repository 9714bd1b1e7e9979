from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from core.http.submit_app import create_submit_app
from core.intake.visitor import client_address
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.settings import load_settings
from tests.support.builders import add_schema, make_destination, make_form, make_route, setup_form
from tests.support.records import claimed, rows
from tests.support.settings import built_services
from tests.support.submit import FakeTurnstile, submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def _post_json(client: httpx.AsyncClient, form: str, **kwargs: object) -> httpx.Response:
    headers = {**JSON_ACCEPT, **kwargs.pop("headers", {})}  # type: ignore[dict-item]
    return await client.post(f"/s/{form}", headers=headers, **kwargs)  # type: ignore[arg-type]


async def _only_submission(conn: Conn) -> dict[str, object]:
    found = await rows(conn, "SELECT * FROM submissions")
    assert len(found) == 1
    return found[0]


# --- the status table -------------------------------------------------------------------


async def _month_count(conn: Conn) -> int:
    """The month's count of counted submissions: the sum of its shards."""
    [row] = await rows(conn, "SELECT coalesce(sum(submissions), 0)::int AS n FROM usage_counters")
    return int(row["n"])


async def test_submit__accepted_with_one_delivery_per_route_and_snapshot(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=2, labels={"email": "E-mail"})
    async with submit_client(services) as client:
        response = await _post_json(
            client,
            form,
            data={"email": "a@example.com", "tags": ["x", "y"]},
            headers={
                "Origin": "https://site.example",
                "Referer": "https://site.example/contact",
                "Accept-Language": "de-CH,de;q=0.9",
            },
        )
    assert response.status_code == 201
    body = response.json()
    assert body == {"receipt": body["receipt"], "status": "received"}
    assert body["receipt"].startswith("sub_")
    row = await _only_submission(conn)
    assert row["status"] == "accepted" and row["reason"] is None and row["flags"] == []
    assert row["values"] == {"email": "a@example.com", "tags": ["x", "y"]}
    assert row["client_hash"] is not None and b"198.51.100.7" not in bytes(row["client_hash"])
    received = row["received_at"]
    assert isinstance(received, datetime)
    assert row["erase_at"] == received + timedelta(days=90)  # the free plan's default
    deliveries = await rows(conn, "SELECT * FROM deliveries ORDER BY route_id")
    assert len(deliveries) == 2
    assert row["form_snapshot"] == {
        "form_name": "Contact",
        "labels": {"email": "E-mail"},
        "consent": None,
        # The names of the fields an email reads consent from and replies to.
        "consent_field": None,
        "reply_to_field": "email",
    }
    sent = await claimed(conn)
    for delivery in deliveries:
        assert delivery["status"] == "pending" and delivery["held"] is False
        assert delivery["channel"] == "webhook" and delivery["max_attempts"] == 10
        assert delivery["secret_version"] == 1
        assert delivery["target"] == {"url": "https://hooks.example.com/postbag?token=abc"}
        # The route's templates only: the rest is the submission's, once.
        assert delivery["template"] == {"subject": None, "text": None}
        assert delivery["payload"] is None
        claim = sent[delivery["id"]]
        assert claim.template == {
            "subject": None,
            "text": None,
            "labels": {"email": "E-mail"},
            "field_order": ["email", "tags"],
            "form_name": "Contact",
            # The names of the fields an email reads consent from and replies to.
            "consent_field": None,
            "reply_to_field": "email",
        }
        assert claim.payload == {
            "event": "form.submitted",
            "receipt": body["receipt"],
            "form": form,
            "submitted_at": received.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{received.microsecond // 1000:03d}Z",
            "test": False,
            "values": {"email": "a@example.com", "tags": ["x", "y"]},
            "labels": {"email": "E-mail"},
            "consent": None,
            "attachments": {},
            "meta": {
                "origin": "https://site.example",
                "referrer": "https://site.example/contact",
                "locale": "de-CH",
            },
        }
    events = await rows(conn, "SELECT type, subject_id, data FROM events")
    assert events == [
        {
            "type": "submission.received",
            "subject_id": body["receipt"],
            "data": {"form": form, "status": "accepted", "reason": None, "flags": []},
        }
    ]
    usage = await rows(conn, "SELECT organization_id, submissions FROM usage_counters")
    assert usage == [{"organization_id": tenant.org, "submissions": 1}]  # on one shard


@pytest.mark.parametrize(("ticked", "consent"), [({"agree": "on"}, True), ({}, False)])
async def test_submit__consent_in_the_body_when_the_form_has_a_consent_field(
    services: Services, conn: Conn, ticked: dict[str, str], consent: bool
) -> None:
    _, form = await setup_form(conn, consent_field="agree", labels={"agree": "I agree"})
    async with submit_client(services) as client:
        response = await _post_json(client, form, data={"name": "Ann", **ticked})
    assert response.status_code == 201
    [payload] = [claim.payload for claim in (await claimed(conn)).values()]
    assert payload["consent"] is consent
    assert payload["labels"] == ({"agree": "I agree"} if consent else {})
    row = await _only_submission(conn)
    assert row["field_order"] == ["name", *ticked]


async def test_submit__honeypot_is_spam_and_answers_like_accepted(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        response = await _post_json(client, form, data={"email": "x@y.z", "_gotcha": "bot"})
    assert response.status_code == 201
    assert set(response.json()) == {"receipt", "status"}
    row = await _only_submission(conn)
    assert (row["status"], row["reason"]) == ("spam", "honeypot")
    assert row["values"] == {"email": "x@y.z"}
    # Routes exclude spam by default; a custom honeypot field works the same way.
    assert await rows(conn, "SELECT id FROM deliveries") == []
    assert await _month_count(conn) == 0
    # Kept for review: its values' bytes (as JSON text) count against the monthly cap.
    review = await rows(conn, "SELECT sum(review_bytes)::int AS n FROM usage_counters")
    assert review == [{"n": len(json.dumps({"email": "x@y.z"}))}]


async def test_submit__custom_honeypot_field(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn, honeypot_field="website")
    async with submit_client(services) as client:
        await _post_json(client, form, data={"email": "x@y.z", "_gotcha": "kept", "website": "b"})
    row = await _only_submission(conn)
    assert (row["status"], row["reason"]) == ("spam", "honeypot")
    assert row["values"] == {"email": "x@y.z", "_gotcha": "kept"}


async def test_submit__origin_not_allowed_is_quarantined_without_cors(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, allowed_origins=["https://site.example"])
    async with submit_client(services) as client:
        response = await _post_json(
            client, form, data={"a": "1"}, headers={"Origin": "https://evil.example"}
        )
        missing = await _post_json(client, form, data={"a": "2"})
    assert response.status_code == 201 and missing.status_code == 201
    assert "access-control-allow-origin" not in response.headers
    found = await rows(conn, "SELECT status, reason FROM submissions")
    assert found == [{"status": "quarantined", "reason": "origin_rejected"}] * 2
    events = await rows(conn, "SELECT type FROM events")
    assert events == [{"type": "submission.quarantined"}] * 2


async def test_submit__rate_limit_per_form_and_client(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn, rate_limit_max=2)
    async with (
        submit_client(services) as client,
        submit_client(services, client=("203.0.113.9", 1)) as other,
    ):
        for n in range(3):
            assert (await _post_json(client, form, data={"n": str(n)})).status_code == 201
        assert (await _post_json(other, form, data={"n": "0"})).status_code == 201
    found = await rows(conn, "SELECT status, reason FROM submissions ORDER BY received_at")
    assert [(r["status"], r["reason"]) for r in found] == [
        ("accepted", None),
        ("accepted", None),
        ("quarantined", "rate_limited"),
        ("accepted", None),
    ]


@pytest.mark.parametrize(
    ("answer", "status", "delay", "reason"),
    [
        ({"success": True}, 200, 0.0, None),
        (
            {"success": False, "error-codes": ["invalid-input-response"]},
            200,
            0.0,
            "turnstile_failed",
        ),
        ({"success": True}, 500, 0.0, "turnstile_unavailable"),
        ({"success": True}, 200, 3.0, "turnstile_unavailable"),
    ],
)
async def test_submit__turnstile(
    db_url: str,
    tmp_path: Path,
    conn: Conn,
    answer: dict[str, object],
    status: int,
    delay: float,
    reason: str | None,
) -> None:
    _, form = await setup_form(conn, turnstile_secret="0x4AAAAAAA-secret")
    async with FakeTurnstile() as peer:
        peer.body, peer.status, peer.delay = answer, status, delay
        async with (
            built_services(db_url, tmp_path, turnstile_verify_url=peer.url) as services,
            submit_client(services) as client,
        ):
            started = asyncio.get_running_loop().time()
            response = await _post_json(
                client, form, data={"a": "1", "cf-turnstile-response": "tok-123"}
            )
            elapsed = asyncio.get_running_loop().time() - started
    assert response.status_code == 201
    assert elapsed < 2.9  # the 2-second timeout, never the peer's 3 seconds
    assert peer.requests[0]["secret"] == "0x4AAAAAAA-secret"
    assert peer.requests[0]["response"] == "tok-123"
    row = await _only_submission(conn)
    assert row["status"] == ("accepted" if reason is None else "quarantined")
    assert row["reason"] == reason
    assert row["values"] == {"a": "1"}


async def test_submit__turnstile_token_missing_fails_without_a_call(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, turnstile_secret="0x4AAAAAAA-secret")
    async with submit_client(services) as client:
        await _post_json(client, form, data={"a": "1"})
    row = await _only_submission(conn)
    assert (row["status"], row["reason"]) == ("quarantined", "turnstile_failed")


async def test_submit__schema_enforce_quarantines_with_a_drift_event(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    await add_schema(conn, tenant, form, {"type": "object"})
    version = await add_schema(
        conn,
        tenant,
        form,
        {
            "type": "object",
            "required": ["email"],
            "properties": {"email": {"type": "string", "minLength": 3}},
        },
    )
    async with submit_client(services) as client:
        assert (await _post_json(client, form, json={"email": "a@b"})).status_code == 201
        bad = await _post_json(client, form, json={"name": "no email"})
    assert bad.status_code == 201
    found = await rows(
        conn, "SELECT id, status, reason, schema_version FROM submissions ORDER BY received_at"
    )
    assert [{k: v for k, v in row.items() if k != "id"} for row in found] == [
        {"status": "accepted", "reason": None, "schema_version": version},
        {"status": "quarantined", "reason": "schema_violation", "schema_version": version},
    ]
    drift = await rows(conn, "SELECT subject_id, data FROM events WHERE type = 'schema.drift'")
    assert drift == [
        {
            "subject_id": form,
            "data": {
                "form": form,
                "schema_version": version,
                "mode": "enforce",
                "first_submission": found[1]["id"],
                "errors": [{"path": "/", "keyword": "required"}],
            },
        }
    ]


async def test_submit__precedence_first_check_decides(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn, allowed_origins=["https://site.example"], rate_limit_max=2)
    async with submit_client(services) as client:
        for n in ("0", "1"):
            await _post_json(
                client, form, data={"n": n}, headers={"Origin": "https://site.example"}
            )
        # Rate-limited, from a bad origin, and honeypot filled: honeypot wins.
        await _post_json(
            client, form, data={"n": "2", "_gotcha": "x"}, headers={"Origin": "https://bad.example"}
        )
        # Rate-limited and from a bad origin: origin wins.
        await _post_json(client, form, data={"n": "3"}, headers={"Origin": "https://bad.example"})
    found = await rows(conn, "SELECT status, reason FROM submissions ORDER BY received_at")
    assert [(r["status"], r["reason"]) for r in found] == [
        ("accepted", None),
        ("accepted", None),
        ("spam", "honeypot"),
        ("quarantined", "origin_rejected"),
    ]


async def test_submit__quarantined_delivered_only_to_routes_that_opt_in(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=1, allowed_origins=["https://a.example"])
    opted = await make_destination(conn, tenant)
    route = await make_route(
        conn, tenant, form, opted, include_statuses=["accepted", "quarantined"]
    )
    async with submit_client(services) as client:
        await _post_json(client, form, data={"a": "1"}, headers={"Origin": "https://b.example"})
    assert await rows(conn, "SELECT route_id FROM deliveries") == [{"route_id": route}]


async def test_submit__over_quota_is_accepted_flagged_and_held(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="free")
    month = utcnow().date().replace(day=1)
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions) VALUES (%s, %s, 100)",
        (tenant.org, month),
    )
    async with submit_client(services) as client:
        response = await _post_json(client, form, data={"a": "1"})
    assert response.status_code == 201
    row = await _only_submission(conn)
    assert (row["status"], row["flags"]) == ("accepted", ["over_quota"])
    assert await rows(conn, "SELECT held FROM deliveries") == [{"held": True}]
    assert await _month_count(conn) == 101


async def test_submit__test_flag_is_delivered_and_never_counted(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="free")
    month = utcnow().date().replace(day=1)
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions) VALUES (%s, %s, 100)",
        (tenant.org, month),
    )
    async with submit_client(services) as client:
        response = await _post_json(client, form, json={"a": 1, "_test": True})
    assert response.status_code == 201
    row = await _only_submission(conn)
    assert (row["status"], row["flags"], row["values"]) == ("accepted", ["test"], {"a": 1})
    deliveries = await rows(conn, "SELECT held FROM deliveries")
    assert len(deliveries) == 1 and deliveries[0]["held"] is False
    [claim] = (await claimed(conn)).values()
    assert claim.payload["test"] is True
    assert await _month_count(conn) == 100


async def test_submit__retention_from_form_plan_or_never(services: Services, conn: Conn) -> None:
    _, short = await setup_form(conn, plan="pro", retention_days=7)
    _, pro = await setup_form(conn, plan="pro")
    _, forever = await setup_form(conn, plan="self_hosted")
    async with submit_client(services) as client:
        for form in (short, pro, forever):
            await _post_json(client, form, data={"a": "1"})
    found = {
        r["form_id"]: r["erase_at"] - r["received_at"] if r["erase_at"] else None
        for r in await rows(conn, "SELECT form_id, received_at, erase_at FROM submissions")
    }
    assert found == {short: timedelta(days=7), pro: timedelta(days=365), forever: None}


async def test_submit__reserved_fields_are_never_values(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        await _post_json(
            client,
            form,
            data={
                "email": "a@b.c",
                "_gotcha": "",
                "_test": "0",
                "_idempotency_key": "k-1",
                "cf-turnstile-response": "tok",
            },
        )
    row = await _only_submission(conn)
    assert row["values"] == {"email": "a@b.c"}
    assert row["idempotency_key"] == "k-1" and row["flags"] == []
    [claim] = (await claimed(conn)).values()
    assert claim.payload["values"] == {"email": "a@b.c"}


async def test_submit__deleted_and_paused_routes_and_destinations(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=0)
    live = await make_destination(conn, tenant)
    gone = await make_destination(conn, tenant, deleted_at=utcnow())
    other = await make_destination(conn, tenant)
    digest = await make_destination(conn, tenant)
    kept = await make_route(conn, tenant, form, live)
    await make_route(conn, tenant, form, gone)
    await make_route(conn, tenant, form, other, enabled=False)
    await make_route(conn, tenant, form, digest, mode="digest", period="daily")
    rotated = await make_destination(conn, tenant, secrets=("s" * 20, "t" * 20, "u" * 20))
    rotated_route = await make_route(conn, tenant, form, rotated)
    async with submit_client(services) as client:
        await _post_json(client, form, data={"a": "1"})
    found = await rows(conn, "SELECT route_id, secret_version FROM deliveries ORDER BY route_id")
    assert found == sorted(
        [
            {"route_id": kept, "secret_version": 1},
            {"route_id": rotated_route, "secret_version": 3},
        ],
        key=lambda r: str(r["route_id"]),
    )


async def test_submit__email_and_telegram_snapshots(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, routes=0)
    mail = await make_destination(
        conn, tenant, type="email", config={"to": ["owner@example.com"]}, secrets=()
    )
    bot = await make_destination(
        conn,
        tenant,
        type="telegram",
        config={"chat_id": "-100123"},
        secrets=("123456:" + "A" * 30,),
    )
    await make_route(conn, tenant, form, mail, template={"subject": "New {{email}}"})
    await make_route(conn, tenant, form, bot)
    async with submit_client(services) as client:
        await _post_json(client, form, data={"email": "a@b.c"})
    found = {
        r["channel"]: r
        for r in await rows(
            conn, "SELECT channel, target, template, secret_version, max_attempts FROM deliveries"
        )
    }
    assert found["email"]["target"] == {"to": ["owner@example.com"]}
    assert found["email"]["secret_version"] is None
    assert found["email"]["template"]["subject"] == "New {{email}}"
    assert found["email"]["max_attempts"] == 8
    assert found["telegram"]["target"] == {"chat_id": "-100123"}
    assert found["telegram"]["secret_version"] == 1


# --- refusals ----------------------------------------------------------------------------


async def test_submit__unknown_and_deleted_forms_are_404(services: Services, conn: Conn) -> None:
    tenant, _form = await setup_form(conn)
    deleted = await make_form(conn, tenant, deleted_at=utcnow())
    async with submit_client(services) as client:
        for form in ("frm_01jexamp1eexamp1eexamp1e00", deleted, "nope"):
            response = await _post_json(client, form, data={"a": "1"})
            assert response.status_code == 404
            assert response.json()["code"] == "not_found"
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_submit__closed_form_is_403_and_stores_nothing(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, accepting=False)
    async with submit_client(services) as client:
        response = await _post_json(client, form, data={"a": "1"})
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "form_closed"
    assert await rows(conn, "SELECT id FROM submissions") == []


@pytest.mark.parametrize(
    ("content_type", "body", "status", "code"),
    [
        ("text/plain", b"hello", 415, "unsupported_media_type"),
        (None, b"a=1", 415, "unsupported_media_type"),
        ("application/json", b"{not json", 400, "malformed_body"),
        ("application/json", b"[1, 2]", 400, "malformed_body"),
        ("application/json", b'{"a": NaN}', 400, "malformed_body"),
        ("application/x-www-form-urlencoded", b"a=%FF", 400, "malformed_body"),
        ("multipart/form-data", b"--x\r\n", 400, "malformed_body"),
        (
            "multipart/form-data; boundary=x",
            b"--x\r\nContent-Disposition: form-data",
            400,
            "malformed_body",
        ),
    ],
)
async def test_submit__bad_bodies(
    services: Services,
    conn: Conn,
    content_type: str | None,
    body: bytes,
    status: int,
    code: str,
) -> None:
    _, form = await setup_form(conn)
    headers = {**JSON_ACCEPT}
    if content_type:
        headers["Content-Type"] = content_type
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", content=body, headers=headers)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert await rows(conn, "SELECT id FROM submissions") == []


class CountingBody:
    """A request body streamed in chunks, counting how many the server pulled."""

    def __init__(self, chunk: bytes, count: int, prefix: bytes = b"") -> None:
        self.chunk, self.count, self.prefix = chunk, count, prefix
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.prefix:
            yield self.prefix
        for _ in range(self.count):
            self.pulled += 1
            yield self.chunk


@pytest.mark.parametrize(
    ("content_type", "prefix"),
    [
        ("application/x-www-form-urlencoded", b"a="),
        ("application/json", b'{"a": "'),
        (
            "multipart/form-data; boundary=XyZ",
            b'--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\n',
        ),
    ],
)
async def test_submit__256_kb_of_fields_is_413_and_reading_stops(
    services: Services, conn: Conn, content_type: str, prefix: bytes
) -> None:
    _, form = await setup_form(conn)
    body = CountingBody(b"x" * 16384, count=1000, prefix=prefix)  # 16 MB offered
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            content=body,  # type: ignore[arg-type]
            headers={"Content-Type": content_type, **JSON_ACCEPT},
        )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert body.pulled <= 17  # 256 KB / 16 KB, plus the chunk that crossed the line
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_submit__multipart_body_over_10_mib_is_413_and_reading_stops(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".txt"]}})
    prefix = (
        b'--XyZ\r\nContent-Disposition: form-data; name="cv"; filename="cv.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\n"
    )
    body = CountingBody(b"y" * 65536, count=1000, prefix=prefix)  # 64 MB offered
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            content=body,  # type: ignore[arg-type]
            headers={"Content-Type": "multipart/form-data; boundary=XyZ", **JSON_ACCEPT},
        )
    assert response.status_code == 413
    assert body.pulled <= (10 * 1024 * 1024 + 256 * 1024) // 65536 + 1
    assert await rows(conn, "SELECT id FROM submissions") == []
    assert await rows(conn, "SELECT storage_key FROM stored_objects") == []


async def test_submit__declared_content_length_over_the_limit_is_refused_unread(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    body = CountingBody(b"x" * 1024, count=300, prefix=b"a=")
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            content=body,  # type: ignore[arg-type]
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Content-Length": str(300 * 1024 + 2),
            },
        )
    assert response.status_code == 413
    assert body.pulled == 0


# --- idempotency -------------------------------------------------------------------------


async def test_submit__exact_repeat_returns_the_original_receipt(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        first = await _post_json(client, form, json={"a": 1}, headers={"Idempotency-Key": "k1"})
        # Same payload, other key order and a field-given key: still the same submission.
        again = await _post_json(
            client,
            form,
            content=b'{"_idempotency_key": "k1", "a": 1}',
            headers={"Content-Type": "application/json"},
        )
        conflict = await _post_json(client, form, json={"a": 2}, headers={"Idempotency-Key": "k1"})
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == {
        "receipt": first.json()["receipt"],
        "status": "received",
        "duplicate": True,
    }
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "idempotency_conflict"
    assert len(await rows(conn, "SELECT id FROM submissions")) == 1
    assert len(await rows(conn, "SELECT id FROM deliveries")) == 1
    assert len(await rows(conn, "SELECT id FROM events")) == 1
    assert await rows(conn, "SELECT submissions FROM usage_counters") == [{"submissions": 1}]


async def test_submit__repeat_after_close_schema_change_and_rate_limit(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, rate_limit_max=1)
    async with submit_client(services) as client:
        first = await _post_json(client, form, json={"a": 1}, headers={"Idempotency-Key": "k"})
        await add_schema(conn, tenant, form, {"type": "object", "required": ["b"]})
        await conn.execute(
            "UPDATE forms SET schema_mode = 'enforce', accepting = false WHERE id = %s", (form,)
        )
        closed = await _post_json(client, form, json={"a": 1}, headers={"Idempotency-Key": "k"})
        await conn.execute("UPDATE forms SET accepting = true WHERE id = %s", (form,))
        limited = await _post_json(client, form, json={"a": 1}, headers={"Idempotency-Key": "k"})
        fresh = await _post_json(client, form, json={"a": 1}, headers={"Idempotency-Key": "new"})
    receipt = first.json()["receipt"]
    assert (closed.status_code, closed.json()["receipt"]) == (200, receipt)
    assert (limited.status_code, limited.json()["receipt"]) == (200, receipt)
    assert fresh.status_code == 201  # a new key is a new submission: rate-limited now
    found = await rows(conn, "SELECT status, reason FROM submissions ORDER BY received_at")
    assert [r["reason"] for r in found] == [None, "rate_limited"]


async def test_submit__no_key_identical_payload_within_60_seconds_is_one_submission(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    app = create_submit_app(services)
    clock = [utcnow()]
    app.state.clock = lambda: clock[0]
    transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        first = await _post_json(client, f"{form}", data={"a": "1"})
        clock[0] += timedelta(seconds=59)
        double = await _post_json(client, form, data={"a": "1"})
        other_payload = await _post_json(client, form, data={"a": "2"})
        clock[0] += timedelta(seconds=2)  # 61 s after the first
        later = await _post_json(client, form, data={"a": "1"})
    other_client = httpx.ASGITransport(app=app, client=("198.51.100.8", 1))
    async with httpx.AsyncClient(transport=other_client, base_url="http://t") as client:
        elsewhere = await _post_json(client, form, data={"a": "2"})
    assert first.status_code == 201
    assert (double.status_code, double.json()["receipt"]) == (200, first.json()["receipt"])
    assert other_payload.status_code == 201
    assert later.status_code == 201 and later.json()["receipt"] != first.json()["receipt"]
    assert elsewhere.status_code == 201
    assert len(await rows(conn, "SELECT id FROM submissions")) == 4


@pytest.mark.parametrize("keyed", [True, False])
async def test_submit__20_concurrent_identical_posts_make_one_submission(
    db_url: str, tmp_path: Path, conn: Conn, keyed: bool
) -> None:
    _, form = await setup_form(conn, rate_limit_max=100)
    headers = {"Idempotency-Key": "race"} if keyed else {}
    async with (
        built_services(db_url, tmp_path, pool_max=20) as services,
        submit_client(services) as client,
    ):
        responses = await asyncio.gather(
            *(_post_json(client, form, data={"a": "1"}, headers=headers) for _ in range(20))
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 19 + [201]
    assert len({r.json()["receipt"] for r in responses}) == 1
    assert len(await rows(conn, "SELECT id FROM submissions")) == 1
    assert len(await rows(conn, "SELECT id FROM deliveries")) == 1


async def test_submit__concurrent_submits_spread_the_month_count_over_shards_that_add_up(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    """Racing submits of one organization (20 connections) count on random shards of the
    month's counter rather than queue on one row's lock; the shards add up to each one."""
    _, form = await setup_form(conn, rate_limit_max=100)
    async with (
        built_services(db_url, tmp_path, pool_max=20) as services,
        submit_client(services) as client,
    ):
        responses = await asyncio.gather(
            *(_post_json(client, form, data={"n": str(n)}) for n in range(40))
        )
    assert [r.status_code for r in responses] == [201] * 40
    assert await _month_count(conn) == 40
    shards = await rows(conn, "SELECT shard FROM usage_counters")
    assert len(shards) > 1  # all 40 on one of 16 shards: a chance of 16^-39


# --- responses and CORS --------------------------------------------------------------------


async def test_submit__html_post_redirects_303_with_the_receipt(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, redirect_url="https://site.example/thanks?x=1")
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", data={"a": "1"}, headers={"Accept": "text/html,*/*;q=0.8"}
        )
    assert response.status_code == 303
    receipt = (await _only_submission(conn))["id"]
    assert response.headers["location"] == f"https://site.example/thanks?x=1&receipt={receipt}"


async def test_submit__html_post_without_redirect_gets_a_thank_you_page(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", data={"a": "1"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    receipt = (await _only_submission(conn))["id"]
    assert '<html lang="en">' in response.text and receipt in response.text
    assert 'role="status"' in response.text


async def test_submit__cors_preflight_and_response_headers(services: Services, conn: Conn) -> None:
    _, form = await setup_form(conn, allowed_origins=["https://site.example"])
    _, open_form = await setup_form(conn)
    async with submit_client(services) as client:
        allowed = await client.options(
            f"/s/{form}",
            headers={
                "Origin": "https://site.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, idempotency-key",
            },
        )
        refused = await client.options(f"/s/{form}", headers={"Origin": "https://evil.example"})
        any_origin = await client.options(
            f"/s/{open_form}", headers={"Origin": "https://whoever.example"}
        )
        posted = await _post_json(
            client, form, json={"a": 1}, headers={"Origin": "https://site.example"}
        )
        unknown = await client.options(
            "/s/frm_01jexamp1eexamp1eexamp1e00", headers={"Origin": "https://site.example"}
        )
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == "https://site.example"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "Idempotency-Key" in allowed.headers["access-control-allow-headers"]
    assert refused.status_code == 204
    assert "access-control-allow-origin" not in refused.headers
    assert any_origin.headers["access-control-allow-origin"] == "https://whoever.example"
    assert posted.headers["access-control-allow-origin"] == "https://site.example"
    assert unknown.status_code == 404


async def test_submit__refusals_carry_cors_for_allowed_origins(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, accepting=False)
    async with submit_client(services) as client:
        response = await _post_json(
            client, form, json={"a": 1}, headers={"Origin": "https://site.example"}
        )
    assert response.status_code == 403
    assert response.headers["access-control-allow-origin"] == "https://site.example"


# --- the database going away ----------------------------------------------------------------


async def test_submit__database_unreachable_is_503_with_retry_after(tmp_path: Path) -> None:
    settings = load_settings(
        database_url="postgresql://postgres@127.0.0.1:1/postgres",
        secret_key="x" * 40,
        db_connect_timeout=1,
        storage_url=f"file://{tmp_path}",
    )
    services = Services.from_settings(settings)
    try:
        async with submit_client(services) as client:
            response = await _post_json(client, "frm_01jexamp1eexamp1eexamp1e00", data={"a": "1"})
    finally:
        await services.db.close()
    assert response.status_code == 503
    assert response.json()["code"] == "unavailable"
    assert response.headers["retry-after"] == "5"


async def test_submit__killed_backends_then_the_next_request_succeeds(
    services: Services, conn: Conn, admin_url: str, db_url: str
) -> None:
    _, form = await setup_form(conn)
    dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    async with submit_client(services) as client:
        assert (await _post_json(client, form, data={"n": "1"})).status_code == 201
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            )
        after = await _post_json(client, form, data={"n": "2"})
    assert after.status_code == 201
    reconnected = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    async with reconnected:
        cur = await reconnected.execute("SELECT count(*) FROM submissions")
        assert (await cur.fetchone()) == (2,)


# --- clients ----------------------------------------------------------------------------


def test_client_address__forwarded_for_only_from_trusted_proxies() -> None:
    assert client_address("203.0.113.7", "198.51.100.1", []) == "203.0.113.7"
    assert client_address("10.0.0.2", "198.51.100.1", ["192.168.0.0/16"]) == "10.0.0.2"
    assert client_address("10.0.0.2", "198.51.100.1, 10.0.0.3", ["10.0.0.0/8"]) == "198.51.100.1"
    assert client_address("10.0.0.2", "garbage", ["10.0.0.0/8"]) == "10.0.0.2"
    assert client_address(None, "198.51.100.1", ["10.0.0.0/8"]) == "unknown"
    # An entry that is no network is skipped; the others still count.
    assert client_address("10.0.0.2", "198.51.100.1", ["proxy", "10.0.0.0/8"]) == "198.51.100.1"


async def test_submit__rate_limit_uses_the_forwarded_client_behind_a_trusted_proxy(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, rate_limit_max=1)
    async with (
        built_services(db_url, tmp_path, trusted_proxies=["10.0.0.0/8"]) as services,
        submit_client(services, client=("10.0.0.2", 1)) as proxy,
    ):
        for n, ip in enumerate(["198.51.100.1", "198.51.100.2", "198.51.100.1"]):
            await _post_json(proxy, form, data={"n": str(n)}, headers={"X-Forwarded-For": ip})
    found = await rows(conn, "SELECT reason FROM submissions ORDER BY received_at")
    assert [r["reason"] for r in found] == [None, None, "rate_limited"]


def test_submit__payload_hash_ignores_key_order_and_tokens() -> None:
    from core.intake.submit import payload_hash

    one = payload_hash({"a": 1, "b": [1, 2], "_idempotency_key": "x"}, [])
    two = payload_hash({"b": [1, 2], "a": 1, "cf-turnstile-response": "t"}, [])
    assert one == two
    assert payload_hash({"a": 1}, []) != payload_hash({"a": "1"}, [])
    assert json.dumps({"ok": True})  # the module is importable without a database


async def test_submit__wakes_the_worker_after_the_response(
    services: Services, conn: Conn, db_url: str
) -> None:
    _, form = await setup_form(conn)
    listener = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    async with listener:
        await listener.execute("LISTEN postbag_deliveries")
        async with submit_client(services) as client:
            await asyncio.gather(*(_post_json(client, form, data={"n": str(n)}) for n in range(5)))
        received = []
        async for note in listener.notifies(timeout=2.0, stop_after=1):
            received.append(note.channel)
    # Wake-ups are coalesced per process: never more than one per submission.
    assert 1 <= len(received) <= 5
    assert set(received) == {"postbag_deliveries"}


async def test_submit__idempotency_key_over_255_characters_is_422(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn)
    async with submit_client(services) as client:
        response = await _post_json(
            client, form, json={"a": 1}, headers={"Idempotency-Key": "k" * 256}
        )
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_input"
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_submit__storage_failure_is_503_and_the_orphan_is_recorded(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".txt"]}})
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the storage root should be")
    async with (
        built_services(db_url, tmp_path, storage_url=f"file://{blocker}") as services,
        submit_client(services) as client,
    ):
        response = await _post_json(
            client, form, files=[("cv", ("cv.txt", b"hello", "text/plain"))]
        )
    assert response.status_code == 503
    assert response.json()["code"] == "storage_unavailable"
    assert response.headers["retry-after"] == "5"
    assert await rows(conn, "SELECT id FROM submissions") == []
    orphans = await rows(conn, "SELECT storage_key, deleted_at FROM stored_objects")
    assert len(orphans) == 1 and orphans[0]["deleted_at"] is None


async def _submissions_index_reads(conn: Conn) -> int:
    """Index entries read from `submissions`' partitions so far (this session's counts
    flushed first)."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT 1")
    cur = await conn.execute(
        "SELECT sum(idx_tup_read)::bigint AS n FROM pg_stat_user_indexes "
        "WHERE relid IN (SELECT inhrelid FROM pg_inherits"
        " WHERE inhparent = 'submissions'::regclass)"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def test_submit__lookups_do_not_walk_the_forms_history_under_a_plan_made_when_empty(
    conn: Conn,
) -> None:
    # A running submit path keeps generic plans made while the table was young (nothing
    # re-plans them until statistics change). The rate-limit count and the key-less
    # double-submit check must not then read every earlier submission of the form: planned
    # on the idempotency constraint's index they did, on every submit.
    tenant, form = await setup_form(conn, rate_limit_max=1000)
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    client, payload, now = b"\x01" * 32, b"\x02" * 32, utcnow()
    params = {"form_id": form, "month": now.date().replace(day=1), "client_hash": client}
    keyless = (
        "SELECT * FROM postbag_submit_gate(%(form_id)s, %(client_hash)s, "
        "%(now)s - interval '600 seconds', 1000, true, %(payload)s, "
        "%(now)s - interval '60 seconds')"
    )

    async def lookups() -> None:
        await conn.execute(queries["resolve_form"], {**params, "now": now}, prepare=True)
        await conn.execute(keyless, {**params, "payload": payload, "now": now}, prepare=True)

    await lookups()  # plans made on the empty table, and kept
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", '
        "payload_hash, client_hash, received_at, erase_at) "
        "SELECT 'sub_old' || g, %(org)s, %(form)s, 'accepted', '{}', '\\x00', "
        "decode(md5(g::text), 'hex'), now() - g * interval '10 milliseconds', "
        "now() + interval '90 days' FROM generate_series(1, 3000) g",
        {"org": tenant.org, "form": form},
    )
    before = await _submissions_index_reads(conn)
    await lookups()
    assert await _submissions_index_reads(conn) - before < 50
