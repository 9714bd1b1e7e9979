from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import WEBHOOK_SECRET, make_delivery, make_route_to, setup_form
from tests.support.peers import (
    Answer,
    Request,
    closed_port,
    hang,
    hex_signature_matches,
    receiver,
    status,
)
from tests.support.records import attempts, delivery

FAST = WorkerOptions(timeout=0.5, margin=0.1)


@pytest.mark.parametrize("secret", [WEBHOOK_SECRET, "a-plain-secret-of-32-characters!"])
async def test_deliver__webhook_request_signed_both_ways(
    services: Services, conn: Conn, secret: str
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        url = peer.url + "/hooks/postbag?x=1"
        dst, rte = await make_route_to(conn, tenant, form, config={"url": url}, secrets=(secret,))
        sub, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
        stats = await Deliverer(services).run_pass(now=utcnow(), budget=30)
    assert stats["sent"] == 1
    [request] = peer.requests
    assert request.path == "/hooks/postbag?x=1"
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == "Postbag/0.1.0"
    assert headers["x-postbag-event"] == "form.submitted"
    assert headers["x-postbag-delivery"] == dlv
    assert headers["webhook-id"] == dlv
    assert abs(int(headers["webhook-timestamp"]) - utcnow().timestamp()) < 60
    body = json.loads(request.body)
    assert body["receipt"] == sub
    assert body["values"] == {"email": "a@example.com", "subscribe": True}
    assert set(body) == {
        "event",
        "receipt",
        "form",
        "submitted_at",
        "test",
        "values",
        "labels",
        "consent",
        "attachments",
        "meta",
    }
    assert hex_signature_matches(secret, request.body, headers["x-postbag-signature"])
    tampered = request.body.replace(b"a@example.com", b"b@example.com")
    assert not hex_signature_matches(secret, tampered, headers["x-postbag-signature"])
    if secret.startswith("whsec_"):
        assert Webhook(secret).verify(request.body, request.headers) == body
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(tampered, request.headers)
    else:
        # A plain secret keys the HMAC with its UTF-8 bytes: a library given those bytes
        # (base64-encoded, its constructor's format) verifies it.
        raw = Webhook(base64.b64encode(secret.encode()).decode())
        assert raw.verify(request.body, request.headers) == body
        with pytest.raises(WebhookVerificationError):
            raw.verify(tampered, request.headers)
    row = await delivery(conn, dlv)
    assert (row["status"], row["attempts"], row["claim_token"]) == ("sent", 1, None)
    [attempt] = await attempts(conn, dlv)
    assert (attempt["outcome"], attempt["http_status"]) == ("sent", 200)
    assert attempt["response_excerpt"] == "ok"
    assert secret not in json.dumps(row, default=str)


def _redirect(_r: Request) -> Answer:
    return 301, {"Location": "/elsewhere"}, b""


OUTCOMES: list[tuple[str, Callable[[Request], Answer], str, str | None, str | None]] = [
    # name, answer, status, reason, error_class
    ("200", status(200), "sent", None, None),
    ("204", status(204), "sent", None, None),
    ("301", _redirect, "dead", "http_301", None),
    ("400", status(400, body=b"bad" * 400), "dead", "http_400", None),
    ("404", status(404), "dead", "http_404", None),
    ("410", status(410), "dead", "http_410", None),
    ("408", status(408), "failed", None, None),
    ("500", status(500), "failed", None, None),
    ("503", status(503), "failed", None, None),
    ("hang", hang(2.0), "failed", None, "timeout"),
]


@pytest.mark.parametrize(
    ("answer", "expected", "reason", "error_class"),
    [case[1:] for case in OUTCOMES],
    ids=[case[0] for case in OUTCOMES],
)
async def test_deliver__outcome_classes(
    services: Services,
    conn: Conn,
    answer: Callable[[Request], Answer],
    expected: str,
    reason: str | None,
    error_class: str | None,
) -> None:
    now = utcnow()
    with receiver(answer) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    assert len(peer.requests) == 1  # a redirect is not followed
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["attempts"]) == (expected, reason, 1)
    [attempt] = await attempts(conn, dlv)
    assert attempt["outcome"] == expected
    assert attempt["error_class"] == error_class
    if error_class is None:
        assert attempt["http_status"] == peer.answered[0]
    assert attempt["response_excerpt"] is None or len(attempt["response_excerpt"]) <= 512
    if expected == "failed":
        # First retry: 2^1 x 30 s = 60 s, +-20 % jitter (plus the pass's own elapsed time).
        wait = (row["next_attempt_at"] - now).total_seconds()
        assert 48 <= wait <= 73, wait
    if expected == "dead":
        cur = await conn.execute("SELECT kind, subject_id, occurrences FROM alerts")
        assert await cur.fetchall() == [
            {"kind": "delivery.dead", "subject_id": dst, "occurrences": 1}
        ]


async def test_deliver__closed_port_is_retried(services: Services, conn: Conn) -> None:
    now = utcnow()
    url = f"http://127.0.0.1:{closed_port()}/hook"
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
    await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["attempts"], row["last_detail"]) == (
        "failed",
        1,
        "connection_error",
    )
    [attempt] = await attempts(conn, dlv)
    assert (attempt["outcome"], attempt["error_class"]) == ("failed", "connection_error")


@pytest.mark.parametrize(("header", "seconds"), [("3600", 3600), ("86400", 6 * 3600)])
async def test_deliver__429_retry_after_lengthens_the_wait(
    services: Services, conn: Conn, header: str, seconds: int
) -> None:
    now = utcnow()
    with receiver(status(429, {"Retry-After": header})) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    wait = (row["next_attempt_at"] - now).total_seconds()
    assert seconds <= wait <= seconds + 5


async def test_deliver__dead_after_the_attempt_limit_with_one_alert(
    services: Services, conn: Conn
) -> None:
    now = utcnow()
    with receiver(status(503)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        dlvs = [
            (
                await make_delivery(
                    conn, tenant, form, dst, rte, target={"url": peer.url}, max_attempts=3
                )
            )[1]
            for _ in range(2)
        ]
        # Backoff grows 60 s, 120 s: each pass runs when the last one's retries are due.
        expected_waits = [60, 120]
        for n in range(3):
            await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
            rows = [await delivery(conn, dlv) for dlv in dlvs]
            assert all(row["attempts"] == n + 1 for row in rows)
            if n < 2:
                assert all(row["status"] == "failed" for row in rows)
                for row in rows:
                    wait = (row["next_attempt_at"] - now).total_seconds()
                    assert 0.8 * expected_waits[n] <= wait <= 1.2 * expected_waits[n] + 5
                now = max(row["next_attempt_at"] for row in rows) + timedelta(seconds=1)
    assert len(peer.requests) == 6
    for row in rows:
        assert (row["status"], row["reason"]) == ("dead", "attempts_exhausted")
    cur = await conn.execute("SELECT kind, subject_id, occurrences, status FROM alerts")
    assert await cur.fetchall() == [
        {"kind": "delivery.dead", "subject_id": dst, "occurrences": 2, "status": "open"}
    ]
    cur = await conn.execute(
        "SELECT subject_id, data->>'reason' AS reason FROM events"
        " WHERE type = 'delivery.dead' ORDER BY subject_id"
    )
    assert await cur.fetchall() == [
        {"subject_id": dlv, "reason": "attempts_exhausted"} for dlv in sorted(dlvs)
    ]
