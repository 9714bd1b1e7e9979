"""The fill-time token (docs/spam.md#fill-time): a signed, timestamped hidden field that the
HTML snippet fetches when its page loads, so a post tells how long its form was open.

A token is `<unix seconds>.<signature>`: HMAC-SHA256 of the form id and the time under the
installation's secret key, cut to 16 bytes, base64url. It is not secret (anyone may fetch
one); it only cannot be made up or moved to another form or time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import datetime

from core.spam.config import SpamConfig

FILL_FIELD = "_fill_token"
MAX_TOKEN = 64
# A token from up to this far in the future is taken as issued now (clocks of several
# processes differ a little).
CLOCK_SKEW = 60


def _signature(secret_key: bytes, form_id: str, issued: int) -> str:
    digest = hmac.new(secret_key, f"fill:{form_id}:{issued}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def fill_token(secret_key: bytes, form_id: str, now: datetime) -> str:
    """A token for `form_id` issued at `now`."""
    issued = int(now.timestamp())
    return f"{issued}.{_signature(secret_key, form_id, issued)}"


def fill_time_reason(
    settings: SpamConfig, secret_key: bytes, form_id: str, token: str | None, now: datetime
) -> str | None:
    """The spam reason the token gives (`too_fast`, `stale_token`, `forged_token`, or
    `missing_token` when the form requires one), or None."""
    if not token:
        return "missing_token" if settings.require_fill_token else None
    issued_text, _, signature = token.strip()[:MAX_TOKEN].partition(".")
    if not issued_text.isascii() or not issued_text.isdigit() or len(issued_text) > 12:
        return "forged_token"
    issued = int(issued_text)
    if not hmac.compare_digest(signature, _signature(secret_key, form_id, issued)):
        return "forged_token"
    elapsed = now.timestamp() - issued
    if elapsed < -CLOCK_SKEW:
        return "forged_token"
    if elapsed > settings.max_token_age_seconds:
        return "stale_token"
    if elapsed < settings.min_fill_seconds:
        return "too_fast"
    return None
