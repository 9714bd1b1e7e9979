"""External spam checks (docs/spam.md#external-checks): hCaptcha, reCAPTCHA v3 with a score
threshold, and an Akismet-compatible content check, each on for a form when the owner gives
its secret. Bounded like Turnstile: each call has EXTERNAL_TIMEOUT seconds, and a service
that errs, answers something else or does not answer in time fails open into
`quarantined` with a reason (`hcaptcha_unavailable`…), so nothing is lost and nothing waits
long. The URLs are settings, so tests and self-hosters can point them elsewhere."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from core.intake.values import first_text
from core.platform.settings import Settings
from core.spam.config import SpamConfig

HCAPTCHA_FIELD = "h-captcha-response"
RECAPTCHA_FIELD = "g-recaptcha-response"
EXTERNAL_FIELDS = (HCAPTCHA_FIELD, RECAPTCHA_FIELD)
EXTERNAL_TIMEOUT = 2.0
# The Akismet check sends at most this much of the message.
AKISMET_CONTENT = 10_000


async def _post(url: str, data: Mapping[str, str]) -> Any:
    """The answer of one bounded POST: the response, or None when the service could not be
    reached or answered in time."""
    # Imported here: only forms with an external check need an HTTP client.
    import httpx

    try:
        async with asyncio.timeout(EXTERNAL_TIMEOUT):
            async with httpx.AsyncClient(timeout=EXTERNAL_TIMEOUT) as client:
                return await client.post(url, data=dict(data))
    except (TimeoutError, httpx.HTTPError):
        return None


async def _siteverify(
    name: str, url: str, secret: str, token: str | None, client: str, min_score: float | None
) -> tuple[str, str] | None:
    """hCaptcha's and reCAPTCHA's siteverify: None when the token verifies (and, for
    reCAPTCHA v3, scores at least `min_score`); else the quarantine and its reason."""
    if not token:
        return "quarantined", f"{name}_failed"
    response = await _post(url, {"secret": secret, "response": token, "remoteip": client})
    try:
        body = response.json() if response is not None and response.status_code == 200 else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return "quarantined", f"{name}_unavailable"
    if body.get("success") is not True:
        return "quarantined", f"{name}_failed"
    if min_score is not None:
        score = body.get("score")
        if not isinstance(score, int | float) or score < min_score:
            return "quarantined", f"{name}_failed"
    return None


def _akismet_data(
    app: Settings, settings: SpamConfig, key: str, values: Mapping[str, Any], client: str
) -> dict[str, str]:
    texts = [str(v) for v in values.values() if isinstance(v, str)]
    data = {
        "api_key": key,
        "blog": settings.akismet_site or app.public_url,
        "user_ip": client,
        "comment_type": "contact-form",
        "comment_content": "\n".join(texts)[:AKISMET_CONTENT],
    }
    for field, name in (("name", "comment_author"), ("email", "comment_author_email")):
        text = first_text(values.get(field))
        if text:
            data[name] = text[:200]
    return data


async def external_verdict(
    app: Settings,
    settings: SpamConfig,
    secrets: Mapping[str, str],
    fields: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    client: str,
) -> tuple[str, str] | None:
    """The status and reason of the first external check that applies, or None. Never
    raises."""
    widgets = (
        ("hcaptcha", app.hcaptcha_verify_url, HCAPTCHA_FIELD, None),
        ("recaptcha", app.recaptcha_verify_url, RECAPTCHA_FIELD, settings.recaptcha_min_score),
    )
    for name, url, field, min_score in widgets:
        secret = secrets.get(f"{name}_secret")
        if secret:
            token = first_text(fields.get(field))
            found = await _siteverify(name, url, secret, token, client, min_score)
            if found:
                return found
    if secrets.get("akismet_key"):
        response = await _post(
            app.akismet_url, _akismet_data(app, settings, secrets["akismet_key"], values, client)
        )
        ok = response is not None and response.status_code == 200
        answer = response.text.strip() if ok else ""
        if answer == "true":
            return "spam", "akismet"
        if answer != "false":
            return "quarantined", "akismet_unavailable"
    return None
