"""Autoresponses through the submit path, the outbox and a real SMTP peer (aiosmtpd):
placeholders filled and escaped, only accepted submissions answered, the per-mailbox bounds
across forms and organizations, and the suppression list (docs/autoresponse.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

import httpx
from aiosmtpd.smtp import Envelope

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.destinations.test_email import FAST
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import Tenant, make_form, make_tenant
from tests.support.mail import Smtp, mailed
from tests.support.records import claimed, rows
from tests.support.settings import SENDER, with_settings
from tests.support.submit import submit_client

JSON = {"Accept": "application/json"}
REPLY = {
    "to_field": "email",
    "subject": "Thanks {{name}}, {{form.name}} got it",
    "text": "Hello {{name}},\nyour message: {{message}}\nreceipt {{receipt}} at {{submitted_at}}",
    "html": True,
    "reply_to": "help@example.com",
    "from_name": "Acme Support",
    "fields": ["name", "message"],
}

# As the API stores it (defaults filled in).
FULL = {**REPLY, "enabled": True}


async def _form(services: Services, tenant: Tenant, **settings: Any) -> str:
    async with api_client(services) as api:
        made = await create(
            api,
            tenant,
            "/v1/forms",
            {"name": "Contact", "autoresponse": {**REPLY, **settings}, "rate_limit": {"max": 100}},
        )
    return str(made["id"])


async def _post(
    client: httpx.AsyncClient, form: str, body: dict[str, str], origin: str = "https://example.com"
) -> str:
    answer = await client.post(f"/s/{form}", json=body, headers={**JSON, "Origin": origin})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["receipt"])


async def _deliver(services: Services) -> dict[str, int]:
    stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=10)
    return dict(stats)


def _parsed(envelope: Envelope) -> EmailMessage:
    assert isinstance(envelope.content, bytes)
    parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
    assert isinstance(parsed, EmailMessage)
    return parsed


async def test_autoresponse__placeholders_filled_and_escaped_through_smtp(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    """A CR/LF in a value adds no header (the subject stays one line), `<script>` is escaped
    in the HTML part, the unlisted field never shows, and the receipt shows it sent."""
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    form = await _form(mail, acme)
    async with submit_client(mail) as client:
        receipt = await _post(
            client,
            form,
            {
                "email": "visitor@example.com",
                "name": "Eve\r\nBcc: victim@example.com",
                "message": "<script>alert(1)</script>",
                "secret": "not for the visitor",
            },
        )
    assert (await _deliver(mail))["sent"] == 1
    [envelope] = smtp_server[1]
    assert envelope.rcpt_tos == ["visitor@example.com"]
    parsed = _parsed(envelope)
    assert parsed["Bcc"] is None
    assert parsed["Subject"] == "Thanks Eve  Bcc: victim@example.com, Contact got it"
    assert parsed["From"] == f"Acme Support <{mail.settings.mail_from}>"
    assert parsed["Reply-To"] == "help@example.com"
    assert parsed["Auto-Submitted"] == "auto-replied"
    assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    unsubscribe = str(parsed["List-Unsubscribe"])
    assert "<mailto:" in unsubscribe and "<http://127.0.0.1:8080/s/unsubscribe/" in unsubscribe
    text = parsed.get_body(("plain",))
    page = parsed.get_body(("html",))
    assert text is not None and page is not None
    assert "your message: <script>alert(1)</script>" in text.get_content()
    assert f"receipt {receipt} at " in text.get_content()
    markup = page.get_content()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup and "<script>" not in markup
    assert "not for the visitor" not in envelope.content.decode()
    async with api_client(mail) as api:
        read = await api.get(f"/v1/submissions/{receipt}", headers=acme.headers)
    assert [(d["kind"], d["status"]) for d in read.json()["deliveries"]] == [
        ("autoresponse", "sent")
    ]


async def test_autoresponse__a_template_naming_an_unlisted_field_is_refused(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as api:
        answer = await api.post(
            "/v1/forms",
            json={"name": "Contact", "autoresponse": {**REPLY, "text": "{{secret}}"}},
            headers=acme.headers,
        )
    assert_problem(answer, 422, "invalid_template")
    found = await rows(conn, "SELECT count(*) AS n FROM forms")
    assert found == [{"n": 0}]


async def test_autoresponse__spam_quarantined_and_rate_limited_posts_get_none(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    async with api_client(mail) as api:
        made = await create(
            api,
            acme,
            "/v1/forms",
            {
                "name": "Contact",
                "autoresponse": REPLY,
                "rate_limit": {"max": 3, "per_seconds": 600},
                "allowed_origins": ["https://example.com"],
            },
        )
    form = str(made["id"])
    visitor = {"email": "visitor@example.com", "name": "Ada", "message": "hi"}
    async with submit_client(mail) as client:
        await _post(client, form, {**visitor, "_gotcha": "bot"})  # spam
        await _post(client, form, visitor, origin="https://evil.example")  # origin_rejected
        await _post(client, form, {**visitor, "n": "1"})  # accepted: the one within the rate
        await _post(client, form, {**visitor, "n": "2"})  # quarantined: rate_limited
    statuses = await rows(
        conn,
        """SELECT s.status, s.reason, (SELECT count(*) FROM deliveries d
                                        WHERE d.submission_id = s.id) AS deliveries
             FROM submissions s""",
    )
    assert sorted((r["status"], r["reason"] or "", r["deliveries"]) for r in statuses) == [
        ("accepted", "", 1),
        ("quarantined", "origin_rejected", 0),
        ("quarantined", "rate_limited", 0),
        ("spam", "honeypot", 0),
    ]
    await _deliver(mail)
    assert len(smtp_server[1]) == 1


async def test_autoresponse__bounded_per_mailbox_across_50_forms_of_one_and_two_organizations(
    services: Services, conn: Conn
) -> None:
    """3 a day per organization, 10 per installation; the rest are `skipped` with
    `autoresponse_limited`, counted under concurrent posts."""
    acme = await make_tenant(conn, plan="self_hosted")
    globex = await make_tenant(conn, name="Globex", plan="self_hosted")
    acme_forms = [await make_form(conn, acme, autoresponse=FULL) for _ in range(25)]
    globex_forms = [await make_form(conn, globex, autoresponse=FULL) for _ in range(25)]
    victim = {"email": "victim@example.com", "name": "V", "message": "m"}
    async with submit_client(services) as client:
        await asyncio.gather(*(_post(client, f, victim) for f in acme_forms + globex_forms))
        # Another mailbox is bounded on its own.
        await _post(client, acme_forms[0], {**victim, "email": "ada@example.com"})
    found = await rows(
        conn,
        """SELECT organization_id AS org, target -> 'to' ->> 0 AS address, status, reason,
                  count(*) AS n
             FROM deliveries WHERE kind = 'autoresponse' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3""",
    )
    by = {(r["org"], r["address"], r["status"]): (r["reason"], r["n"]) for r in found}
    assert by[(acme.org, "victim@example.com", "pending")] == (None, 3)
    assert by[(acme.org, "victim@example.com", "skipped")] == ("autoresponse_limited", 22)
    assert by[(globex.org, "victim@example.com", "pending")] == (None, 3)
    assert by[(globex.org, "victim@example.com", "skipped")] == ("autoresponse_limited", 22)
    assert by[(acme.org, "ada@example.com", "pending")] == (None, 1)


async def test_autoresponse__the_installation_bound_holds_across_organizations(
    services: Services, conn: Conn
) -> None:
    tenants = [await make_tenant(conn, name=f"Org {n}", plan="self_hosted") for n in range(5)]
    forms = [
        await make_form(conn, tenant, autoresponse=FULL) for tenant in tenants for _ in range(3)
    ]
    victim = {"email": "victim@example.com", "name": "V", "message": "m"}
    async with submit_client(services) as client:
        await asyncio.gather(*(_post(client, f, victim) for f in forms))
    found = await rows(
        conn,
        """SELECT status, count(*) AS n FROM deliveries WHERE kind = 'autoresponse'
            GROUP BY 1 ORDER BY 1""",
    )
    assert found == [{"status": "pending", "n": 10}, {"status": "skipped", "n": 5}]


async def test_autoresponse__a_crash_between_plan_and_send_still_sends_once(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    """A worker claims the planned autoresponse and dies: once its lease has passed the next
    pass sends it, and no later pass sends it again."""
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    form = await _form(mail, acme)
    async with submit_client(mail) as client:
        await _post(client, form, {"email": "visitor@example.com", "name": "Ada"})
    crashed = await claimed(conn)
    assert [c.kind for c in crashed.values()] == ["autoresponse"]
    later = utcnow() + timedelta(minutes=6)
    stats = await Deliverer(mail, options=FAST).run_pass(now=later, budget=10)
    assert stats["sent"] == 1
    again = await Deliverer(mail, options=FAST).run_pass(now=later + timedelta(hours=1), budget=5)
    assert again.get("sent", 0) == 0
    assert [e.rcpt_tos for e in smtp_server[1]] == [["visitor@example.com"]]
    found = await rows(conn, "SELECT status FROM deliveries WHERE kind = 'autoresponse'")
    assert found == [{"status": "sent"}]


async def test_autoresponse__erasure_reaches_it_before_it_is_sent(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    form = await _form(mail, acme)
    async with submit_client(mail) as client:
        receipt = await _post(client, form, {"email": "visitor@example.com", "name": "Ada"})
    async with api_client(mail) as api:
        erased = await api.post(f"/v1/submissions/{receipt}/erase", headers=acme.headers)
        assert erased.status_code == 200, erased.text
    await _deliver(mail)
    assert smtp_server[1] == []
    found = await rows(
        conn, "SELECT status, reason, target FROM deliveries WHERE kind = 'autoresponse'"
    )
    assert found == [{"status": "skipped", "reason": "values_erased", "target": {"to": []}}]


async def test_autoresponse__through_ses_goes_raw_with_its_headers(
    services: Services, conn: Conn, ses: Any
) -> None:
    """SES builds no headers of the sender's own: the autoresponse goes as a raw message."""
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    acme = await make_tenant(conn)
    form = await _form(mail, acme)
    async with submit_client(mail) as client:
        await _post(client, form, {"email": "visitor@example.com", "name": "Ada"})
    assert (await _deliver(mail))["sent"] == 1
    [sent] = ses.sent_messages
    parsed = BytesParser(policy=default_policy).parsebytes(sent.raw_data.encode())
    assert parsed["Auto-Submitted"] == "auto-replied"
    assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert parsed["Subject"] == "Thanks Ada, Contact got it"
    assert parsed["From"] == f"Acme Support <{SENDER}>"
