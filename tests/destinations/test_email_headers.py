"""The owner's email of a submission, posted through `/s/{form}` and sent to a real SMTP peer
and a Resend double: `Consent: given`, `Date`, `Message-ID` and the visitor's `Reply-To`."""

from __future__ import annotations

import json
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from email.utils import parsedate_to_datetime
from typing import Any

from aiosmtpd.smtp import Envelope

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.destinations.test_email import FAST, RESEND_KEY
from tests.support.api import api_client, create
from tests.support.builders import make_tenant
from tests.support.peers import receiver, status
from tests.support.settings import SENDER, with_settings
from tests.support.submit import submit_client

FORM = {
    "name": "Contact",
    "labels": {"name": "Your name", "email": "Email", "ok": "I agree to be contacted"},
    "consent_field": "ok",
}


async def _post(services: Services, conn: Conn, form: dict[str, Any], body: str) -> None:
    """`body` posted to a form made with `form`, routed to an email destination, and one
    worker pass."""
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as api:
        made = await create(api, acme, "/v1/forms", form)
        mail = await create(
            api,
            acme,
            "/v1/destinations",
            {"type": "email", "name": "Inbox", "config": {"to": ["owner@example.com"]}},
        )
        await create(api, acme, f"/v1/forms/{made['id']}/routes", {"destination_id": mail["id"]})
    async with submit_client(services) as client:
        posted = await client.post(
            f"/s/{made['id']}",
            content=body,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
    assert posted.status_code == 201, posted.text
    stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1, stats


def _parsed(envelope: Envelope) -> EmailMessage:
    assert isinstance(envelope.content, bytes)
    parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
    assert isinstance(parsed, EmailMessage)
    return parsed


async def test_email__a_given_consent_reads_consent_given_and_replies_go_to_the_visitor(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    before = utcnow().replace(microsecond=0)
    await _post(mail, conn, FORM, "name=Ada&email=Ada%40Example.com&ok=on&message=Hello")
    [envelope] = received
    parsed = _parsed(envelope)
    body = parsed.get_body()
    assert body is not None
    lines = body.get_content().splitlines()
    assert lines[:4] == [
        "Your name: Ada",
        "Email: Ada@Example.com",
        "Consent: given",
        "message: Hello",
    ]
    assert not any(line.startswith("I agree") for line in lines)
    assert parsed["Reply-To"] == "Ada@example.com"
    assert before <= parsedate_to_datetime(parsed["Date"]) <= utcnow()
    [delivery] = [row async for row in await conn.execute("SELECT id FROM deliveries")]
    assert parsed["Message-ID"] == f"<{delivery['id']}@{SENDER.rpartition('@')[2]}>"


async def test_email__no_reply_to_for_an_address_that_is_not_one_line(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    """A visitor's CR/LF or second address is no address: no `Reply-To`, no extra header, and
    a consent box left empty reads as its label, not as consent."""
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    hostile = "a%40example.com%0D%0ABcc%3A+victim%40example.com"
    await _post(mail, conn, FORM, f"name=Eve&email={hostile}")
    [envelope] = received
    parsed = _parsed(envelope)
    assert parsed["Reply-To"] is None and parsed["Bcc"] is None
    assert envelope.rcpt_tos == ["owner@example.com"]
    body = parsed.get_body()
    assert body is not None
    assert "Consent: given" not in body.get_content()


async def test_email__the_acknowledgement_field_names_the_reply_to_through_resend(
    services: Services, conn: Conn
) -> None:
    """The form's acknowledgement field wins over a field named `email`; Resend gets it as
    `reply_to`."""
    form = {**FORM, "ack_email": {"field": "contact", "subject": "Thanks", "text": "Thanks!"}}
    answer = status(200, {"Content-Type": "application/json"}, b'{"id": "re_1"}')
    with receiver(answer) as resend:
        mail = with_settings(
            services,
            email_provider="resend",
            mail_from=SENDER,
            resend_api_key=RESEND_KEY,
            resend_api_url=resend.url,
        )
        await _post(mail, conn, form, "email=other%40example.com&contact=ada%40example.com")
    [request] = [r for r in resend.requests if json.loads(r.body)["to"] == ["owner@example.com"]]
    assert json.loads(request.body)["reply_to"] == "ada@example.com"
