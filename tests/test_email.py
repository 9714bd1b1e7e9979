from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from core.adapters import email as email_adapter
from core.db import Conn
from core.deliver import Deliverer, WorkerOptions
from core.email_text import message
from core.services import Services, utcnow
from tests.outbox_support import (
    SUBMITTED_AT,
    attempts,
    close_http,  # noqa: F401
    delivery,
    make_delivery,
    make_destination,
    make_tenant,
    with_settings,
)

FAST = WorkerOptions(timeout=2, margin=0.1)
REGION = "eu-west-1"
SENDER = "forms@postbag.test"
TEMPLATE = {
    "subject": None,
    "text": None,
    "labels": {"name": "Your name", "email": "Email", "subscribe": "Subscribe?"},
    "field_order": ["name", "email", "subscribe", "notes"],
    "form_name": "Contact",
}


@pytest.fixture
def ses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    email_adapter._ses_clients.clear()
    with mock_aws():
        boto3.client("ses", region_name=REGION).verify_email_identity(EmailAddress=SENDER)
        from moto.ses.models import ses_backends

        yield ses_backends[DEFAULT_ACCOUNT_ID][REGION]
    email_adapter._ses_clients.clear()


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


async def test_email__ses_default_text_line_by_line(
    services: Services, conn: Conn, ses: Any
) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    tenant = await make_tenant(conn)
    dst, rte = await make_destination(
        conn, tenant, type="email", config={"to": ["owner@example.com"]}, secret=None
    )
    values = {"email": "a@example.com", "name": "Ada", "subscribe": True, "notes": ""}
    sub, dlv = await make_delivery(
        conn,
        tenant,
        dst,
        rte,
        channel="email",
        target={"to": ["owner@example.com"]},
        values=values,
        template=TEMPLATE,
        max_attempts=8,
        secret_version=None,
    )
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
        f"Receipt {sub} · form Contact ({tenant.form}) · received {SUBMITTED_AT}",
    ]
    assert (await delivery(conn, dlv))["status"] == "sent"


async def test_email__route_template(services: Services, conn: Conn, ses: Any) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    tenant = await make_tenant(conn)
    dst, rte = await make_destination(
        conn, tenant, type="email", config={"to": ["owner@example.com"]}, secret=None
    )
    template = {
        **TEMPLATE,
        "subject": "Message from {{name}}",
        "text": "{{name}} <{{email}}> wrote: {{notes}} (opt-in: {{subscribe}})",
    }
    await make_delivery(
        conn,
        tenant,
        dst,
        rte,
        channel="email",
        target={"to": ["owner@example.com"]},
        values={"name": "Ada", "email": "a@example.com", "notes": "hi", "subscribe": False},
        template=template,
        max_attempts=8,
        secret_version=None,
    )
    await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=5)
    [sent] = ses.sent_messages
    assert sent.subject == "Message from Ada"
    assert sent.body == "Ada <a@example.com> wrote: hi (opt-in: No)"


async def test_email__not_configured_fails_and_retries(services: Services, conn: Conn) -> None:
    mail = with_settings(services, email_provider="ses", mail_from=None)
    tenant = await make_tenant(conn)
    dst, rte = await make_destination(
        conn, tenant, type="email", config={"to": ["owner@example.com"]}, secret=None
    )
    _, dlv = await make_delivery(
        conn,
        tenant,
        dst,
        rte,
        channel="email",
        target={"to": ["owner@example.com"]},
        max_attempts=8,
        secret_version=None,
    )
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
    tenant = await make_tenant(conn)
    dst, rte = await make_destination(
        conn, tenant, type="email", config={"to": ["owner@example.com"]}, secret=None
    )
    _, dlv = await make_delivery(
        conn,
        tenant,
        dst,
        rte,
        channel="email",
        target={"to": ["owner@example.com"]},
        max_attempts=8,
        secret_version=None,
    )
    assert services.settings.email_provider == "log"
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["sent_at"]) == ("skipped", "email_log_only", None)
    assert await attempts(conn, dlv) == []
