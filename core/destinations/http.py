"""One HTTP POST as adapters send it: no redirects, a hard timeout, a short excerpt kept."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import aiohttp

from core.destinations.base import Result
from core.outbox.backoff import Verdict, classify_status, parse_retry_after

EXCERPT_CHARS = 512
# Enough of the answer for the excerpt and for small JSON bodies (Telegram's errors).
_READ_LIMIT = 16 * 1024


async def post(
    session: aiohttp.ClientSession,
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeout: float,
    server_hostname: str | None = None,
    retry_after: Callable[[bytes], float | None] | None = None,
) -> Result:
    """POST `content` and classify the answer (SPEC §5 outcome rules); never raises for I/O.

    `server_hostname` is the name TLS presents and verifies when `url` names the address
    the SSRF guard checked instead of the host.
    """
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async with session.post(
                url,
                data=content,
                headers=headers,
                allow_redirects=False,
                server_hostname=server_hostname,
            ) as response:
                while len(body) < _READ_LIMIT:
                    chunk = await response.content.read(_READ_LIMIT - len(body))
                    if not chunk:
                        break
                    body.extend(chunk)
    except TimeoutError:
        return Result(ok=False, retryable=True, error_class="timeout")
    except aiohttp.ClientConnectorError:
        return Result(ok=False, retryable=True, error_class="connection_error")
    except aiohttp.ClientError as exc:
        return Result(ok=False, retryable=True, error_class=_error_name(exc))
    raw = bytes(body)
    excerpt = raw.decode("utf-8", errors="replace")[:EXCERPT_CHARS] or None
    verdict = classify_status(response.status)
    wait = None
    if verdict is Verdict.RETRY:
        wait = parse_retry_after(response.headers.get("retry-after"), now=datetime.now(UTC))
        if retry_after is not None:
            wait = retry_after(raw) or wait
    return Result(
        ok=verdict is Verdict.SENT,
        retryable=verdict is Verdict.RETRY,
        http_status=response.status,
        excerpt=excerpt,
        retry_after=wait,
    )


def _error_name(exc: Exception) -> str:
    """`ServerDisconnectedError` → `server_disconnected_error` (a class name, never a message)."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
