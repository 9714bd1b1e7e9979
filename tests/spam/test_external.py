"""External checks (docs/spam.md#external-checks): hCaptcha, reCAPTCHA v3 and an
Akismet-compatible check, each against a loopback double that answers yes, no, slowly and
not at all; bounded, failing open into `quarantined`."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.records import rows
from tests.support.settings import with_settings
from tests.support.spam import closed_port_url, spam_form, stored
from tests.support.submit import FakeTurnstile, submit_client

VALUES = {"name": "Ada Lovelace", "email": "ada@example.com", "message": "A question"}
SLOW = 3.0  # past the checks' 2 s bound

# (the secret's key, the setting of its URL, the field of the widget's token)
SERVICES = {
    "hcaptcha": ("hcaptcha_secret", "hcaptcha_verify_url", "h-captcha-response"),
    "recaptcha": ("recaptcha_secret", "recaptcha_verify_url", "g-recaptcha-response"),
    "akismet": ("akismet_key", "akismet_url", None),
}
YES = {
    "hcaptcha": json.dumps({"success": True}).encode(),
    "recaptcha": json.dumps({"success": True, "score": 0.9}).encode(),
    "akismet": b"false",
}
NO: dict[str, tuple[bytes, str, str]] = {
    "hcaptcha": (json.dumps({"success": False}).encode(), "quarantined", "hcaptcha_failed"),
    "recaptcha": (
        json.dumps({"success": True, "score": 0.2}).encode(),
        "quarantined",
        "recaptcha_failed",
    ),
    "akismet": (b"true", "spam", "akismet"),
}


def _service(body: bytes, delay: float = 0.0) -> FakeTurnstile:
    """A loopback double of a check's service answering `body` after `delay` seconds."""
    service = FakeTurnstile()
    service.body, service.delay = body, delay
    return service


async def _judged(
    services: Services, conn: Conn, name: str, url: str, extra: dict[str, Any] | None = None
) -> tuple[tuple[str, str | None], float]:
    """Post once to a form with `name`'s check on and its service at `url`: the stored
    (status, reason) and how long the post took."""
    key, setting, field = SERVICES[name]
    _, form = await spam_form(services, conn, spam_secrets={key: "owner-secret"})
    checked = with_settings(services, **{setting: url})
    values = {**VALUES, **({field: "widget-token"} if field else {}), **(extra or {})}
    async with submit_client(checked, client=("198.51.100.9", 4000)) as client:
        started = time.monotonic()
        result = await stored(client, conn, form, values)
    return result, time.monotonic() - started


@pytest.mark.parametrize("name", SERVICES)
async def test_external__a_yes_accepts_and_the_service_is_asked_properly(
    services: Services, conn: Conn, name: str
) -> None:
    async with _service(YES[name]) as service:
        result, _ = await _judged(services, conn, name, service.url)
    assert result == ("accepted", None)
    [sent] = service.requests
    if name == "akismet":
        assert sent["api_key"] == "owner-secret" and sent["user_ip"] == "198.51.100.9"
        assert sent["comment_type"] == "contact-form"
        assert sent["comment_author"] == "Ada Lovelace"
        assert sent["comment_author_email"] == "ada@example.com"
        assert "A question" in sent["comment_content"]
        assert sent["blog"] == services.settings.public_url
    else:
        assert sent == {
            "secret": "owner-secret",
            "response": "widget-token",
            "remoteip": "198.51.100.9",
        }


@pytest.mark.parametrize("name", SERVICES)
async def test_external__a_no_is_stored_with_its_reason(
    services: Services, conn: Conn, name: str
) -> None:
    body, status, reason = NO[name]
    async with _service(body) as service:
        result, _ = await _judged(services, conn, name, service.url)
    assert result == (status, reason)
    [row] = await _values(conn)
    assert set(row) == {"name", "email", "message"}  # the widget's token is not stored


async def _values(conn: Conn) -> list[dict[str, Any]]:
    return [r["values"] for r in await rows(conn, 'SELECT "values" FROM submissions')]


@pytest.mark.slow
@pytest.mark.parametrize("name", SERVICES)
async def test_external__a_slow_service_quarantines_within_its_bound(
    services: Services, conn: Conn, name: str
) -> None:
    async with _service(YES[name], delay=SLOW) as service:
        result, took = await _judged(services, conn, name, service.url)
    assert result == ("quarantined", f"{name}_unavailable")
    assert took < SLOW


@pytest.mark.parametrize("name", SERVICES)
async def test_external__a_service_that_does_not_answer_quarantines(
    services: Services, conn: Conn, name: str
) -> None:
    result, _ = await _judged(services, conn, name, closed_port_url())
    assert result == ("quarantined", f"{name}_unavailable")


@pytest.mark.parametrize("name", SERVICES)
async def test_external__an_error_or_a_garbled_answer_quarantines(
    services: Services, conn: Conn, name: str
) -> None:
    async with _service(b"<html>oops</html>") as garbled:
        result, _ = await _judged(services, conn, name, garbled.url)
    assert result == ("quarantined", f"{name}_unavailable")


@pytest.mark.parametrize("name", ["hcaptcha", "recaptcha"])
async def test_external__a_post_without_the_widgets_token_is_quarantined_unasked(
    services: Services, conn: Conn, name: str
) -> None:
    key, setting, _ = SERVICES[name]
    _, form = await spam_form(services, conn, spam_secrets={key: "owner-secret"})
    async with _service(YES[name]) as service:
        checked = with_settings(services, **{setting: service.url})
        async with submit_client(checked) as client:
            result = await stored(client, conn, form, VALUES)
    assert result == ("quarantined", f"{name}_failed")
    assert service.requests == []


async def test_external__secrets_are_write_only_and_a_patch_sets_or_removes_each(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(
        services, conn, spam_secrets={"hcaptcha_secret": "h-secret", "akismet_key": "a-key"}
    )
    async with api_client(services, tenant.key) as api:
        read = await api.get(f"/v1/forms/{form}")
        assert read.json()["spam_checks"] == {
            "hcaptcha": True,
            "recaptcha": False,
            "akismet": True,
        }
        assert "h-secret" not in read.text and "a-key" not in read.text
        patched = await api.patch(
            f"/v1/forms/{form}",
            json={"spam_secrets": {"akismet_key": None, "recaptcha_secret": "r-secret"}},
        )
        assert patched.json()["spam_checks"] == {
            "hcaptcha": True,
            "recaptcha": True,
            "akismet": False,
        }
        renamed = await api.patch(f"/v1/forms/{form}", json={"name": "Renamed"})
        assert renamed.json()["spam_checks"]["hcaptcha"] is True
        cleared = await api.patch(f"/v1/forms/{form}", json={"spam_secrets": None})
        assert cleared.json()["spam_checks"] == {
            "hcaptcha": False,
            "recaptcha": False,
            "akismet": False,
        }
