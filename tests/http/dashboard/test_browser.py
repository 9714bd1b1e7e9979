"""The dashboard in a real browser: Debian's Chromium driven by Playwright, a real uvicorn.

Invited through the API and a real SMTP peer, accept the emailed link (set a password,
signed in), create a form, two webhook destinations and their routes through the pages, set
the form to observe its schema and adopt a suggested schema, post the form from a page on
another loopback origin and see the drift it showed, watch the delivery lines reach
*Delivered* / *Not delivered*, erase the values, then Send again and read the refusal.
Screenshots land in the test's tmp directory, and in docs/ with POSTBAG_SCREENSHOTS=docs.

A second run, as on a default `./local/run` (`POSTBAG_EMAIL_PROVIDER=dev`): the owner invites
a teammate on the Members page and makes an API key on the Keys page (shown once, and it
works); the teammate, with no account, opens the development mailbox, follows the link of
the caught invitation, joins, signs out and signs in with the password.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from aiosmtpd.smtp import Envelope

from core.destinations.http import close_shared_client
from core.http.server import combined_app
from core.platform.clock import utcnow
from core.platform.db import connect
from core.platform.services import Services
from core.platform.settings import load_settings
from core.ticks.registry import TICKS, run_pass
from tests.support.builders import make_member, make_tenant, sign_in_link
from tests.support.peers import closed_port, receiver, status
from tests.support.settings import SENDER, TEST_SECRET_KEY

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
MESSAGE = "Please call me back about the blue bicycle"
# What inference might suggest; the message above is longer than it allows.
SUGGESTION = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "message": {"type": "string", "maxLength": 20}},
}
DOCS = Path(__file__).resolve().parents[3] / "docs"

sync_api = pytest.importorskip("playwright.sync_api")


@dataclass
class Server:
    url: str
    loop: asyncio.AbstractEventLoop
    services: Services

    def run(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the server's event loop (where its pool and clients live)."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)


@contextmanager
def postbag(db_url: str, tmp_path: Path, **mail: str) -> Iterator[Server]:
    """A real uvicorn serving both apps, sending email as `mail` says."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    settings = load_settings(
        database_url=db_url,
        secret_key=TEST_SECRET_KEY,
        storage_url=f"file://{tmp_path / 'files'}",
        allow_private_targets=True,
        public_url=url,
        password_hash_cost="test_only",
        **mail,
    )
    services = Services.from_settings(settings, pool_max=4)
    config = uvicorn.Config(
        combined_app(services), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Server(url=url, loop=loop, services=services)
    finally:
        server.should_exit = True
        thread.join(10)
        loop.run_until_complete(close_shared_client())  # the delivery pass's client
        loop.run_until_complete(services.db.close())
        loop.close()


@dataclass
class Website:
    url: str
    action: str = ""


def _page(action: str) -> bytes:
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Bike shop</title></head><body><h1>Contact the bike shop</h1>
<form action="{action}" method="POST">
  <label>Email <input type="email" name="email" required></label>
  <label>Message <textarea name="message" required></textarea></label>
  <input type="text" name="_gotcha" style="display:none" tabindex="-1" autocomplete="off">
  <button type="submit">Send</button>
</form></body></html>""".encode()


@contextmanager
def other_origin() -> Iterator[Website]:
    """A website on another loopback port whose plain HTML form posts to `site.action`."""
    site = Website(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            page = _page(site.action)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def _chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        message = (
            f"BROWSER TEST SKIPPED: {CHROMIUM} is missing (./local/test installs it as root "
            "with apt-get when that upgrades nothing installed); the dashboard was NOT "
            "tested in a browser"
        )
        print(f"\n!!! {message} !!!")
        pytest.skip(message)
    return CHROMIUM


def _new_key(db_url: str) -> str:
    async def run() -> str:
        conn = await connect(db_url)
        try:
            tenant = await make_tenant(conn, name="Bike shop")
        finally:
            await conn.close()
        return tenant.key

    return asyncio.run(run())


def _smtp(url: str) -> dict[str, str]:
    """The settings of email sent through the SMTP peer at `url`."""
    return {"email_provider": "smtp", "smtp_url": url, "mail_from": SENDER}


def _owner_link(db_url: str) -> str:
    """An organization with an owner; the path of the owner's one-time sign-in link (as
    `postbag dev` prints it)."""

    async def run() -> str:
        conn = await connect(db_url)
        try:
            tenant = await make_tenant(conn, name="Bike shop")
            owner = await make_member(conn, tenant, email="olga@example.com")
            return await sign_in_link(conn, owner)
        finally:
            await conn.close()

    return asyncio.run(run())


async def _suggest(db_url: str, form_id: str, schema: dict[str, Any]) -> None:
    """Append a `suggested` version, as the retention tick's inference would."""
    conn = await connect(db_url)
    try:
        await conn.execute(
            "INSERT INTO form_schemas (organization_id, form_id, version, schema, source) "
            "SELECT organization_id, id, 1, %(schema)s, 'suggested' FROM forms "
            "WHERE id = %(form)s",
            {"form": form_id, "schema": json.dumps(schema)},
        )
    finally:
        await conn.close()


# Every Playwright call waits at most this long (actions, navigations, launch), and the
# test as a whole at most TEST_SECONDS (it takes 10-20 s): a browser that stops answering
# fails the test with its stack instead of holding a worker until the suite's limit.
CALL_MS = 20_000
TEST_SECONDS = 180


@pytest.fixture
def expect() -> Iterator[Any]:
    """Playwright's `expect`, each assertion waiting up to CALL_MS (its default is 5 s, less
    than a busy machine takes to start Swagger UI)."""
    sync_api.expect.set_options(timeout=CALL_MS)
    yield sync_api.expect
    sync_api.expect.set_options(timeout=None)


def _invitation_link(app: Server, key: str, received: list[Envelope]) -> str:
    """Invite an owner through `POST /v1/members`; the link of the email the peer got."""
    answer = httpx.post(
        f"{app.url}/v1/members",
        json={"email": "ada@example.com", "role": "owner"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=CALL_MS / 1000,
    )
    assert answer.status_code == 201, answer.text
    assert [envelope.rcpt_tos for envelope in received] == [["ada@example.com"]]
    text = message_from_bytes(bytes(received[0].content)).get_payload(decode=True).decode()
    found = re.search(rf"{re.escape(app.url)}/app/invitations/\S+", text)
    assert found, text
    return found.group(0)


@pytest.mark.timeout(TEST_SECONDS)
def test_dashboard_in_a_real_browser(
    db_url: str, tmp_path: Path, expect: Any, smtp_server: tuple[str, list[Envelope]]
) -> None:
    executable = _chromium()
    key = _new_key(db_url)
    smtp_url, received = smtp_server
    shots = tmp_path / "shots"
    shots.mkdir()
    with (
        postbag(
            db_url, tmp_path, email_provider="smtp", smtp_url=smtp_url, mail_from=SENDER
        ) as app,
        receiver() as hook,
        receiver(status(404)) as gone,
        other_origin() as site,
        sync_api.sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, timeout=CALL_MS
        )
        context = browser.new_context()
        context.set_default_timeout(CALL_MS)
        context.set_default_navigation_timeout(CALL_MS)
        # Every page of every tab reports what its Content-Security-Policy blocked.
        violations: list[str] = []
        context.on(
            "console",
            lambda message: (
                violations.append(message.text)
                if "Content Security Policy" in message.text
                else None
            ),
        )
        page = context.new_page()
        page.set_viewport_size({"width": 1200, "height": 900})

        # Invited by email (a real SMTP peer): the link sets a password and signs in.
        page.goto(f"{app.url}/app")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        page.goto(_invitation_link(app, key, received))
        expect(page.get_by_role("heading", name="Join Bike shop")).to_be_visible()
        page.get_by_label("Choose a password").fill("correct horse battery")
        page.get_by_label("The same password again").fill("correct horse battery")
        page.get_by_role("button", name="Join and sign in").click()
        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()

        # Two webhook destinations: one that takes deliveries, one that answers 404.
        page.get_by_role("link", name="Destinations").click()
        for name, url in (("CRM", f"{hook.url}/hooks/crm"), ("Old CRM", f"{gone.url}/gone")):
            page.locator("#d-type").select_option("webhook")
            page.locator("#d-name").fill(name)
            page.locator("#d-url").fill(url)
            page.get_by_role("button", name="Add destination").click()
            expect(page.get_by_role("cell", name=name, exact=False).first).to_be_visible()

        # A form taking posts from the other website, routed to both.
        page.get_by_role("link", name="Forms").click()
        page.get_by_role("link", name="New form").click()
        page.locator("#name").fill("Contact")
        page.locator("#allowed_origins").fill(site.url)
        page.locator("#labels").fill('{"message": "Your message", "email": "Email"}')
        page.get_by_role("button", name="Create form").click()
        expect(page.get_by_role("heading", name="Contact")).to_be_visible()
        form_id = page.url.rsplit("/", 1)[1]
        for name in ("CRM", "Old CRM"):
            page.locator("#r-dest").select_option(label=f"{name} (webhook)")
            page.get_by_role("button", name="Add route").click()
        expect(page.get_by_role("cell", name="Old CRM webhook")).to_be_visible()
        page.screenshot(path=str(shots / "form.png"), full_page=True)

        # Observe the schema: the select offers the API's modes and shows the one stored.
        mode = page.locator("#schema_mode")
        options = mode.locator("option").all_inner_texts()
        assert options == ["off", "observe", "enforce"], options
        expect(mode).to_have_value("off")
        mode.select_option("observe")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#schema-mode-now")).to_have_text("observe")
        expect(page.locator("#schema_mode")).to_have_value("observe")
        expect(page.locator("#no-drift")).to_be_visible()
        # Saving another setting keeps observe.
        page.locator("#rate_max").fill("20")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#rate_max")).to_have_value("20")
        expect(page.locator("#schema_mode")).to_have_value("observe")

        # Inference suggests a schema; the owner adopts it, and the copy is current.
        app.run(_suggest(db_url, form_id, SUGGESTION))
        page.reload()
        versions = page.locator("table.schema-versions tbody tr")
        expect(versions).to_have_count(1)
        expect(versions.first).to_contain_text("suggested")
        page.get_by_role("button", name="Adopt version 1").click()
        expect(versions).to_have_count(2)
        expect(versions.first).to_contain_text("manual")
        expect(versions.first).to_contain_text("current")
        expect(versions.nth(1)).to_contain_text("suggested")
        expect(versions.nth(1)).not_to_contain_text("current")
        expect(page.locator("#schema_mode")).to_have_value("observe")
        page.goto(f"{app.url}/app/destinations")
        page.screenshot(path=str(shots / "destinations.png"), full_page=True)

        # A visitor posts the plain HTML form from the other origin.
        site.action = f"{app.url}/s/{form_id}"
        visitor = context.new_page()
        visitor.goto(site.url)
        visitor.get_by_label("Email", exact=True).fill("ada@example.com")
        visitor.get_by_label("Message").fill(MESSAGE)
        visitor.get_by_role("button", name="Send").click()
        expect(visitor.get_by_text(re.compile("sub_"))).to_be_visible()
        visitor.close()

        # Observed, not refused: the form page shows where the message broke the schema.
        page.goto(f"{app.url}/app/forms/{form_id}")
        drift = page.locator("table.drift tbody tr")
        expect(drift).to_have_count(1)
        expect(drift.first).to_contain_text("/message")
        expect(drift.first).to_contain_text("maxLength")
        assert MESSAGE not in page.content()
        page.locator("#schema").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "form-schema.png"), full_page=True)

        # The inbox lists it without its values.
        page.get_by_role("link", name="Inbox").click()
        row = page.locator("table.inbox tbody tr").first
        expect(row).to_contain_text("Contact")
        expect(row).to_contain_text("2 waiting")
        assert MESSAGE not in page.content()
        page.screenshot(path=str(shots / "inbox-waiting.png"), full_page=True)
        receipt = row.locator("a.receipt").inner_text()
        row.locator("a.receipt").click()
        expect(page.get_by_role("heading", name=f"Receipt {receipt}")).to_be_visible()
        expect(page.get_by_text(MESSAGE)).to_be_visible()
        expect(page.locator(".state").first).to_have_text("Waiting to send")

        # One delivery pass: the good line reaches Delivered, the other Not delivered.
        app.run(run_pass(app.services, TICKS["deliver"], now=utcnow(), budget=20))
        page.reload()
        lines = page.locator("li.line")
        expect(lines.filter(has_text="/hooks/crm")).to_contain_text("Delivered")
        gone_line = lines.filter(has_text="/gone")
        expect(gone_line).to_contain_text("Not delivered")
        expect(gone_line).to_contain_text("HTTP 404")
        assert len(hook.requests) == 1 and MESSAGE in hook.requests[0].body.decode()
        page.screenshot(path=str(shots / "receipt.png"), full_page=True)
        # Two more arrive: another message, and a bot filling the honeypot (spam).
        visitor = context.new_page()
        visitor.goto(site.url)
        visitor.get_by_label("Email", exact=True).fill("grace@example.com")
        visitor.get_by_label("Message").fill("Do you repair tandems?")
        visitor.get_by_role("button", name="Send").click()
        expect(visitor.get_by_text(re.compile("sub_"))).to_be_visible()
        visitor.goto(site.url)
        visitor.get_by_label("Email", exact=True).fill("bot@example.net")
        visitor.get_by_label("Message").fill("Cheap watches")
        visitor.evaluate("document.querySelector('[name=_gotcha]').value = 'x'")
        visitor.get_by_role("button", name="Send").click()
        # Answered like any other (bots learn nothing). Closing the page while its post was
        # in flight could cancel the post, or hang the close until the test's timeout.
        expect(visitor.get_by_text(re.compile("sub_"))).to_be_visible()
        visitor.close()
        page.goto(f"{app.url}/app")
        rows = page.locator("table.inbox tbody tr")
        expect(rows).to_have_count(3)
        expect(rows.filter(has_text=receipt)).to_contain_text("1 delivered, 1 not delivered")
        expect(rows.first).to_contain_text("Spam")
        assert "Do you repair tandems" not in page.content()
        page.set_viewport_size({"width": 1200, "height": 440})
        page.screenshot(path=str(shots / "inbox.png"))
        page.set_viewport_size({"width": 1200, "height": 900})
        page.get_by_role("link", name=receipt).click()

        # Erase, confirming first; the values and targets go, the lines stay.
        page.get_by_role("link", name="Erase values…").click()
        page.get_by_label("Yes, erase these values").check()
        page.get_by_role("button", name="Erase values").click()
        expect(page.get_by_text("Values erased")).to_be_visible()
        assert MESSAGE not in page.content() and "/hooks/crm" not in page.content()

        # Send again on the Not delivered line is refused in place; nothing changes.
        not_delivered = page.locator("li.line").filter(has_text="Not delivered")
        not_delivered.get_by_role("button", name="Send again").click()
        expect(page.get_by_role("alert")).to_contain_text("Not sent again")
        expect(page.get_by_role("alert")).to_contain_text("erased")
        assert len(gone.requests) == 1
        page.screenshot(path=str(shots / "receipt-refused.png"), full_page=True)

        # Phone width: the receipt still reads without sideways scrolling.
        page.set_viewport_size({"width": 390, "height": 844})
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the receipt scrolls sideways on a phone ({width}px)"

        # The API docs render from the installed Swagger UI, under their CSP.
        page.set_viewport_size({"width": 1200, "height": 900})
        page.goto(f"{app.url}/v1/docs")
        title = page.get_by_role("heading", name=re.compile("Postbag management API"))
        expect(title).to_be_visible()
        expect(page.locator(".opblock").first).to_be_visible()
        assert violations == [], violations
        browser.close()

    if os.environ.get("POSTBAG_SCREENSHOTS") == "docs":
        shutil.copy(shots / "inbox.png", DOCS / "inbox.png")
        shutil.copy(shots / "receipt.png", DOCS / "receipt.png")


@pytest.mark.slow
@pytest.mark.timeout(TEST_SECONDS)
def test_inviting_a_teammate_through_the_development_mailbox(
    db_url: str, tmp_path: Path, expect: Any
) -> None:
    executable = _chromium()
    link = _owner_link(db_url)
    teammate, password = "grace@example.com", "correct horse battery"
    with postbag(db_url, tmp_path, email_provider="dev") as app, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, timeout=CALL_MS
        )
        owner = browser.new_context()
        owner.set_default_timeout(CALL_MS)
        page = owner.new_page()
        page.goto(f"{app.url}{link}")
        expect(page.get_by_role("heading", name="Inbox")).to_be_visible()

        # The owner invites a teammate on the Members page.
        menu = page.get_by_role("navigation", name="Main")
        menu.get_by_role("link", name="Members").click()
        page.get_by_label("Email", exact=True).fill(teammate)
        page.get_by_label("Role", exact=True).select_option("operator")
        page.get_by_role("button", name="Send invitation").click()
        expect(page.locator("tr", has_text=teammate)).to_contain_text("operator")

        # And makes an API key: shown once, and it works.
        menu.get_by_role("link", name="Keys").click()
        page.get_by_label("Name").fill("CRM sync")
        page.get_by_role("button", name="Create key").click()
        key = page.locator("#new-key-secret").inner_text()
        answer = httpx.get(
            f"{app.url}/v1/forms",
            headers={"Authorization": f"Bearer {key}"},
            timeout=CALL_MS / 1000,
        )
        assert answer.status_code == 200, answer.text
        page.reload()
        assert key not in page.content()

        # The teammate, with no account, reads the caught mail and follows its link.
        guest = browser.new_context()
        guest.set_default_timeout(CALL_MS)
        mail = guest.new_page()
        mail.goto(f"{app.url}/app/dev/mail")
        message = mail.locator("article.mail", has_text=teammate).first
        expect(message).to_contain_text("You are invited to “Bike shop” on Postbag")
        message.locator('a[href*="/app/invitations/"]').click()
        expect(mail.get_by_role("heading", name="Join Bike shop")).to_be_visible()
        mail.get_by_label("Choose a password").fill(password)
        mail.get_by_label("The same password again").fill(password)
        mail.get_by_role("button", name="Join and sign in").click()
        expect(mail.get_by_role("heading", name="Inbox")).to_be_visible()
        # An operator: no link to the pages their role cannot open.
        nav = mail.get_by_role("navigation", name="Main")
        expect(nav.get_by_role("link", name="Members")).to_have_count(0)
        expect(nav.get_by_role("link", name="Keys")).to_have_count(0)

        # Signed out, the teammate signs in again with the password chosen.
        mail.get_by_role("button", name="Sign out").click()
        expect(mail.get_by_role("heading", name="Sign in")).to_be_visible()
        mail.get_by_label("Email", exact=True).fill(teammate)
        mail.get_by_label("Password").fill(password)
        mail.get_by_role("button", name="Sign in", exact=True).click()
        expect(mail.get_by_role("heading", name="Inbox")).to_be_visible()

        # The owner sees the teammate as a member.
        page.goto(f"{app.url}/app/members")
        expect(page.locator("tr", has_text=teammate)).to_contain_text("operator")
        expect(page.get_by_text("No invitation is waiting.")).to_be_visible()
        browser.close()
