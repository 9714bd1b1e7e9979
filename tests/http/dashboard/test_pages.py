"""The dashboard over HTTP with a real database: every page, sessions, CSRF and scoping."""

from __future__ import annotations

import re
from typing import Any

from core.destinations.http import close_shared_client
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import (
    WEBHOOK_SECRET,
    Tenant,
    make_destination,
    make_form,
    make_member,
    make_route,
    make_tenant,
)
from tests.support.dashboard import csrf_of, dashboard_client, sign_in
from tests.support.peers import receiver, status
from tests.support.records import rows
from tests.support.submit import submit_client

SECRET_VALUE = "ada-lovelace-private-message-7731"


async def _submission(services: Services, form_id: str, **values: str) -> str:
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form_id}", json={"email": "ada@example.com", "message": SECRET_VALUE, **values}
        )
    assert response.status_code in (200, 201, 202), response.text
    body: dict[str, Any] = response.json()
    return str(body.get("receipt") or body.get("id"))


async def _world(conn: Conn) -> tuple[Tenant, str, str]:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, labels={"message": "Your message", "email": "Email"})
    destination = await make_destination(
        conn, tenant, config={"url": "https://hooks.example.com/in?token=hidden-token"}
    )
    await make_route(conn, tenant, form_id, destination)
    return tenant, form_id, destination


async def test_every_page_renders_and_values_stay_out_of_the_inbox(
    services: Services, conn: Conn
) -> None:
    tenant, form_id, destination = await _world(conn)
    receipt = await _submission(services, form_id)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        inbox = await client.get("/app")
        assert receipt in inbox.text
        assert SECRET_VALUE not in inbox.text and "ada@example.com" not in inbox.text
        assert "1 waiting" in inbox.text
        filtered = await client.get("/app", params={"form": form_id, "status": "spam"})
        assert receipt not in filtered.text
        assert receipt not in (await client.get("/app", params={"status": "test"})).text
        await conn.execute("UPDATE submissions SET flags = '{test}'")
        assert receipt in (await client.get("/app", params={"status": "test"})).text
        page = await client.get(f"/app/submissions/{receipt}")
        assert page.status_code == 200
        text = page.text
        assert SECRET_VALUE in text and "Your message" in text
        assert "<dt>Email" in text  # fields with labels show them
        assert "Waiting to send" in text and "https://hooks.example.com/in" in text
        assert "hidden-token" not in text
        for path in (
            "/app/forms",
            "/app/forms/new",
            f"/app/forms/{form_id}",
            "/app/destinations",
            f"/app/destinations/{destination}/delete",
            "/app/alerts",
            "/app/events",
            f"/app/submissions/{receipt}/erase",
        ):
            response = await client.get(path)
            assert response.status_code == 200, (path, response.text)
            assert WEBHOOK_SECRET not in response.text and "hidden-token" not in response.text
        form_page = await client.get(f"/app/forms/{form_id}")
        assert "Idempotency-Key" in form_page.text and f"/s/{form_id}" in form_page.text
        events = await client.get("/app/events")
        assert "submission.received" in events.text or "submission" in events.text


async def test_sign_in_cookie_and_bad_password(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    await make_member(conn, tenant, email="ada@example.test", password="correct horse battery")
    async with dashboard_client(services) as client:
        assert (await client.get("/app")).headers["location"] == "/app/sign-in"
        page = await client.get("/app/sign-in")
        form = {"csrf": csrf_of(page.text), "email": "ADA@example.test"}
        bad = await client.post("/app/sign-in", data={**form, "password": "wrong horse battery"})
        assert bad.status_code == 401 and "Wrong email or password" in bad.text
        unknown = await client.post(
            "/app/sign-in",
            data={**form, "csrf": csrf_of(bad.text), "email": "bob@example.test", "password": "x"},
        )
        assert unknown.status_code == 401 and "Wrong email or password" in unknown.text
        good = await client.post(
            "/app/sign-in",
            data={**form, "csrf": csrf_of(unknown.text), "password": "correct horse battery"},
        )
        assert good.status_code == 303, good.text
        cookie = next(h for h in good.headers.get_list("set-cookie") if h.startswith("pb_session="))
        lowered = cookie.lower()
        assert "httponly" in lowered and "samesite=lax" in lowered and "secure" not in lowered
        assert "correct horse battery" not in cookie


async def test_csrf_missing_or_wrong_changes_nothing(services: Services, conn: Conn) -> None:
    tenant, form_id, _destination = await _world(conn)
    receipt = await _submission(services, form_id)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        for data in ({"confirm": "yes"}, {"confirm": "yes", "csrf": "wrong"}):
            response = await client.post(f"/app/submissions/{receipt}/erase", data=data)
            assert response.status_code == 403 and "Not allowed" in response.text
        found = await rows(conn, "SELECT erased_at FROM submissions WHERE id = %(id)s", id=receipt)
        assert found[0]["erased_at"] is None
        response = await client.post("/app/forms", data={"name": "Sneaky"})
        assert response.status_code == 403
        assert not await rows(conn, "SELECT id FROM forms WHERE name = 'Sneaky'")
        # Confirmed, with the token: erased, and the receipt says so.
        response = await client.post(
            f"/app/submissions/{receipt}/erase", data={"csrf": token, "confirm": "yes"}
        )
        assert response.status_code == 303
        page = await client.get(f"/app/submissions/{receipt}")
        assert "Values erased" in page.text and SECRET_VALUE not in page.text
        assert "hooks.example.com" not in page.text  # the target is withheld after erasure


async def test_send_again_refusal_is_shown_in_place(services: Services, conn: Conn) -> None:
    tenant, form_id, _destination = await _world(conn)
    receipt = await _submission(services, form_id)
    await conn.execute(
        "UPDATE deliveries SET status = 'dead', reason = 'attempts_exhausted', attempts = 8, "
        "last_detail = 'http_503' WHERE submission_id = %(id)s",
        {"id": receipt},
    )
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        page = await client.get(f"/app/submissions/{receipt}")
        assert "Not delivered" in page.text and "HTTP 503" in page.text
        assert "Send again" in page.text
        (delivery,) = await rows(
            conn, "SELECT id FROM deliveries WHERE submission_id = %(id)s", id=receipt
        )
        url = f"/app/submissions/{receipt}/deliveries/{delivery['id']}/retry"
        await client.post(
            f"/app/submissions/{receipt}/erase", data={"csrf": token, "confirm": "yes"}
        )
        refused = await client.post(url, data={"csrf": token})
        assert refused.status_code == 409 and "Not sent again" in refused.text
        assert "erased" in refused.text
        (after,) = await rows(
            conn, "SELECT status, attempts FROM deliveries WHERE id = %(id)s", id=delivery["id"]
        )
        assert after["attempts"] == 8 and after["status"] in ("dead", "skipped")


async def test_send_again_requeues(services: Services, conn: Conn) -> None:
    tenant, form_id, _destination = await _world(conn)
    receipt = await _submission(services, form_id)
    await conn.execute(
        "UPDATE deliveries SET status = 'dead', reason = 'attempts_exhausted', attempts = 8 "
        "WHERE submission_id = %(id)s",
        {"id": receipt},
    )
    (delivery,) = await rows(
        conn, "SELECT id FROM deliveries WHERE submission_id = %(id)s", id=receipt
    )
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        url = f"/app/submissions/{receipt}/deliveries/{delivery['id']}/retry"
        assert (await client.post(url, data={"csrf": token})).status_code == 303
        page = await client.get(f"/app/submissions/{receipt}")
        assert "Waiting to send" in page.text


async def test_other_organizations_objects_are_404_pages(services: Services, conn: Conn) -> None:
    _tenant, form_id, destination = await _world(conn)
    receipt = await _submission(services, form_id)
    other = await make_tenant(conn, name="Other")
    async with dashboard_client(services) as client:
        token = await sign_in(client, other.key)
        for path in (
            f"/app/submissions/{receipt}",
            f"/app/forms/{form_id}",
            f"/app/destinations/{destination}/delete",
            "/app/submissions/sub_missing",
        ):
            response = await client.get(path)
            assert response.status_code == 404, path
            assert "text/html" in response.headers["content-type"]
            assert "Not found" in response.text and SECRET_VALUE not in response.text
        response = await client.post(
            f"/app/submissions/{receipt}/erase", data={"csrf": token, "confirm": "yes"}
        )
        assert response.status_code == 404
        inbox = await client.get("/app")
        assert receipt not in inbox.text
    found = await rows(conn, "SELECT erased_at FROM submissions WHERE id = %(id)s", id=receipt)
    assert found[0]["erased_at"] is None


async def test_idle_sessions_end(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        await conn.execute(
            "UPDATE dashboard_sessions SET last_seen_at = now() - interval '13 hours'"
        )
        response = await client.get("/app")
        assert response.status_code == 303 and response.headers["location"] == "/app/sign-in"


async def test_sign_out_deletes_the_session(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        response = await client.post("/app/sign-out", data={"csrf": token})
        assert response.status_code == 303
        assert not await rows(conn, "SELECT 1 FROM dashboard_sessions")


async def test_forms_destinations_routes_and_alerts_through_pages(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        created = await client.post(
            "/app/forms",
            data={
                "csrf": token,
                "name": "Contact",
                "allowed_origins": "https://example.com\nhttps://www.example.com",
                "turnstile_secret": "0x4AAAAAAturnstile-secret-value",
                "labels": '{"message": "Message"}',
            },
        )
        assert created.status_code == 303, created.text
        form_url = created.headers["location"]
        form_id = form_url.rsplit("/", 1)[1]
        page = await client.get(form_url)
        assert "A secret is stored" in page.text
        assert "turnstile-secret-value" not in page.text
        assert "https://www.example.com" in page.text
        bad = await client.post(
            form_url, data={"csrf": token, "name": "", "shown": '{"name": "Contact"}'}
        )
        assert bad.status_code == 422 and "Please check the form" in bad.text
        closed = await client.post(
            f"{form_url}/accepting", data={"csrf": token, "accepting": "off"}
        )
        assert closed.status_code == 303
        (row,) = await rows(conn, "SELECT accepting FROM forms WHERE id = %(id)s", id=form_id)
        assert row["accepting"] is False

        added = await client.post(
            "/app/destinations",
            data={
                "csrf": token,
                "type": "webhook",
                "name": "CRM",
                "url": "https://hooks.example.com/crm?key=very-private",
                "secret": "dashboard-secret-0123456789",
            },
        )
        assert added.status_code == 303, added.text
        listing = await client.get("/app/destinations")
        assert "CRM" in listing.text and "A secret is stored" in listing.text
        assert "very-private" not in listing.text and "dashboard_secret" not in listing.text
        (dest,) = await rows(conn, "SELECT id FROM destinations WHERE name = 'CRM'")
        route = await client.post(
            f"{form_url}/routes",
            data={"csrf": token, "destination_id": dest["id"], "mode": "immediate"},
        )
        assert route.status_code == 303, route.text
        page = await client.get(form_url)
        assert "CRM" in page.text and "immediate" in page.text
        paused = await client.post(
            f"/app/destinations/{dest['id']}", data={"csrf": token, "enabled": "off"}
        )
        assert paused.status_code == 303
        assert "Paused" in (await client.get("/app/destinations")).text
        deleted = await client.post(f"/app/destinations/{dest['id']}/delete", data={"csrf": token})
        assert deleted.status_code == 303
        assert "CRM" not in (await client.get("/app/destinations")).text


async def test_alert_badge_and_acknowledge(services: Services, conn: Conn) -> None:
    tenant, _form_id, destination = await _world(conn)
    await conn.execute(
        "INSERT INTO alerts (id, organization_id, kind, subject_id, status, occurrences, "
        "first_at, last_at) VALUES ('alr_test1', %(org)s, 'delivery.dead', %(dst)s, 'open', 3, "
        "now(), now())",
        {"org": tenant.org, "dst": destination},
    )
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        inbox = await client.get("/app")
        assert 'class="badge"' in inbox.text
        page = await client.get("/app/alerts")
        assert destination in page.text and ">3<" in page.text
        ack = await client.post("/app/alerts/alr_test1/acknowledge", data={"csrf": token})
        assert ack.status_code == 303
        assert 'class="badge"' not in (await client.get("/app")).text


async def test_inbox_loads_more_with_a_cursor(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant)
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, received_at, "values", '
        "payload_hash) SELECT 'sub_' || lpad(i::text, 6, '0'), %(org)s, %(form)s, 'accepted', "
        "now() - make_interval(secs => i), '{}'::jsonb, '\\x00'::bytea "
        "FROM generate_series(1, 55) i",
        {"org": tenant.org, "form": form_id},
    )
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        first = await client.get("/app")
        assert first.text.count('class="receipt"') == 50 and "Load more" in first.text
        more = first.text.split('href="/app?', 1)[1].split('"', 1)[0].replace("&amp;", "&")
        second = await client.get("/app?" + more)
        assert second.text.count('class="receipt"') == 5 and "Load more" not in second.text
        assert "sub_000055" in second.text


async def test_attachment_download_goes_through_the_same_checks(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, file_fields={"notes": {"types": [".txt"]}})
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form_id}",
            data={"name": "Ada"},
            files=[("notes", ("notes.txt", b"hello from ada\n", "text/plain"))],
            headers={"Accept": "application/json"},
        )
    assert response.status_code == 201, response.text
    receipt = response.json()["receipt"]
    other = await make_tenant(conn, name="Other")
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        page = await client.get(f"/app/submissions/{receipt}")
        assert "notes.txt" in page.text and "15 bytes" in page.text
        link = page.text.split(f'href="/app/submissions/{receipt}/attachments/', 1)[1]
        url = f"/app/submissions/{receipt}/attachments/" + link.split('"', 1)[0]
        download = await client.get(url)
        assert download.status_code == 200 and download.content == b"hello from ada\n"
        assert "attachment" in download.headers["content-disposition"]
        await client.post(
            f"/app/submissions/{receipt}/erase", data={"csrf": token, "confirm": "yes"}
        )
        gone = await client.get(url)
        assert gone.status_code == 409 and "text/html" in gone.headers["content-type"]
    async with dashboard_client(services) as client:
        await sign_in(client, other.key)
        assert (await client.get(url)).status_code == 404


async def test_send_test_shows_the_result(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    with receiver(status(503)) as peer:
        destination = await make_destination(conn, tenant, config={"url": f"{peer.url}/in"})
        async with dashboard_client(services) as client:
            token = await sign_in(client, tenant.key)
            response = await client.post(
                f"/app/destinations/{destination}/test", data={"csrf": token}
            )
        assert response.status_code == 200
        assert "not delivered" in response.text and "503" in response.text
        await close_shared_client()  # its keep-alive socket belongs to this test's loop
        assert len(peer.requests) == 1
        assert WEBHOOK_SECRET not in response.text


async def test_destinations__a_generated_secret_is_shown_once_on_creation_and_on_rotation(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    shown = re.compile(r'<code id="shown-secret">(whsec_[^<]+)</code>')
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        created = await client.post(
            "/app/destinations",
            data={
                "csrf": token,
                "type": "webhook",
                "name": "Receiver",
                "url": "https://hooks.example.com/in",
                "secret": "",
            },
        )
        later = await client.get("/app/destinations")
        (dest,) = await rows(conn, "SELECT id FROM destinations")
        rotated = await client.post(
            f"/app/destinations/{dest['id']}",
            data={"csrf": token, "rotate": "generate", "secret": ""},
        )
    secrets = await rows(conn, "SELECT version, secret FROM destination_secrets ORDER BY version")
    first, second = shown.search(created.text), shown.search(rotated.text)
    assert created.status_code == 200 and first, created.text
    assert created.headers["cache-control"] == "no-store"
    assert rotated.status_code == 200 and second, rotated.text
    assert [(s["version"], s["secret"]) for s in secrets] == [(1, first[1]), (2, second[1])]
    assert first[1] not in later.text and "shown-secret" not in later.text


async def test_receipt__delivered_then_marked_spam_says_so(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant)
    with receiver() as peer:
        destination = await make_destination(conn, tenant, config={"url": peer.url})
        await make_route(conn, tenant, form_id, destination)
        receipt = await _submission(services, form_id)
        fast = WorkerOptions(timeout=2, margin=0.1)
        stats = await Deliverer(services, options=fast).run_pass(now=utcnow(), budget=5)
        assert stats["sent"] == 1, stats
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        marked = await client.post(f"/app/submissions/{receipt}/spam", data={"csrf": token})
        assert marked.status_code == 303, marked.text
        page = (await client.get(f"/app/submissions/{receipt}")).text
    assert "not delivered because it is spam" not in page
    assert "This submission was delivered, then marked as spam." in page
    assert ">Delivered</span>" in page
