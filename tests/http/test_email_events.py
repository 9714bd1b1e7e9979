"""The suppression list fed by the public mail endpoints (docs/autoresponse.md): the
autoresponse's one-click unsubscribe link, Resend's signed webhook and SES's events through
SNS. A suppressed mailbox's next autoresponse is `skipped` with `suppressed`, never sent."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import time
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from core.http.email_events import SNS_CERTIFICATES, sns_string_to_sign
from core.platform.db import Conn
from core.platform.services import Services
from tests.intake.test_autoresponse import _deliver, _form, _parsed, _post
from tests.support.builders import make_tenant
from tests.support.mail import Smtp, mailed
from tests.support.records import rows
from tests.support.settings import with_settings
from tests.support.submit import submit_client

VISITOR = {"email": "visitor@example.com", "name": "Ada", "message": "hi"}
RESEND_SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
TOPIC = "arn:aws:sns:eu-west-1:123456789012:postbag-ses-events"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem"


async def _statuses(conn: Conn) -> list[tuple[str, str | None]]:
    found = await rows(
        conn,
        "SELECT status, reason FROM deliveries WHERE kind = 'autoresponse' ORDER BY id",
    )
    return [(r["status"], r["reason"]) for r in found]


async def test_unsubscribe__the_one_click_link_suppresses_the_mailbox(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    form = await _form(mail, acme)
    async with submit_client(mail) as client:
        await _post(client, form, VISITOR)
        await _deliver(mail)
        header = str(_parsed(smtp_server[1][0])["List-Unsubscribe"])
        found = re.search(r"<http://127\.0\.0\.1:8080(/s/unsubscribe/[^>]+)>", header)
        assert found, header
        link = found.group(1)
        page = await client.get(link)  # a link scanner's visit changes nothing
        assert page.status_code == 200 and '<form method="post">' in page.text
        assert await rows(conn, "SELECT reason FROM email_suppressions") == []
        forged = await client.post(link[:-3] + "AAA", content=b"List-Unsubscribe=One-Click")
        assert forged.status_code == 404
        done = await client.post(
            link,
            content=b"List-Unsubscribe=One-Click",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert done.status_code == 200
        # Another spelling of the same mailbox, to another form.
        await _post(client, await _form(mail, acme), {**VISITOR, "email": "Visitor+x@example.com"})
    assert await rows(conn, "SELECT reason FROM email_suppressions") == [{"reason": "unsubscribed"}]
    assert await _statuses(conn) == [("sent", None), ("skipped", "suppressed")]
    await _deliver(mail)
    assert len(smtp_server[1]) == 1


def _svix(secret: str, body: bytes, *, at: int) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = hmac.new(key, b"msg_1." + str(at).encode() + b"." + body, hashlib.sha256).digest()
    return {
        "svix-id": "msg_1",
        "svix-timestamp": str(at),
        "svix-signature": "v1," + base64.b64encode(signed).decode(),
        "Content-Type": "application/json",
    }


async def test_resend_webhook__a_signed_bounce_suppresses_and_an_unsigned_one_does_not(
    services: Services, conn: Conn
) -> None:
    hooked = with_settings(services, resend_webhook_secret=RESEND_SECRET)
    acme = await make_tenant(conn)
    form = await _form(hooked, acme)
    event = {
        "type": "email.bounced",
        "created_at": "2026-12-04T12:00:00.000Z",
        "data": {"email_id": "e1", "to": ["visitor@example.com"], "subject": "Thanks"},
    }
    body = json.dumps(event).encode()
    now = int(time.time())
    async with submit_client(hooked) as client:
        wrong = _svix(
            "whsec_" + base64.b64encode(b"another secret, 32 bytes long..").decode(), body, at=now
        )
        assert (
            await client.post("/s/email/events/resend", content=body, headers=wrong)
        ).status_code == 401
        stale = _svix(RESEND_SECRET, body, at=now - 3600)
        assert (
            await client.post("/s/email/events/resend", content=body, headers=stale)
        ).status_code == 401
        assert await rows(conn, "SELECT reason FROM email_suppressions") == []
        signed = _svix(RESEND_SECRET, body, at=now)
        answer = await client.post("/s/email/events/resend", content=body, headers=signed)
        assert answer.status_code == 204
        await _post(client, form, VISITOR)
    assert await rows(conn, "SELECT reason FROM email_suppressions") == [{"reason": "bounced"}]
    assert await _statuses(conn) == [("skipped", "suppressed")]


def _signer() -> tuple[rsa.RSAPrivateKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


def _sns(key: rsa.RSAPrivateKey, notification: dict[str, Any], topic: str = TOPIC) -> bytes:
    message: dict[str, Any] = {
        "Type": "Notification",
        "MessageId": "5f0b1c2e-0000-4000-8000-000000000001",
        "TopicArn": topic,
        "Message": json.dumps(notification),
        "Timestamp": "2026-12-04T12:00:00.000Z",
        "SignatureVersion": "2",
        "SigningCertURL": CERT_URL,
    }
    signed = sns_string_to_sign(message)
    assert signed is not None
    signature = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    return json.dumps({**message, "Signature": base64.b64encode(signature).decode()}).encode()


async def test_ses_events__a_signed_permanent_bounce_suppresses_only_from_a_listed_topic(
    services: Services, conn: Conn
) -> None:
    """The SNS signature is checked for real against the certificate of its
    `SigningCertURL`; the test hands the process that certificate instead of AWS."""
    hooked = with_settings(services, ses_events_topic_arns=[TOPIC])
    key, pem = _signer()
    hooked.state(SNS_CERTIFICATES)[CERT_URL] = pem
    bounce = {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bouncedRecipients": [{"emailAddress": "visitor@example.com"}],
        },
    }
    transient = {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Transient",
            "bouncedRecipients": [{"emailAddress": "other@example.com"}],
        },
    }
    complaint = {
        "notificationType": "Complaint",
        "complaint": {"complainedRecipients": [{"emailAddress": "angry@example.com"}]},
    }
    async with submit_client(hooked) as client:
        elsewhere = _sns(key, bounce, topic="arn:aws:sns:eu-west-1:999999999999:theirs")
        assert (await client.post("/s/email/events/ses", content=elsewhere)).status_code == 403
        forged = json.loads(_sns(key, bounce))
        forged["Message"] = json.dumps(complaint)
        answer = await client.post("/s/email/events/ses", content=json.dumps(forged).encode())
        assert answer.status_code == 401
        for notification in (bounce, transient, complaint):
            answer = await client.post("/s/email/events/ses", content=_sns(key, notification))
            assert answer.status_code == 204
    found = await rows(conn, "SELECT reason FROM email_suppressions ORDER BY reason")
    assert found == [{"reason": "bounced"}, {"reason": "complained"}]
    acme = await make_tenant(conn)
    form = await _form(hooked, acme)
    async with submit_client(hooked) as client:
        await _post(client, form, VISITOR)
        await _post(client, form, {**VISITOR, "email": "other@example.com"})
    assert await _statuses(conn) == [("skipped", "suppressed"), ("pending", None)]


async def test_resend_webhook__a_bounce_after_the_plan_stops_the_send(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    """An autoresponse planned before its mailbox was suppressed is checked again when it is
    claimed: `skipped` with `suppressed`, nothing sent."""
    hooked = with_settings(mailed(services, smtp_server), resend_webhook_secret=RESEND_SECRET)
    acme = await make_tenant(conn)
    form = await _form(hooked, acme)
    body = json.dumps({"type": "email.complained", "data": {"to": ["visitor@example.com"]}})
    async with submit_client(hooked) as client:
        await _post(client, form, VISITOR)
        signed = _svix(RESEND_SECRET, body.encode(), at=int(time.time()))
        answer = await client.post("/s/email/events/resend", content=body, headers=signed)
        assert answer.status_code == 204
    await _deliver(hooked)
    assert smtp_server[1] == []
    assert await _statuses(conn) == [("skipped", "suppressed")]
