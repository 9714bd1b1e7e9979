"""The form page's spam section: an admin saves the spam settings and a write-only check
secret (then removes it) through the same use case as `PATCH /v1/forms/{id}`, resets the
learned filter after confirming; a viewer sees why they cannot. The receipt says why a
submission is spam with the threshold it crossed, in its status and its history."""

from __future__ import annotations

import re
from typing import Any

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.dashboard import csrf_of, dashboard_client, sign_in
from tests.support.records import rows
from tests.support.spam import JSON_ACCEPT, spam_form
from tests.support.submit import submit_client

SECRET = "h-secret-never-shown"
LINKS = " ".join(f"https://shop{n}.example/deal" for n in range(12))


def _settings(csrf: str, **changed: str) -> dict[str, Any]:
    """Every input of the spam section as a browser posts it (boxes ticked: `on`)."""
    return {
        "csrf": csrf,
        "max_links": "5",
        "blocked_words": "casino\r\nfree money",
        "blocked_patterns": "",
        "blocked_email_domains": "spam.example",
        "block_disposable_email": "on",
        "allowed_scripts": "",
        "min_fill_seconds": "0",
        "max_token_age_seconds": "86400",
        "duplicate_max": "",
        "duplicate_window_seconds": "86400",
        "learned": "on",
        "learned_threshold": "0.95",
        "recaptcha_min_score": "0.5",
        "akismet_site": "",
        "hcaptcha_secret": "",
        "recaptcha_secret": "",
        "akismet_key": "",
        **changed,
    }


async def test_spam_page__saves_settings_and_a_write_only_secret_then_removes_it(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(services, conn)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, tenant.key, role="admin")
        page = await client.get(f"/app/forms/{form}")
        assert 'id="max_links" name="max_links" type="number" min="0" max="1000" value="3"' in (
            page.text
        )
        assert "none: the check is off" in page.text
        saved = await client.post(
            f"/app/forms/{form}/spam", data=_settings(csrf, hcaptcha_secret=SECRET)
        )
        assert saved.status_code == 303
        assert saved.headers["location"] == f"/app/forms/{form}#spam-settings"
        async with api_client(services, tenant.key) as api:
            stored = (await api.get(f"/v1/forms/{form}")).json()
        assert stored["spam"]["max_links"] == 5
        assert stored["spam"]["blocked_words"] == ["casino", "free money"]
        assert stored["spam"]["duplicate_max"] is None  # emptied: off
        assert stored["spam"]["learned_threshold"] == 0.95
        assert stored["spam_checks"]["hcaptcha"] is True
        page = await client.get(f"/app/forms/{form}")
        assert SECRET not in page.text and 'id="hcaptcha_secret-state">stored' in page.text
        removed = await client.post(
            f"/app/forms/{form}/spam", data=_settings(csrf, remove_hcaptcha_secret="on")
        )
        assert removed.status_code == 303
        bad = await client.post(
            f"/app/forms/{form}/spam", data=_settings(csrf, blocked_patterns="(a)\\1")
        )
        assert bad.status_code == 422 and "blocked_patterns" in bad.text
        async with api_client(services, tenant.key) as api:
            stored = (await api.get(f"/v1/forms/{form}")).json()
        assert stored["spam_checks"]["hcaptcha"] is False
        assert stored["spam"]["blocked_patterns"] == []
    [secrets] = await rows(conn, "SELECT spam_secrets FROM forms WHERE id = %(f)s", f=form)
    assert secrets["spam_secrets"] == {}
    audited = await rows(conn, "SELECT action FROM audit_log ORDER BY seq")
    assert [r["action"] for r in audited] == [
        "form.created",
        "member.signed_in",
        "form.updated",
        "form.updated",
    ]


async def test_spam_page__the_receipt_says_which_threshold_a_post_crossed(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(services, conn)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, tenant.key, role="admin")
        await client.post(f"/app/forms/{form}/spam", data=_settings(csrf))
        async with submit_client(services) as visitor:
            posted = await visitor.post(f"/s/{form}", json={"message": LINKS}, headers=JSON_ACCEPT)
        receipt = posted.json()["receipt"]
        page = await client.get(f"/app/submissions/{receipt}")
        assert '<span class="hint" id="spam-reason">12 links, more than 5</span>' in page.text
        assert "Received as spam: 12 links, more than 5" in page.text
    async with dashboard_client(services) as viewer:
        await sign_in(viewer, tenant.key, role="viewer")
        read = await viewer.get(f"/app/submissions/{receipt}")
        # A viewer reads the threshold, not a count taken from the values.
        assert "Received as spam: more than 5 links" in read.text
        assert "12 links" not in read.text
        form_page = await viewer.get(f"/app/forms/{form}")
        assert "Only admins and owners change spam settings; your role is viewer." in (
            form_page.text
        )
        assert re.search(
            r'action="/app/forms/frm_\w+/spam"><fieldset class="plain" disabled', (form_page.text)
        )
        refused = await viewer.post(
            f"/app/forms/{form}/spam", data=_settings(csrf_of(form_page.text))
        )
        assert refused.status_code == 403


async def test_spam_page__the_learned_filter_is_reset_once_confirmed(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(services, conn)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, tenant.key, role="admin")
        page = await client.get(f"/app/forms/{form}")
        assert 'action="/app/spam/model/reset"' in page.text
        unconfirmed = await client.post("/app/spam/model/reset", data={"csrf": csrf, "form": form})
        assert unconfirmed.status_code == 422
        reset = await client.post(
            "/app/spam/model/reset", data={"csrf": csrf, "form": form, "confirm": "on"}
        )
        assert reset.status_code == 303 and reset.headers["location"] == f"/app/forms/{form}#spam"
        elsewhere = await client.post(
            "/app/spam/model/reset",
            data={"csrf": csrf, "form": "https://evil.example", "confirm": "on"},
        )
        assert elsewhere.headers["location"] == "/app/forms"
    audited = await rows(conn, "SELECT action, subject FROM audit_log ORDER BY seq")
    assert [r["action"] for r in audited] == [
        "form.created",
        "member.signed_in",
        "spam_filter.reset",
        "spam_filter.reset",
    ]
    assert audited[2]["subject"] == tenant.org
