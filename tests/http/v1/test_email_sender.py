"""An organization's own email sender through `/v1/organization/email`: its mail (a
destination's, an autoresponse) reaches its own SMTP server and never the installation's,
another organization's still goes through the installation's; the secret is write-only;
the test send goes through the sender in use (docs/autoresponse.md)."""

from __future__ import annotations

import json
from typing import Any

from core.platform.db import Conn
from core.platform.services import Services
from tests.intake.test_autoresponse import _deliver, _form, _post
from tests.support.api import EMAIL, api_client, assert_problem, create
from tests.support.builders import make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.mail import Inbox, Smtp, mailed, smtp_peer
from tests.support.peers import Answer, Request, receiver
from tests.support.settings import with_settings
from tests.support.submit import submit_client

VISITOR = {"email": "visitor@example.com", "name": "Ada", "message": "hi"}


async def test_email_sender__an_organizations_mail_goes_through_its_own_smtp_server(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    mail = mailed(services, smtp_server)
    acme = await make_tenant(conn)
    globex = await make_tenant(conn, name="Globex")
    own = Inbox()
    with smtp_peer(own) as url:
        port = int(url.rpartition(":")[2])
        async with api_client(mail) as api:
            answer = await api.put(
                "/v1/organization/email",
                json={
                    "provider": "smtp",
                    "from_address": "hello@acme.example",
                    "smtp": {"host": "127.0.0.1", "port": port, "tls": "starttls"},
                    "secret": "not shown",
                },
                headers=acme.headers,
            )
            assert answer.status_code == 200, answer.text
            read = (await api.get("/v1/organization/email", headers=acme.headers)).json()
            assert read["sender"] == "organization" and read["secret_set"] is True
            assert "not shown" not in str(read)
            other = (await api.get("/v1/organization/email", headers=globex.headers)).json()
            assert other["sender"] == "installation"
            for tenant in (acme, globex):
                made = await create(api, tenant, "/v1/forms", {"name": "Contact"})
                inbox = await create(api, tenant, "/v1/destinations", EMAIL)
                await create(
                    api, tenant, f"/v1/forms/{made['id']}/routes", {"destination_id": inbox["id"]}
                )
                async with submit_client(mail) as client:
                    await _post(client, str(made["id"]), {"n": tenant.org})
            reply_form = await _form(mail, acme)
            async with submit_client(mail) as client:
                await _post(client, reply_form, VISITOR)
        stats = await _deliver(mail)
        assert stats["sent"] == 3, stats
        # The autoresponse and the destination's email of Acme went to Acme's server, from
        # Acme's address; Globex's email went through the installation's.
        assert sorted(e.rcpt_tos[0] for e in own.received) == [
            "owner@example.com",
            "visitor@example.com",
        ]
        assert {e.mail_from for e in own.received} == {"hello@acme.example"}
        assert [e.mail_from for e in smtp_server[1]] == [mail.settings.mail_from]
        assert acme.org not in bytes(smtp_server[1][0].content).decode()
        async with api_client(mail) as api:
            tested = await api.post(
                "/v1/organization/email/test",
                json={"to": "owner@example.com"},
                headers=acme.headers,
            )
            assert tested.json() == {"ok": True, "sender": "organization", "detail": "sent"}
            assert len(own.received) == 3
            removed = await api.delete("/v1/organization/email", headers=acme.headers)
            assert removed.status_code == 204
            read = (await api.get("/v1/organization/email", headers=acme.headers)).json()
            assert read["sender"] == "installation"


async def test_email_sender__needs_a_resend_key_and_a_public_smtp_server(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as api:
        keyless = await api.put(
            "/v1/organization/email",
            json={"provider": "resend", "from_address": "hello@acme.example"},
            headers=acme.headers,
        )
        assert_problem(keyless, 422, "invalid_input")
        serverless = await api.put(
            "/v1/organization/email",
            json={"provider": "smtp", "from_address": "hello@acme.example"},
            headers=acme.headers,
        )
        assert_problem(serverless, 422, "invalid_input")
        read = (await api.get("/v1/organization/email", headers=acme.headers)).json()
    assert read["sender"] == "installation"
    # Outside development, an SMTP host on a private address is refused like a webhook's.
    async with api_client(with_settings(services, allow_private_targets=False)) as api:
        private = await api.put(
            "/v1/organization/email",
            json={
                "provider": "smtp",
                "from_address": "hello@acme.example",
                "smtp": {"host": "10.0.0.7", "port": 25},
            },
            headers=acme.headers,
        )
    assert_problem(private, 422, "invalid_input")


async def test_email_sender__the_destinations_page_says_which_sender_is_in_use(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key)
        before = (await client.get("/app/destinations")).text
        async with api_client(services) as api:
            answer = await api.put(
                "/v1/organization/email",
                json={
                    "provider": "smtp",
                    "from_address": "hello@acme.example",
                    "smtp": {"host": "127.0.0.1", "port": 2525},
                },
                headers=acme.headers,
            )
            assert answer.status_code == 200, answer.text
        after = (await client.get("/app/destinations")).text
    assert "the installation's email provider" in before
    assert "SMTP server 127.0.0.1:2525" in after and "hello@acme.example" in after


RECORDS = {
    "id": "d_1",
    "name": "acme.example",
    "records": [
        {
            "record": "SPF",
            "name": "send",
            "type": "TXT",
            "ttl": "Auto",
            "status": "not_started",
            "value": "v=spf1 include:amazonses.com ~all",
        },
        {
            "record": "DKIM",
            "name": "resend._domainkey",
            "type": "TXT",
            "status": "verified",
            "value": "p=MIGfMA0",
        },
    ],
}


def _resend(request: Request) -> Answer:
    """Resend's domains API as a double: the key must be the organization's."""
    if request.headers.get("Authorization") != "Bearer re_acme_key":
        return 401, {}, b"{}"
    if request.path == "/domains":
        listed = {
            "data": [{"id": "d_0", "name": "other.example"}, {"id": "d_1", "name": "acme.example"}]
        }
        return 200, {"Content-Type": "application/json"}, json.dumps(listed).encode()
    if request.path == "/domains/d_1":
        return 200, {"Content-Type": "application/json"}, json.dumps(RECORDS).encode()
    return 404, {}, b"{}"


async def test_email_sender__the_dns_records_are_resends_as_it_names_them(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    with receiver(_resend) as resend:
        mail = with_settings(services, resend_api_url=resend.url)
        async with api_client(mail) as api:
            none = (await api.get("/v1/organization/email/dns", headers=acme.headers)).json()
            assert none["records"] == [] and none["provider"] is None
            answer = await api.put(
                "/v1/organization/email",
                json={
                    "provider": "resend",
                    "from_address": "hi@Acme.example",
                    "secret": "re_acme_key",
                },
                headers=acme.headers,
            )
            assert answer.status_code == 200, answer.text
            found = (await api.get("/v1/organization/email/dns", headers=acme.headers)).json()
        async with dashboard_client(mail) as client:
            await sign_in(client, acme.key)
            plain = (await client.get("/app/destinations")).text
            calls = len(resend.requests)
            shown = (await client.get("/app/destinations?dns=1")).text
    assert found["domain"] == "acme.example" and found["detail"] is None
    assert [(r["type"], r["name"], r["value"]) for r in found["records"]] == [
        ("TXT", "send", "v=spf1 include:amazonses.com ~all"),
        ("TXT", "resend._domainkey", "p=MIGfMA0"),
    ]
    assert calls == 2  # the API call only: a plain page load asks Resend nothing
    assert "dns-records" not in plain
    assert "<code>resend._domainkey</code>" in shown and "not_started" in shown


async def test_email_sender__an_ses_sender_sends_with_the_organizations_own_account(
    services: Services, conn: Conn, ses: Any
) -> None:
    """The organization's SES account (moto) in its own region sends its autoresponse; the
    installation's region sends nothing."""
    import boto3
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ses.models import ses_backends

    boto3.client("ses", region_name="eu-central-1").verify_email_identity(
        EmailAddress="hello@acme.example"
    )
    acme = await make_tenant(conn)
    async with api_client(services) as api:
        answer = await api.put(
            "/v1/organization/email",
            json={
                "provider": "ses",
                "from_address": "hello@acme.example",
                "ses": {"region": "eu-central-1", "access_key_id": "AKIAACMEACMEACME0001"},
                "secret": "acme-secret-access-key",
            },
            headers=acme.headers,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["ses"] == {
            "region": "eu-central-1",
            "access_key_id": "AKIAACMEACMEACME0001",
        }
    form = await _form(services, acme)
    async with submit_client(services) as client:
        await _post(client, form, VISITOR)
    assert (await _deliver(services))["sent"] == 1
    [sent] = ses_backends[DEFAULT_ACCOUNT_ID]["eu-central-1"].sent_messages
    assert "hello@acme.example" in sent.source
    assert ses.sent_messages == []


async def test_email_sender__a_resend_sender_changed_without_its_key_keeps_it(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as api:
        first = await api.put(
            "/v1/organization/email",
            json={"provider": "resend", "from_address": "hello@acme.example", "secret": "re_k1"},
            headers=acme.headers,
        )
        assert first.status_code == 200, first.text
        # A new sender address, the key left out: the stored one stays (write-only).
        moved = await api.put(
            "/v1/organization/email",
            json={"provider": "resend", "from_address": "team@acme.example"},
            headers=acme.headers,
        )
        assert moved.status_code == 200, moved.text
        read = (await api.get("/v1/organization/email", headers=acme.headers)).json()
    assert (read["from_address"], read["secret_set"]) == ("team@acme.example", True)
    stored = await conn.execute("SELECT secret FROM organization_email")
    assert await stored.fetchall() == [{"secret": "re_k1"}]
