from __future__ import annotations

import json
from typing import Any

import pytest

from core.destinations.chat import redact_url
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import Tenant, make_delivery, make_route_to, setup_form
from tests.support.peers import receiver, status
from tests.support.records import delivery
from tests.support.settings import with_settings

FAST = WorkerOptions(timeout=1, margin=0.1)


async def _dead_delivery(services: Services, conn: Conn, url: str) -> tuple[Tenant, str, str, str]:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    sub, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    return tenant, dst, sub, dlv


async def test_deliveries_api__list_get_and_retry_by_hand(services: Services, conn: Conn) -> None:
    with receiver(status(404)) as peer:
        tenant, dst, sub, dlv = await _dead_delivery(services, conn, peer.url + "/h")
        async with api_client(services, tenant.key) as api:
            listed = (await api.get("/v1/deliveries", params={"status": "dead"})).json()
            assert [row["id"] for row in listed["data"]] == [dlv]
            row = listed["data"][0]
            assert (row["submission"], row["destination"], row["kind"]) == (sub, dst, "submission")
            assert (row["attempts"], row["last_detail"]) == (1, "http_404")
            assert listed["next_cursor"] is None
            assert (await api.get("/v1/deliveries", params={"destination": new_id("dst")})).json()[
                "data"
            ] == []
            one = (await api.get(f"/v1/deliveries/{dlv}")).json()
            assert [a["http_status"] for a in one["history"]] == [404]
            assert "secret" not in json.dumps(one) and "whsec_" not in json.dumps(one)
            peer.respond = status(200)
            retried = await api.post(f"/v1/deliveries/{dlv}/retry")
            assert retried.status_code == 200, retried.text
            assert (retried.json()["status"], retried.json()["attempts"]) == ("pending", 0)
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            again = (await api.get(f"/v1/deliveries/{dlv}")).json()
            assert (again["status"], again["attempts"]) == ("sent", 1)
            # Same delivery id and receipt on the retry.
            first, second = peer.requests
            assert first.headers["X-Postbag-Delivery"] == second.headers["X-Postbag-Delivery"]
            assert json.loads(first.body)["receipt"] == json.loads(second.body)["receipt"] == sub
            # Sent is not retryable.
            refused = await api.post(f"/v1/deliveries/{dlv}/retry")
            assert (refused.status_code, refused.json()["code"]) == (409, "delivery_not_retryable")


async def test_deliveries_api__pagination(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/"})
    ids = [
        (await make_delivery(conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/"}))[
            1
        ]
        for _ in range(5)
    ]
    async with api_client(services, tenant.key) as api:
        page = (await api.get("/v1/deliveries", params={"limit": 3})).json()
        rest = (
            await api.get("/v1/deliveries", params={"limit": 3, "cursor": page["next_cursor"]})
        ).json()
    assert [r["id"] for r in page["data"] + rest["data"]] == sorted(ids, reverse=True)
    assert rest["next_cursor"] is None


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (
            'UPDATE submissions SET erased_at = now(), "values" = NULL,'
            " erase_reason = 'requested'",
            "values_erased",
        ),
        (
            "UPDATE submissions SET received_at = now() - interval '2 days',"
            " erase_at = now() - interval '1 day'",
            "values_expired",
        ),
        (
            "UPDATE destinations SET enabled = false, paused_reason = 'owner', paused_at = now()",
            "destination_paused",
        ),
        ("UPDATE destinations SET deleted_at = now()", "destination_removed"),
        (
            "UPDATE deliveries SET status = 'sending', claim_token = gen_random_uuid(),"
            " claimed_until = now() + interval '5 minutes'",
            "delivery_in_progress",
        ),
    ],
)
async def test_deliveries_api__retry_refused_changes_nothing(
    services: Services, conn: Conn, change: str, code: str
) -> None:
    with receiver(status(410)) as peer:
        tenant, _dst, _sub, dlv = await _dead_delivery(services, conn, peer.url)
    await conn.execute(change)
    before = await delivery(conn, dlv)
    async with api_client(services, tenant.key) as api:
        answer = await api.post(f"/v1/deliveries/{dlv}/retry")
    assert answer.status_code == 409
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == code
    assert await delivery(conn, dlv) == before


async def test_deliveries_api__expired_lease_can_be_retried(services: Services, conn: Conn) -> None:
    with receiver(status(410)) as peer:
        tenant, _dst, _sub, dlv = await _dead_delivery(services, conn, peer.url)
    await conn.execute(
        "UPDATE deliveries SET status = 'sending', claim_token = gen_random_uuid(),"
        " claimed_until = now() - interval '1 minute'"
    )
    async with api_client(services, tenant.key) as api:
        answer = await api.post(f"/v1/deliveries/{dlv}/retry")
    assert answer.status_code == 200
    row = await delivery(conn, dlv)
    assert (row["status"], row["claim_token"], row["attempts"]) == ("pending", None, 0)


async def test_deliveries_api__another_organizations_objects_are_404(
    services: Services, conn: Conn
) -> None:
    with receiver(status(410)) as peer:
        _tenant, dst, _sub, dlv = await _dead_delivery(services, conn, peer.url)
    other, _ = await setup_form(conn, name="Other", plan="self_hosted", routes=0)
    async with api_client(services, other.key) as api:
        assert (await api.get("/v1/deliveries")).json()["data"] == []
        for method, path in [
            ("GET", f"/v1/deliveries/{dlv}"),
            ("POST", f"/v1/deliveries/{dlv}/retry"),
            ("POST", f"/v1/destinations/{dst}/test"),
        ]:
            answer = await api.request(method, path)
            assert (answer.status_code, answer.json()["code"]) == (404, "not_found"), path
        alerts = (await api.get("/v1/alerts")).json()
        assert alerts == {"data": [], "next_cursor": None}
    cur = await conn.execute("SELECT id FROM alerts")
    [alert] = await cur.fetchall()
    async with api_client(services, other.key) as api:
        answer = await api.post(f"/v1/alerts/{alert['id']}/ack")
    assert answer.status_code == 404


async def test_alerts_api__list_and_acknowledge(services: Services, conn: Conn) -> None:
    with receiver(status(410)) as peer:
        tenant, dst, _sub, dlv = await _dead_delivery(services, conn, peer.url)
        async with api_client(services, tenant.key) as api:
            [alert] = (await api.get("/v1/alerts")).json()["data"]
            assert (alert["kind"], alert["subject"], alert["status"], alert["occurrences"]) == (
                "delivery.dead",
                dst,
                "open",
                1,
            )
            assert alert["last_delivery"] == dlv
            acked = (await api.post(f"/v1/alerts/{alert['id']}/ack")).json()
            assert acked["status"] == "acknowledged" and acked["acknowledged_at"]
            assert (await api.get("/v1/alerts", params={"status": "open"})).json()["data"] == []
            # The next dead delivery of that destination opens a new alert.
            await api.post(f"/v1/deliveries/{dlv}/retry")
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            data: list[dict[str, Any]] = (await api.get("/v1/alerts")).json()["data"]
    assert sorted(a["status"] for a in data) == ["acknowledged", "open"]


async def test_destination_test__sends_a_sample_and_stores_nothing(
    services: Services, conn: Conn
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, _ = await make_route_to(conn, tenant, form, config={"url": peer.url + "/t"})
        async with api_client(services, tenant.key) as api:
            answer = await api.post(f"/v1/destinations/{dst}/test")
            peer.respond = status(500)
            failed = await api.post(f"/v1/destinations/{dst}/test")
    assert answer.status_code == 200, answer.text
    assert answer.json()["ok"] is True and answer.json()["http_status"] == 200
    assert failed.json()["ok"] is False and failed.json()["detail"] == "http_500"
    body = json.loads(peer.requests[0].body)
    assert body["test"] is True and body["event"] == "form.submitted"
    cur = await conn.execute("SELECT count(*) AS n FROM deliveries")
    assert await cur.fetchone() == {"n": 0}


async def test_destination_test__refused_private_target(services: Services, conn: Conn) -> None:
    strict = with_settings(services, allow_private_targets=False)
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, _ = await make_route_to(conn, tenant, form, config={"url": "https://127.0.0.1/t"})
    async with api_client(strict, tenant.key) as api:
        answer = await api.post(f"/v1/destinations/{dst}/test")
    assert answer.status_code == 422


@pytest.mark.parametrize(
    "url",
    ["https://example.com/h\r\nX-Injected: 1", "https://exa mple.com/h", "https://e.com:0x1/"],
)
async def test_destination_test__a_malformed_stored_url_is_refused_not_a_500(
    services: Services, conn: Conn, url: str
) -> None:
    # Saved before URLs were parsed strictly (an upgraded database): written with SQL.
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, _ = await make_route_to(conn, tenant, form, config={"url": url})
    async with api_client(services, tenant.key) as api:
        answer = await api.post(f"/v1/destinations/{dst}/test")
    assert answer.status_code == 422, answer.text
    assert "Injected" not in answer.text


async def test_destination_test__answers_status_and_class_not_the_body(
    services: Services, conn: Conn
) -> None:
    secret_page = b"internal admin page: db_password=hunter2\nsecond line"
    with receiver(status(403, body=secret_page)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        chat_url = peer.url + "/chat"
        chat_dst, _ = await make_route_to(
            conn,
            tenant,
            form,
            type="discord",
            config={"url": redact_url(chat_url)},
            secrets=(chat_url,),
        )
        webhook_dst, _ = await make_route_to(conn, tenant, form, config={"url": peer.url + "/t"})
        async with api_client(services, tenant.key) as api:
            answers = [
                await api.post(f"/v1/destinations/{dst}/test") for dst in (webhook_dst, chat_dst)
            ]
    assert len(peer.requests) == 2
    for answer in answers:
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["ok"] is False and body["http_status"] == 403
        assert body["detail"] == "http_403"
        assert "response_excerpt" not in body
        assert "hunter2" not in answer.text and "admin page" not in answer.text
