"""A destination's `rate_limit` through `/v1`: the chat types' defaults as the answer shows
them, setting, changing and clearing one, and the refusals (docs/delivery.md#rate-limits)."""

from __future__ import annotations

from typing import Any

import pytest

from core.destinations.registry import ADAPTERS
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import WEBHOOK, api_client, assert_problem, create, error_fields
from tests.support.builders import make_tenant
from tests.support.records import rows

CHAT_TYPES = sorted(name for name, adapter in ADAPTERS.items() if adapter.secret_field)


def _chat(kind: str) -> dict[str, Any]:
    return {"type": kind, "name": "Chat", "config": {"url": "https://example.com/hook/t0ken"}}


@pytest.mark.parametrize("kind", CHAT_TYPES)
async def test_rate_limit__a_chat_type_has_its_service_s_rate_by_default(
    services: Services, conn: Conn, kind: str
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    rate = ADAPTERS[kind].rate_per_second
    assert rate is not None and rate <= 1  # Slack, Telegram, Teams 1 a second; Discord 0.5
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", _chat(kind))
        got = (await client.get(f"/v1/destinations/{made['id']}", headers=acme.headers)).json()
    expected = {"per_second": rate, "default": True, "current_per_second": rate}
    assert made["rate_limit"] == got["rate_limit"] == expected


async def test_rate_limit__set_changed_and_given_back_to_the_type_s_default(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as client:
        hook = await create(client, acme, "/v1/destinations", WEBHOOK)
        assert hook["rate_limit"] is None  # webhooks and email: none unless set
        limited = await create(
            client, acme, "/v1/destinations", {**WEBHOOK, "rate_limit": {"per_second": 0.5}}
        )
        assert limited["rate_limit"] == {
            "per_second": 0.5,
            "default": False,
            "current_per_second": 0.5,
        }
        slack = await create(client, acme, "/v1/destinations", _chat("slack"))
        url = f"/v1/destinations/{slack['id']}"
        raised = await client.patch(
            url, json={"rate_limit": {"per_second": 3}}, headers=acme.headers
        )
        assert raised.status_code == 200, raised.text
        assert raised.json()["rate_limit"] == {
            "per_second": 3,
            "default": False,
            "current_per_second": 3,
        }
        renamed = await client.patch(url, json={"name": "Sales"}, headers=acme.headers)
        assert renamed.json()["rate_limit"]["per_second"] == 3  # left out: kept
        cleared = await client.patch(url, json={"rate_limit": None}, headers=acme.headers)
        assert cleared.status_code == 200, cleared.text
        assert cleared.json()["rate_limit"] == {
            "per_second": 1,
            "default": True,
            "current_per_second": 1,
        }
        unset = await client.patch(
            f"/v1/destinations/{hook['id']}", json={"rate_limit": None}, headers=acme.headers
        )
        assert unset.json()["rate_limit"] is None


@pytest.mark.parametrize(
    "rate_limit",
    [
        {"per_second": 0},
        {"per_second": -1},
        {"per_second": 1001},
        {"per_second": 0.0001},
        {"per_second": "2"},
        {"per_second": True},
        {"per_second": None},
        {},
        {"per_second": 1, "burst": 5},
        2,
    ],
)
async def test_rate_limit__refused_with_the_field_named_and_nothing_stored(
    services: Services, conn: Conn, rate_limit: Any
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as client:
        hook = await create(client, acme, "/v1/destinations", WEBHOOK)
        created = await client.post(
            "/v1/destinations", json={**WEBHOOK, "rate_limit": rate_limit}, headers=acme.headers
        )
        patched = await client.patch(
            f"/v1/destinations/{hook['id']}",
            json={"name": "Renamed", "rate_limit": rate_limit},
            headers=acme.headers,
        )
    for refused in (created, patched):
        body = assert_problem(refused, 422, "invalid_input")
        assert any(field.startswith("rate_limit") for field in error_fields(body)), body
    stored = await rows(conn, "SELECT name, rate_per_second FROM destinations")
    assert stored == [{"name": "Hook", "rate_per_second": None}]
