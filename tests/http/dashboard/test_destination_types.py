"""The dashboard's destination form comes from the registry, and every chat type (whose
incoming-webhook URL is its secret) is added, delivered to and rotated through it."""

from __future__ import annotations

import json

import pytest

from core.destinations.http import close_shared_client
from core.destinations.registry import ADAPTERS
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_form, make_route, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.settings import with_settings
from tests.support.submit import submit_client
from tests.support.vendors import SPREADSHEET, GoogleSheets, service_account_key

CHAT_TYPES = sorted(name for name, adapter in ADAPTERS.items() if adapter.secret_field)
TOKEN = "url-token-that-is-the-secret-4421"


async def test_destination_form__offers_every_registered_type_and_config_field(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        page = (await client.get("/app/destinations")).text
    for name, adapter in ADAPTERS.items():
        assert f'<option value="{name}">{adapter.label}</option>' in page
        for field in adapter.Config.model_fields:
            assert f'name="{field}"' in page


async def test_destination_form__an_unknown_type_is_refused_and_nothing_stored(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        refused = await client.post(
            "/app/destinations",
            data={"csrf": token, "type": "fax", "name": "Fax", "chat_id": "-100123"},
        )
    assert refused.status_code == 422, refused.text
    assert await rows(conn, "SELECT 1 FROM destinations") == []


async def test_destination_form__a_rate_limit_is_set_refused_and_given_back_to_the_default(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    chat = next(name for name in CHAT_TYPES if ADAPTERS[name].rate_per_second)
    default = ADAPTERS[chat].rate_per_second
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        webhook = {"csrf": token, "type": "webhook", "name": "Hook"}
        webhook |= {"url": "https://example.com/hook", "secret": "a-signing-secret-0123456789"}
        for bad in ("fast", "0", "-1", "1001", "nan"):
            refused = await client.post(
                "/app/destinations", data={**webhook, "rate_per_second": bad}
            )
            assert refused.status_code == 422, (bad, refused.text)
        assert await rows(conn, "SELECT 1 FROM destinations") == []
        added = await client.post("/app/destinations", data={**webhook, "rate_per_second": "0.5"})
        assert added.status_code == 303, added.text
        url = f"https://example.com/hook/{TOKEN}"
        data = {"csrf": token, "type": chat, "name": "Chat", "url": url, "rate_per_second": "3"}
        assert (await client.post("/app/destinations", data=data)).status_code == 303
        (dest,) = await rows(conn, "SELECT id FROM destinations WHERE name = 'Chat'")
        listing = (await client.get("/app/destinations")).text
        assert "At most 0.5 a second<" in listing and "At most 3 a second<" in listing
        cleared = await client.post(
            f"/app/destinations/{dest['id']}", data={"csrf": token, "rate_per_second": ""}
        )
        assert cleared.status_code == 303, cleared.text
        listing = (await client.get("/app/destinations")).text
    assert f"At most {default:g} a second (its type&#39;s default)" in listing
    stored = await rows(conn, "SELECT name, rate_per_second FROM destinations ORDER BY name")
    assert stored == [
        {"name": "Chat", "rate_per_second": None},
        {"name": "Hook", "rate_per_second": 0.5},
    ]


@pytest.mark.parametrize("kind", CHAT_TYPES)
async def test_chat_destination__added_delivered_and_rotated_in_the_dashboard(
    services: Services, conn: Conn, kind: str
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, name="Contact", labels={"message": "Message"})
    with receiver() as first, receiver() as second:
        async with dashboard_client(services) as client:
            token = await sign_in(client, tenant.key)
            added = await client.post(
                "/app/destinations",
                data={
                    "csrf": token,
                    "type": kind,
                    "name": "Team chat",
                    "url": f"{first.url}/hook/{TOKEN}",
                    # Above the type's default: the second message need not wait for it.
                    "rate_per_second": "50",
                },
            )
            assert added.status_code == 303, added.text
            listing = (await client.get("/app/destinations")).text
            assert "Team chat" in listing and ADAPTERS[kind].label in listing
            assert "At most 50 a second<" in listing
            assert f"{first.url}/hook/…" in listing and TOKEN not in listing
            (dest,) = await rows(conn, "SELECT id FROM destinations WHERE name = 'Team chat'")
            await make_route(conn, tenant, form_id, dest["id"])

            async with submit_client(services) as visitor:
                sent = await visitor.post(f"/s/{form_id}", json={"message": "Hello there"})
            assert sent.status_code == 201, sent.text
            receipt = sent.json()["receipt"]
            stats = await Deliverer(services, options=WorkerOptions(timeout=2)).run_pass(
                now=utcnow(), budget=5
            )
            assert stats["sent"] == 1, stats
            [request] = first.requests
            assert request.path == f"/hook/{TOKEN}"
            # The text as a person reads it: each format's escaping backslashes removed.
            body = json.dumps(json.loads(request.body), ensure_ascii=False).replace("\\\\", "")
            assert "Hello there" in body and "Message" in body and receipt in body

            rotated = await client.post(
                f"/app/destinations/{dest['id']}",
                data={"csrf": token, "url": f"{second.url}/hook/{TOKEN}-2"},
            )
            assert rotated.status_code == 303, rotated.text
            versions = await rows(
                conn,
                "SELECT version FROM destination_secrets WHERE destination_id = %(id)s",
                id=dest["id"],
            )
            assert sorted(v["version"] for v in versions) == [1, 2]
            async with submit_client(services) as visitor:
                again = await visitor.post(f"/s/{form_id}", json={"message": "Second"})
            assert again.status_code == 201, again.text
            await Deliverer(services, options=WorkerOptions(timeout=2)).run_pass(
                now=utcnow(), budget=5
            )
            await close_shared_client()
    assert len(first.requests) == 1
    [later] = second.requests
    assert later.path == f"/hook/{TOKEN}-2" and b"Second" in later.body


async def test_google_sheets_destination__added_with_its_json_key_and_test_sent_in_the_dashboard(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    double = GoogleSheets()
    with receiver(double.respond) as peer:
        double.url = peer.url
        sheets = with_settings(
            services, google_sheets_url=peer.url, google_token_url=peer.url + "/token"
        )
        async with dashboard_client(sheets) as client:
            token = await sign_in(client, tenant.key)
            added = await client.post(
                "/app/destinations",
                data={
                    "csrf": token,
                    "type": "google_sheets",
                    "name": "Responses",
                    "spreadsheet_id": SPREADSHEET,
                    "sheet": "Sheet1",
                    # Pasted into a one-line input: the file's line breaks are gone.
                    "secret": service_account_key().replace("\n", ""),
                },
            )
            assert added.status_code == 303, added.text
            (dest,) = await rows(conn, "SELECT id, config FROM destinations")
            tested = await client.post(f"/app/destinations/{dest['id']}/test", data={"csrf": token})
            listing = (await client.get("/app/destinations")).text
    assert tested.status_code == 200, tested.text
    assert f"Test to <code>{dest['id']}</code>: delivered — sent (HTTP 200)" in tested.text
    assert dest["config"] == {"spreadsheet_id": SPREADSHEET, "sheet": "Sheet1"}
    assert [cells[1] for cells in double.data("Sheet1")] == [("text", "sub_test")]
    assert "PRIVATE KEY" not in listing
