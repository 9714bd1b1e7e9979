from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from core.owner.destinations import current_secret, secret_version
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import (
    EMAIL,
    TELEGRAM,
    WEBHOOK,
    Recorder,
    api_client,
    assert_problem,
    create,
    error_fields,
)
from tests.support.builders import (
    TELEGRAM_TOKEN,
    make_delivery,
    make_form,
    make_route_to,
    make_tenant,
)

MY_SECRET = "my-webhook-signing-secret-0123456789"
ROTATED = "rotated-signing-secret-abcdefghijkl"


async def test_destinations__webhook_crud_round_trip(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", WEBHOOK)
        assert made["id"].startswith("dst_")
        assert made["config"] == {"url": "https://example.com/hook"}
        assert (made["enabled"], made["health"], made["secret_set"]) == (True, "healthy", True)
        assert made["secret_version"] == 1
        url = f"/v1/destinations/{made['id']}"

        got = await client.get(url, headers=acme.headers)
        assert got.status_code == 200
        assert got.json() == {k: v for k, v in made.items() if k != "secret"}

        patched = await client.patch(
            url,
            json={"name": "Renamed", "enabled": False, "config": {"url": "https://example.org/h"}},
            headers=acme.headers,
        )
        assert patched.status_code == 200, patched.text
        body = patched.json()
        assert (body["name"], body["enabled"]) == ("Renamed", False)
        assert body["config"] == {"url": "https://example.org/h"}
        assert body["secret_version"] == 1  # no secret given: the stored one is kept

        listed = await client.get("/v1/destinations", headers=acme.headers)
        assert [d["id"] for d in listed.json()["data"]] == [made["id"]]

        assert (await client.delete(url, headers=acme.headers)).status_code == 204
        assert_problem(await client.get(url, headers=acme.headers), 404, "not_found")
        assert (await client.get("/v1/destinations", headers=acme.headers)).json()["data"] == []
        assert_problem(await client.delete(url, headers=acme.headers), 404, "not_found")
    row = await (
        await conn.execute(
            "SELECT deleted_at FROM destinations WHERE id = %(id)s", {"id": made["id"]}
        )
    ).fetchone()
    assert row is not None and row["deleted_at"] is not None  # a soft delete


async def test_destinations__email_and_telegram_round_trip(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        email = await create(client, acme, "/v1/destinations", EMAIL)
        assert (email["secret_set"], email["secret_version"], email["secret"]) == (
            False,
            None,
            None,
        )
        assert email["config"] == {"to": ["owner@example.com"]}
        telegram = await create(client, acme, "/v1/destinations", TELEGRAM)
        assert (telegram["secret_set"], telegram["secret"]) == (True, None)
        assert telegram["config"] == {"chat_id": "-1001234567890"}
        patched = await client.patch(
            f"/v1/destinations/{email['id']}",
            json={"config": {"to": ["a@example.com", "b@example.com"]}},
            headers=acme.headers,
        )
        assert patched.json()["config"] == {"to": ["a@example.com", "b@example.com"]}


async def test_destinations__generated_webhook_secret_is_shown_once(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", WEBHOOK)
        secret = made["secret"]
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
        got = await client.get(f"/v1/destinations/{made['id']}", headers=acme.headers)
        listed = await client.get("/v1/destinations", headers=acme.headers)
    assert secret not in got.text and secret not in listed.text
    assert got.json()["secret_set"] is True
    async with services.db.scoped(acme.scope) as tx:
        assert await current_secret(tx, acme.scope, destination_id=made["id"]) == (1, secret)


async def test_destinations__rotation_creates_version_2_and_version_1_stays_readable(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", {**WEBHOOK, "secret": MY_SECRET})
        rotated = await client.patch(
            f"/v1/destinations/{made['id']}", json={"secret": ROTATED}, headers=acme.headers
        )
    assert rotated.status_code == 200
    assert rotated.json()["secret_version"] == 2
    # The worker's path: a delivery queued before the rotation signs with its version.
    async with services.db.scoped(acme.scope) as tx:
        assert await current_secret(tx, acme.scope, destination_id=made["id"]) == (2, ROTATED)
        assert await secret_version(tx, acme.scope, destination_id=made["id"], version=1) == (
            MY_SECRET
        )
        assert await secret_version(tx, acme.scope, destination_id=made["id"], version=2) == (
            ROTATED
        )


async def test_destinations__secrets_never_leave_in_responses_or_logs(
    services: Services,
    conn: Conn,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    acme = await make_tenant(conn)
    recorder = Recorder()
    turnstile = "0x4AAAAAAA-turnstile-secret-value"
    async with api_client(services, recorder=recorder) as client:
        hook = await create(client, acme, "/v1/destinations", {**WEBHOOK, "secret": MY_SECRET})
        chat = await create(client, acme, "/v1/destinations", TELEGRAM)
        generated = (await create(client, acme, "/v1/destinations", WEBHOOK))["secret"]
        for dst in (hook, chat):
            await client.get(f"/v1/destinations/{dst['id']}", headers=acme.headers)
        await client.patch(
            f"/v1/destinations/{hook['id']}", json={"secret": ROTATED}, headers=acme.headers
        )
        # Refused secrets are not echoed in the problem either.
        short = "short-secret"
        refused = await client.patch(
            f"/v1/destinations/{hook['id']}", json={"secret": short}, headers=acme.headers
        )
        assert_problem(refused, 422, "invalid_secret")
        await client.get("/v1/destinations", headers=acme.headers)
        form = await create(client, acme, "/v1/forms", {"name": "C", "turnstile_secret": turnstile})
        await client.get(f"/v1/forms/{form['id']}", headers=acme.headers)
        await client.get("/v1/forms", headers=acme.headers)
        await client.patch(f"/v1/forms/{form['id']}", json={"name": "D"}, headers=acme.headers)
    captured = capsys.readouterr()
    logs = caplog.text + captured.out + captured.err
    responses = recorder.text()
    assert len(recorder.bodies) == 12
    for secret in (MY_SECRET, ROTATED, short, TELEGRAM_TOKEN, turnstile):
        assert secret not in responses, secret
        assert secret not in logs, secret
    # The generated webhook secret: in its creation response, and nowhere else.
    assert [generated in body for body in recorder.bodies].count(True) == 1
    assert generated not in logs


INVALID_DESTINATIONS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "webhook http",
        {**WEBHOOK, "config": {"url": "http://example.com/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook private",
        {**WEBHOOK, "config": {"url": "https://10.0.0.1/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook loopback",
        {**WEBHOOK, "config": {"url": "https://127.0.0.1/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook site-local v6",
        {**WEBHOOK, "config": {"url": "https://[fec0::1]/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook ipv4-compatible v6",
        {**WEBHOOK, "config": {"url": "https://[::8.8.8.8]/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook 6to4 relay",
        {**WEBHOOK, "config": {"url": "https://192.88.99.1/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook userinfo",
        {**WEBHOOK, "config": {"url": "https://u:p@example.com/h"}},
        "invalid_config",
        "config.url",
    ),
    (
        "webhook too long",
        {**WEBHOOK, "config": {"url": "https://example.com/" + "a" * 2048}},
        "invalid_config",
        "config.url",
    ),
    *[
        (
            f"webhook {what}",
            {**WEBHOOK, "config": {"url": url}},
            "invalid_config",
            "config.url",
        )
        for what, url in [
            ("CR/LF", "https://example.com/h\r\nX-Injected: 1"),
            ("space in host", "https://exa mple.com/h"),
            ("space in path", "https://example.com/a b"),
            ("tab", "https://example.com\t/h"),
            ("encoded newline in host", "https://ex%0aample.com/h"),
            ("bad port", "https://example.com:99999/h"),
        ]
    ],
    (
        "webhook unknown key",
        {**WEBHOOK, "config": {"url": "https://example.com/h", "x": 1}},
        "invalid_config",
        "config.x",
    ),
    ("webhook secret short", {**WEBHOOK, "secret": "x" * 15}, "invalid_secret", "secret"),
    ("webhook secret long", {**WEBHOOK, "secret": "x" * 257}, "invalid_secret", "secret"),
    ("email none", {**EMAIL, "config": {"to": []}}, "invalid_config", "config.to"),
    (
        "email eleven",
        {**EMAIL, "config": {"to": [f"a{i}@example.com" for i in range(11)]}},
        "invalid_config",
        "config.to",
    ),
    (
        "email bad address",
        {**EMAIL, "config": {"to": ["not-an-address"]}},
        "invalid_config",
        "config.to.0",
    ),
    ("email with secret", {**EMAIL, "secret": MY_SECRET}, "invalid_secret", "secret"),
    (
        "telegram bad chat",
        {**TELEGRAM, "config": {"chat_id": "chat me"}},
        "invalid_config",
        "config.chat_id",
    ),
    (
        "telegram no token",
        {k: v for k, v in TELEGRAM.items() if k != "secret"},
        "invalid_secret",
        "secret",
    ),
    ("telegram bad token", {**TELEGRAM, "secret": "not-a-token"}, "invalid_secret", "secret"),
    ("unknown type", {**WEBHOOK, "type": "sms"}, "invalid_input", "type"),
    ("no name", {k: v for k, v in WEBHOOK.items() if k != "name"}, "invalid_input", "name"),
    ("unknown field", {**WEBHOOK, "colour": "red"}, "invalid_input", "colour"),
]


@pytest.mark.parametrize(
    ("case", "body", "code", "field"),
    INVALID_DESTINATIONS,
    ids=[case for case, *_ in INVALID_DESTINATIONS],
)
async def test_destinations__invalid_is_422(
    services: Services, conn: Conn, case: str, body: dict[str, Any], code: str, field: str
) -> None:
    strict = Services(
        settings=services.settings.with_values(allow_private_targets=False),
        db=services.db,
    )
    acme = await make_tenant(conn)
    async with api_client(strict) as client:
        response = await client.post("/v1/destinations", json=body, headers=acme.headers)
        assert field in error_fields(assert_problem(response, 422, code)), case
        assert (await client.get("/v1/destinations", headers=acme.headers)).json()["data"] == []


async def test_destinations__private_targets_allowed_when_configured(
    services: Services, conn: Conn
) -> None:
    assert services.settings.allow_private_targets
    acme = await make_tenant(conn)
    body = {**WEBHOOK, "config": {"url": "http://127.0.0.1:9000/hook"}}
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", body)
    assert made["config"] == {"url": "http://127.0.0.1:9000/hook"}


async def test_destinations__ipv6_url_keeps_its_brackets_when_redacted(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    url = "https://[2606:4700::1111]:8443/hook?token=s3cret"
    dst, rte = await make_route_to(conn, acme, form, config={"url": url})
    submission, _ = await make_delivery(conn, acme, form, dst, rte, target={"url": url})
    slack = {
        "type": "slack",
        "name": "Chat",
        "config": {"url": "https://[2606:4700::1111]/services/T0/B0/s3cret"},
    }
    async with api_client(services) as client:
        chat = await create(client, acme, "/v1/destinations", slack)
        got = await client.get(f"/v1/submissions/{submission}", headers=acme.headers)
    assert chat["config"] == {"url": "https://[2606:4700::1111]/services/…"}
    [line] = got.json()["deliveries"]
    assert line["target"] == {"url": "https://[2606:4700::1111]:8443/hook"}


async def test_destinations__patch_validation(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        made = await create(client, acme, "/v1/destinations", WEBHOOK)
        url = f"/v1/destinations/{made['id']}"
        cases = [
            ({"secret": None}, "invalid_input", "secret"),
            ({"name": None}, "invalid_input", "name"),
            ({"type": "email"}, "invalid_input", "type"),
            ({"config": {"url": "ftp://example.com"}}, "invalid_config", "config.url"),
            ({"secret": "x"}, "invalid_secret", "secret"),
        ]
        for body, code, field in cases:
            response = await client.patch(url, json=body, headers=acme.headers)
            assert field in error_fields(assert_problem(response, 422, code)), body
        after = (await client.get(url, headers=acme.headers)).json()
    assert after["secret_version"] == 1
    assert after["config"] == WEBHOOK["config"]


async def test_destinations__plan_limit_is_402(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, plan="free")  # three destinations
    async with api_client(services) as client:
        made = [await create(client, acme, "/v1/destinations", WEBHOOK) for _ in range(3)]
        refused = await client.post("/v1/destinations", json=EMAIL, headers=acme.headers)
        assert_problem(refused, 402, "plan_limit")
        await client.delete(f"/v1/destinations/{made[0]['id']}", headers=acme.headers)
        await create(client, acme, "/v1/destinations", EMAIL)


async def test_destinations__delete_removes_its_routes(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        dst = await create(client, acme, "/v1/destinations", WEBHOOK)
        routes = f"/v1/forms/{form['id']}/routes"
        await create(client, acme, routes, {"destination_id": dst["id"]})
        await client.delete(f"/v1/destinations/{dst['id']}", headers=acme.headers)
        listed = await client.get(routes, headers=acme.headers)
    assert listed.json()["data"] == []
