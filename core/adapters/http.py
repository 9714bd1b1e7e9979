"""One HTTP POST as adapters send it: no redirects, a hard timeout, a short excerpt kept."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from core.adapters.base import Result
from core.backoff import Verdict, classify_status, parse_retry_after

EXCERPT_CHARS = 512
# Enough of the answer for the excerpt and for small JSON bodies (Telegram's errors).
_READ_LIMIT = 16 * 1024


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout: float,
    extensions: dict[str, Any] | None = None,
    retry_after: Callable[[httpx.Response, bytes], float | None] | None = None,
) -> Result:
    """POST `content` and classify the answer (SPEC §5 outcome rules); never raises for I/O."""
    try:
        async with asyncio.timeout(timeout):
            async with client.stream(
                "POST",
                url,
                content=content,
                headers=dict(headers),
                timeout=timeout,
                follow_redirects=False,
                extensions=extensions,
            ) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body.extend(chunk)
                    if len(body) >= _READ_LIMIT:
                        break
    except (TimeoutError, httpx.TimeoutException):
        return Result(ok=False, retryable=True, error_class="timeout")
    except httpx.ConnectError:
        return Result(ok=False, retryable=True, error_class="connection_error")
    except httpx.TransportError as exc:
        return Result(ok=False, retryable=True, error_class=_error_name(exc))
    raw = bytes(body)
    excerpt = raw.decode("utf-8", errors="replace")[:EXCERPT_CHARS] or None
    verdict = classify_status(response.status_code)
    wait = None
    if verdict is Verdict.RETRY:
        wait = parse_retry_after(response.headers.get("retry-after"), now=datetime.now(UTC))
        if retry_after is not None:
            wait = retry_after(response, raw) or wait
    return Result(
        ok=verdict is Verdict.SENT,
        retryable=verdict is Verdict.RETRY,
        http_status=response.status_code,
        excerpt=excerpt,
        retry_after=wait,
    )


def _error_name(exc: Exception) -> str:
    """`RemoteProtocolError` → `remote_protocol_error` (a class name, never a message)."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
