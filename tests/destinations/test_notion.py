from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import Recorder, api_client, assert_problem
from tests.support.builders import make_tenant
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.settings import with_settings
from tests.support.vendors import (
    NOTION_DATABASE,
    NOTION_TOKEN,
    Notion,
    deliver,
    page_lines,
    post,
    read_destination,
    send_test,
    wire,
)

DESTINATION = {
    "type": "notion",
    # Dashed, as Notion's links show it: stored as the 32 digits.
    "config": {"database_id": "01234567-89ab-cdef-0123-456789abcdef"},
    "secret": NOTION_TOKEN,
}


async def test_notion__one_page_with_properties_by_name_and_type_the_rest_as_content(
    services: Services, conn: Conn
) -> None:
    double = Notion()
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, DESTINATION)
        receipt = await post(
            notion,
            wired.form,
            {
                "name": "Ada",
                "email": "ada@example.com",
                "seats": "3",
                "subscribe": "on",
                "plan": "Pro",
                "starts": "2026-12-24",
                "notes": "Hello",
                "owner": "Grace",
                "colour": "teal",
            },
        )
        await deliver(notion)
    assert double.problems == []
    [page] = double.pages
    assert page["parent"] == {"database_id": NOTION_DATABASE}
    assert page["properties"] == {
        "Name": {"title": [{"type": "text", "text": {"content": "Ada"}}]},
        "Email": {"email": "ada@example.com"},
        "Seats": {"number": 3},
        "Subscribe": {"checkbox": True},
        "Plan": {"select": {"name": "Pro"}},
        "Starts": {"date": {"start": "2026-12-24"}},
        "Notes": {"rich_text": [{"type": "text", "text": {"content": "Hello"}}]},
    }
    lines = page_lines(page)
    # `owner` is a people property (not written), `colour` has none: both are content.
    assert lines[2:] == ["owner: Grace", "colour: teal"]
    assert lines[0].startswith("Submitted at: ") and lines[1] == f"Receipt: {receipt}"
    for request in peer.requests:
        assert request.headers["Notion-Version"] == "2022-06-28"
        assert request.headers["Authorization"] == f"Bearer {NOTION_TOKEN}"
    [row] = await rows(conn, "SELECT status FROM deliveries")
    assert row["status"] == "sent"


async def test_notion__a_value_a_property_cannot_take_is_content_and_the_title_the_receipt(
    services: Services, conn: Conn
) -> None:
    double = Notion()
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, DESTINATION)
        receipt = await post(
            notion, wired.form, {"seats": "three", "plan": "Pro, Team", "starts": "soon"}
        )
        await deliver(notion)
    [page] = double.pages
    assert page["properties"] == {
        "Name": {"title": [{"type": "text", "text": {"content": receipt}}]}
    }
    assert page_lines(page)[2:] == ["Seats: three", "plan: Pro, Team", "starts: soon"]


async def test_notion__a_revoked_token_ends_deliveries_and_the_health_says_failing(
    services: Services, conn: Conn
) -> None:
    double = Notion(revoked=True)
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, {**DESTINATION, "rate_limit": {"per_second": 100}})
        for n in range(5):
            await post(notion, wired.form, {"name": f"N{n}"})
        await deliver(notion)
        found = await read_destination(notion, wired)
    ended = await rows(conn, "SELECT status, reason FROM deliveries")
    assert ended == [{"status": "dead", "reason": "credentials_rejected"}] * 5
    assert found["health"] == "failing"
    assert double.pages == []


async def test_notion__a_429_waits_for_its_retry_after(services: Services, conn: Conn) -> None:
    limited = (429, {"Retry-After": "900"}, b'{"object": "error", "code": "rate_limited"}')
    double = Notion(fail=[limited])
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, DESTINATION)
        await post(notion, wired.form, {"name": "Ada"})
        await deliver(notion)
    [row] = await rows(
        conn, "SELECT status, last_detail, next_attempt_at, updated_at FROM deliveries"
    )
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    assert (row["next_attempt_at"] - row["updated_at"]).total_seconds() >= 900


async def test_notion__the_test_send_creates_a_page_and_the_token_is_write_only(
    services: Services, conn: Conn
) -> None:
    double = Notion()
    recorder = Recorder()
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, DESTINATION)
        answer = await send_test(notion, wired)
        async with api_client(notion, recorder=recorder) as client:
            shown = await client.get(
                f"/v1/destinations/{wired.destination}", headers=wired.tenant.headers
            )
    assert answer["ok"] is True
    [page] = double.pages
    assert page["properties"]["Email"] == {"email": "visitor@example.com"}
    assert shown.json()["config"] == {"database_id": NOTION_DATABASE}
    assert NOTION_TOKEN not in recorder.text()


async def test_notion__a_bad_database_id_or_token_is_refused(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        bad_id = {**DESTINATION, "name": "N", "config": {"database_id": "../pages/xyz"}}
        refused = await client.post("/v1/destinations", json=bad_id, headers=acme.headers)
        assert_problem(refused, 422, "invalid_config")
        bad_token = {**DESTINATION, "name": "N", "secret": "not a token"}
        refused = await client.post("/v1/destinations", json=bad_token, headers=acme.headers)
        assert_problem(refused, 422, "invalid_secret")
    assert await rows(conn, "SELECT 1 FROM destinations") == []


async def test_notion__a_digest_is_one_page_titled_by_its_subject(
    services: Services, conn: Conn
) -> None:
    double = Notion()
    with receiver(double.respond) as peer:
        notion = with_settings(services, notion_url=peer.url)
        wired = await wire(notion, conn, DESTINATION, route={"mode": "digest", "period": "daily"})
        receipts = [await post(notion, wired.form, {"name": n}) for n in ("Ada", "Grace")]
        closed = utcnow() + timedelta(days=1, hours=1)
        await run_digests(notion, now=closed, budget=10)
        await deliver(notion, now=closed)
    [page] = double.pages
    [title] = page["properties"]["Name"]["title"]
    assert title["text"]["content"].startswith("2 new submissions to Signup (")
    content = "\n".join(page_lines(page))
    assert all(receipt in content for receipt in receipts)
