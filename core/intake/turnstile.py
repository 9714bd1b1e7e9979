"""Cloudflare Turnstile: verifying a widget's token with siteverify.

It fails open into quarantine: an unreachable or slow siteverify quarantines the
submission (`turnstile_unavailable`) instead of refusing it, so nothing is lost.
"""

from __future__ import annotations

# The field the Turnstile widget adds to the form it sits in.
TURNSTILE_FIELD = "cf-turnstile-response"
TURNSTILE_TIMEOUT = 2.0


async def verify_turnstile(url: str, secret: str, token: str | None, remote_ip: str) -> str | None:
    """None when the token verifies; else the quarantine reason. Never raises."""
    if not token:
        return "turnstile_failed"
    # Imported here: only forms with a Turnstile secret need the HTTP stack (a cold submit
    # function pays for every module it imports).
    from core.destinations.http import post_form

    answer = await post_form(
        url, {"secret": secret, "response": token, "remoteip": remote_ip}, timeout=TURNSTILE_TIMEOUT
    )
    body = answer.json() if answer is not None and answer.status == 200 else None
    if not isinstance(body, dict):
        return "turnstile_unavailable"
    return None if body.get("success") is True else "turnstile_failed"
