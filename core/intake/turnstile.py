"""Cloudflare Turnstile: verifying a widget's token with siteverify.

It fails open into quarantine: an unreachable or slow siteverify quarantines the
submission (`turnstile_unavailable`) instead of refusing it, so nothing is lost.
"""

from __future__ import annotations

import asyncio

# The field the Turnstile widget adds to the form it sits in.
TURNSTILE_FIELD = "cf-turnstile-response"
TURNSTILE_TIMEOUT = 2.0


async def verify_turnstile(url: str, secret: str, token: str | None, remote_ip: str) -> str | None:
    """None when the token verifies; else the quarantine reason. Never raises."""
    if not token:
        return "turnstile_failed"
    # Imported here: only forms with a Turnstile secret need an HTTP client.
    import httpx

    try:
        async with asyncio.timeout(TURNSTILE_TIMEOUT):
            async with httpx.AsyncClient(timeout=TURNSTILE_TIMEOUT) as client:
                response = await client.post(
                    url, data={"secret": secret, "response": token, "remoteip": remote_ip}
                )
        if response.status_code != 200:
            return "turnstile_unavailable"
        body = response.json()
    except (TimeoutError, httpx.HTTPError, ValueError):
        return "turnstile_unavailable"
    if not isinstance(body, dict):
        return "turnstile_unavailable"
    return None if body.get("success") is True else "turnstile_failed"
