"""Security headers of the api app: every `/v1` answer, every dashboard page, the API docs.

No page of Postbag runs an inline script or style, so each Content-Security-Policy lists
only the app's own files; nothing may frame a page (`frame-ancestors 'none'`, and
`X-Frame-Options: DENY` for older browsers); no answer is content-sniffed or sends a
`Referer`; and no answer but the dashboard's static files and the docs' assets is stored
by a cache (the API's answers and the signed-in pages carry values and keys).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DASHBOARD_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
# Swagger UI: its script and style from /v1/docs/assets, images inlined as data: URLs, and
# the OpenAPI document and "Try it out" calls to this origin.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# JSON, CSV and attachment downloads: nothing in them may run or load anything.
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; sandbox"

BASE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
CACHEABLE_PREFIXES = ("/app/static/", "/v1/docs/assets/")


def content_security_policy(path: str) -> str:
    """The Content-Security-Policy of an answer to `path`."""
    if path == "/app" or path.startswith("/app/"):
        return DASHBOARD_CSP
    if path == "/v1/docs" or path.startswith("/v1/docs/"):
        return DOCS_CSP
    return API_CSP


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    """The headers every answer to `path` carries."""
    headers = [*BASE_HEADERS, (b"content-security-policy", content_security_policy(path).encode())]
    if not path.startswith(CACHEABLE_PREFIXES):
        headers.append((b"cache-control", b"no-store"))
    return headers


class SecurityHeaders:
    """Set `security_headers(path)` on every HTTP answer of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = security_headers(scope["path"])
        replaced = {name for name, _ in extra}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(n, v) for n, v in message.get("headers", []) if n.lower() not in replaced]
                message["headers"] = [*kept, *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)
