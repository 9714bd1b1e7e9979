from __future__ import annotations

import json
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

import pytest
from aiosmtpd.smtp import Envelope

from core.destinations.text import message
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import SUBMITTED_AT, make_delivery, make_route_to, setup_form
from tests.support.peers import free_port, receiver, status
from tests.support.records import attempts, delivery
from tests.support.settings import SENDER, with_settings

FAST = WorkerOptions(timeout=2, margin=0.1)
TEMPLATE = {
    "subject": None,
    "text": None,
    "labels": {"name": "Your name", "email": "Email", "subscribe": "Subscribe?"},
    "field_order": ["name", "email", "subscribe", "notes"],
    "form_name": "Contact",
}


def test_message__default_text_in_form_order() -> None:
    payload = {
        "receipt": "sub_1",
        "form": "frm_1",
        "submitted_at": SUBMITTED_AT,
        "values": {"email": "a@example.com", "subscribe": False, "name": "Ada", "extra": "x"},
        "attachments": {"cv": [{"name": "cv.pdf"}]},
    }
    subject, text = message(payload, TEMPLATE)
    assert subject == "New form submission"
    assert text.splitlines() == [
        "Your name: Ada",
        "Email: a@example.com",
        "Subscribe?: No",
        "notes: —",
        "extra: x",
        "cv: cv.pdf",
        f"Receipt sub_1 · form Contact (frm_1) · received {SUBMITTED_AT}",
    ]


DEFAULT_VALUES = {"name": "Ada", "email": "a@example.com", "subscribe": True, "notes": "hi"}
RESEND_KEY = "re_test_0123456789"


async def _email_delivery(
    conn: Conn,
    to: str = "owner@example.com",
    *,
    values: dict[str, Any] = DEFAULT_VALUES,
    template: dict[str, Any] | None = TEMPLATE,
) -> tuple[str, str, str]:
    """A due email delivery to `to`: its submission, its id and the form."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(
        conn, tenant, form, type="email", config={"to": [to]}, secrets=()
    )
    sub, dlv = await make_delivery(
        conn,
        tenant,
        form,
        dst,
        rte,
        channel="email",
        target={"to": [to]},
        values=values,
        template=template,
        max_attempts=8,
        secret_version=None,
    )
    return sub, dlv, form


def _resend(services: Services, url: str) -> Services:
    return with_settings(
        services,
        email_provider="resend",
        mail_from=SENDER,
        resend_api_key=RESEND_KEY,
        resend_api_url=url,
    )


async def test_email__ses_default_text_line_by_line(
    services: Services, conn: Conn, ses: Any
) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    values = {"email": "a@example.com", "name": "Ada", "subscribe": True, "notes": ""}
    sub, dlv, form = await _email_delivery(conn, values=values)
    stats = await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1, stats
    [sent] = ses.sent_messages
    assert sent.source == SENDER
    assert sent.destinations["ToAddresses"] == ["owner@example.com"]
    assert sent.subject == "New form submission"
    assert sent.body.splitlines() == [
        "Your name: Ada",
        "Email: a@example.com",
        "Subscribe?: Yes",
        "notes: —",
        f"Receipt {sub} · form Contact ({form}) · received {SUBMITTED_AT}",
    ]
    assert (await delivery(conn, dlv))["status"] == "sent"


async def test_email__route_template(services: Services, conn: Conn, ses: Any) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    template = {
        **TEMPLATE,
        "subject": "Message from {{name}}",
        "text": "{{name}} <{{email}}> wrote: {{notes}} (opt-in: {{subscribe}})",
    }
    values = {"name": "Ada", "email": "a@example.com", "notes": "hi", "subscribe": False}
    await _email_delivery(conn, values=values, template=template)
    await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    [sent] = ses.sent_messages
    assert sent.subject == "Message from Ada"
    assert sent.body == "Ada <a@example.com> wrote: hi (opt-in: No)"


async def test_email__not_configured_fails_and_retries(services: Services, conn: Conn) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=None)
    _sub, dlv, _form = await _email_delivery(conn)
    await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["attempts"], row["last_detail"]) == (
        "failed",
        1,
        "email_not_configured",
    )


async def test_email__log_provider_prints_and_never_claims_sent(
    services: Services, conn: Conn
) -> None:
    _sub, dlv, _form = await _email_delivery(conn)
    assert services.settings.email_provider == "log"
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["sent_at"]) == ("skipped", "email_log_only", None)
    assert await attempts(conn, dlv) == []


async def test_email__smtp_sends_the_default_text(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    sub, dlv, form = await _email_delivery(conn)
    stats = await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1, stats
    [envelope] = received
    assert (envelope.mail_from, envelope.rcpt_tos) == (SENDER, ["owner@example.com"])
    assert isinstance(envelope.content, bytes)
    parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
    assert (parsed["From"], parsed["To"]) == (SENDER, "owner@example.com")
    assert parsed["Subject"] == "New form submission"
    assert parsed["Message-ID"] == f"<{dlv}@{SENDER.rpartition('@')[2]}>"
    body = parsed.get_body()
    assert body is not None
    assert body.get_content().splitlines() == [
        "Your name: Ada",
        "Email: a@example.com",
        "Subscribe?: Yes",
        "notes: hi",
        f"Receipt {sub} · form Contact ({form}) · received {SUBMITTED_AT}",
    ]
    assert (await delivery(conn, dlv))["status"] == "sent"


async def test_email__a_line_break_in_a_templated_subject_adds_no_header(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    """A visitor's CR/LF reaching the subject is sent as a space: one Subject line, no Bcc,
    and the email is delivered rather than refused by the mail library every attempt."""
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    template = {**TEMPLATE, "subject": "From {{name}}"}
    values = {"name": "Ada\r\nBcc: victim@example.com", "email": "a@example.com"}
    _sub, _dlv, _form = await _email_delivery(conn, values=values, template=template)
    stats = await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1, stats
    [envelope] = received
    assert envelope.rcpt_tos == ["owner@example.com"]
    assert isinstance(envelope.content, bytes)
    parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
    assert parsed["Subject"] == "From Ada Bcc: victim@example.com"
    assert parsed["Bcc"] is None


async def test_email__smtp_refused_recipient_is_dead_at_once(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    _sub, dlv, _form = await _email_delivery(conn, to="nobody@example.com")
    await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["attempts"]) == ("dead", 1)
    assert [a["error_class"] for a in await attempts(conn, dlv)] == ["smtp_recipients_refused"]
    assert received == []


async def test_email__smtp_server_down_is_retried(services: Services, conn: Conn) -> None:
    url = f"smtp://127.0.0.1:{free_port()}"  # nothing listens there
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    _sub, dlv, _form = await _email_delivery(conn)
    await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert (await delivery(conn, dlv))["status"] == "failed"


def _header(request: Any, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), None)


async def test_email__resend_posts_the_message_with_key_and_idempotency(
    services: Services, conn: Conn
) -> None:
    with receiver(status(200, {"Content-Type": "application/json"}, b'{"id": "re_1"}')) as api:
        mail = _resend(services, api.url)
        sub, dlv, form = await _email_delivery(conn)
        stats = await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1, stats
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/emails")
    assert _header(request, "Authorization") == f"Bearer {RESEND_KEY}"
    assert _header(request, "Idempotency-Key") == dlv
    body = json.loads(request.body)
    assert (body["from"], body["to"], body["subject"]) == (
        SENDER,
        ["owner@example.com"],
        "New form submission",
    )
    assert body["text"].splitlines()[-1] == (
        f"Receipt {sub} · form Contact ({form}) · received {SUBMITTED_AT}"
    )
    assert (await delivery(conn, dlv))["status"] == "sent"


@pytest.mark.parametrize(("code", "state"), [(422, "dead"), (429, "failed"), (500, "failed")])
async def test_email__resend_refusal_is_dead_and_overload_retried(
    services: Services, conn: Conn, code: int, state: str
) -> None:
    with receiver(status(code, {}, b'{"message": "no"}')) as api:
        mail = _resend(services, api.url)
        _sub, dlv, _form = await _email_delivery(conn)
        await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    assert (await delivery(conn, dlv))["status"] == state
    assert [a["http_status"] for a in await attempts(conn, dlv)] == [code]
