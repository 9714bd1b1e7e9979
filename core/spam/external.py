"""External spam checks (docs/spam.md#external-checks): hCaptcha, reCAPTCHA v3 with a score
threshold, and an Akismet-compatible content check, each on for a form when the owner gives
its secret. Bounded like Turnstile: each call goes through the process's shared HTTP client
(core/destinations/http.py) with EXTERNAL_TIMEOUT seconds, and a service
that errs, answers something else or does not answer in time fails open into
`quarantined` with a reason (`hcaptcha_unavailable`…), so nothing is lost and nothing waits
long. The URLs are settings, so tests and self-hosters can point them elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.platform.fields import first_text
from core.platform.settings import Settings
from core.spam.config import SpamConfig

if TYPE_CHECKING:
    from core.destinations.http import Answer

HCAPTCHA_FIELD = "h-captcha-response"
RECAPTCHA_FIELD = "g-recaptcha-response"
EXTERNAL_FIELDS = (HCAPTCHA_FIELD, RECAPTCHA_FIELD)
EXTERNAL_TIMEOUT = 2.0
# The Akismet check sends at most this much of the message.
AKISMET_CONTENT = 10_000


async def _post(url: str, data: Mapping[str, str]) -> Answer | None:
    # Imported here: only forms with an external check need the HTTP stack (a cold submit
    # function pays for every module it imports).
    from core.destinations.http import post_form

    return await post_form(url, data, timeout=EXTERNAL_TIMEOUT)


async def _siteverify(
    name: str, url: str, secret: str, token: str | None, client: str, min_score: float | None
) -> tuple[str, str] | None:
    """hCaptcha's and reCAPTCHA's siteverify: None when the token verifies (and, for
    reCAPTCHA v3, scores at least `min_score`); else the quarantine and its reason."""
    if not token:
        return "quarantined", f"{name}_failed"
    data = {"secret": secret, "response": token, "remoteip": client}
    answer = await _post(url, data)
    body = answer.json() if answer is not None and answer.status == 200 else None
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
        data = _akismet_data(app, settings, secrets["akismet_key"], values, client)
        answer = await _post(app.akismet_url, data)
        said = answer.text.strip() if answer is not None and answer.status == 200 else ""
        if said == "true":
            return "spam", "akismet"
        if said != "false":
            return "quarantined", "akismet_unavailable"
    return None
