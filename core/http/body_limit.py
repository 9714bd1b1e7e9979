"""Request body limits of the api app, enforced before any parsing or authentication.

FastAPI reads (and Starlette spools) a body before the endpoint's dependencies run, so a
key check cannot protect the server from a large body: this ASGI middleware does. A
declared `Content-Length` over the limit is refused before a byte is read; a body sent
without one (chunked) is counted as it streams, and reading stops at the limit: the app
sees the client as gone, and whatever it would have answered is replaced by the `413`.
Nothing past the limit is ever buffered or written to a temporary file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from core.http.problems import problem_for
from core.platform.errors import PayloadTooLarge

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_API_BODY_BYTES = 1024 * 1024  # every /v1 request (schemas included) and dashboard post
# The forms posted before signing in (email, password, code, token): sign-in, a password
# reset asked for or set, an invitation accepted.
MAX_SIGN_IN_BODY_BYTES = 16 * 1024
SIGN_IN_PATHS = ("/app/sign-in", "/app/forgot", "/app/reset/", "/app/invitations/")


def body_limit(path: str) -> int:
    """The most bytes a request body to `path` may have."""
    signing_in = path == SIGN_IN_PATHS[0] or path.startswith(SIGN_IN_PATHS[1:])
    return MAX_SIGN_IN_BODY_BYTES if signing_in else MAX_API_BODY_BYTES


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is over {limit // 1024} KiB")


class BodyLimit:
    """Refuse request bodies over `body_limit(path)` with `413 payload_too_large`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await problem_for(_too_large(limit))(scope, receive, send)
            return
        received = 0
        over = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over and not started:
                return  # the app's answer to a cut-off body; the 413 goes instead
            started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not over:
                raise
        if over and not started:
            await problem_for(_too_large(limit))(scope, receive, send)
