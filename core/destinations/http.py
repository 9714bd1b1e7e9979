"""The process's shared HTTP client, and one request as adapters send it (a POST, or a vendor
API's GET and PUT): no redirects, a hard timeout, a short excerpt kept, the answer
classified (docs/delivery.md).

`classify_status` and `parse_retry_after` are pure: what an HTTP answer means for a
delivery, and how long it asks to wait. The outbox turns that into the next attempt's time
(core/outbox/backoff.py); destinations never import the outbox.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any

import aiohttp

from core.destinations.base import Result

EXCERPT_CHARS = 512
# The longest wait an answer may ask for (a `Retry-After` header, a chat service's body),
# as the outbox's longest backoff: a figure past it is read as it.
MAX_RETRY_AFTER = 6 * 3600.0
# Enough of the answer for the excerpt and for small JSON bodies (Telegram's errors).
_READ_LIMIT = 16 * 1024


class Verdict(Enum):
    """What an HTTP status means for a delivery."""

    SENT = "sent"
    RETRY = "retry"
    DEAD = "dead"


def classify_status(status: int) -> Verdict:
    """2xx sent; 408, 429 and 5xx retried; anything else (3xx included) dead at once."""
    if 200 <= status < 300:
        return Verdict.SENT
    if status in (408, 429) or 500 <= status < 600:
        return Verdict.RETRY
    return Verdict.DEAD


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date).

    A missing, malformed, negative or past value is None: the normal backoff applies.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - now).total_seconds()
    if seconds <= 0:
        return None
    return seconds


# Not on Services: a client lives as long as its event loop (tests and the Lambda handler run
# several), and is closed where a loop ends, by code that holds no Services.
_clients: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


def shared_client() -> aiohttp.ClientSession:
    """The process's HTTP client for the running event loop (connections are reused).

    No cookies are kept between sends (receivers of different organizations share it) and
    no proxy is taken from the environment: a webhook goes to the address the SSRF guard
    checked.
    """
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        for old in [other for other in _clients if other.is_closed()]:
            del _clients[old]
        client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        _clients[loop] = client
    return client


async def close_shared_client() -> None:
    """Close the running loop's client (end of a Lambda invocation, CLI pass, shutdown)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.close()
        # A transport closes its socket one loop iteration later: let that happen before a
        # caller stops the loop (the Lambda handler's invocation, `asyncio.run`).
        await asyncio.sleep(0)
        await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class Reply:
    """One classified request: its `result`, and the first `read_limit` bytes of the answer
    (a vendor API's JSON, which the adapter reads further)."""

    result: Result
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


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
    """POST `content` and classify the answer (docs/delivery.md); never raises for I/O.

    A retryable answer's wait is the longer of its `Retry-After` header and the service's
    `retry_after` reading of the body, capped at MAX_RETRY_AFTER. `server_hostname` is the
    name TLS presents and verifies when `url` names the address the SSRF guard checked
    instead of the host.
    """
    reply = await request(
        session,
        "POST",
        url,
        content=content,
        headers=headers,
        timeout=timeout,
        server_hostname=server_hostname,
        retry_after=retry_after,
    )
    return reply.result


async def request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    content: bytes | None = None,
    headers: Mapping[str, str],
    timeout: float,
    server_hostname: str | None = None,
    retry_after: Callable[[bytes], float | None] | None = None,
    read_limit: int = _READ_LIMIT,
) -> Reply:
    """One request of any method, classified as `post` classifies its answer, with the
    first `read_limit` bytes of the body; never raises for I/O."""
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async with session.request(
                method,
                url,
                data=content,
                headers=headers,
                allow_redirects=False,
                server_hostname=server_hostname,
            ) as response:
                while len(body) < read_limit:
                    chunk = await response.content.read(read_limit - len(body))
                    if not chunk:
                        break
                    body.extend(chunk)
    except TimeoutError:
        return Reply(Result(ok=False, retryable=True, error_class="timeout"), b"")
    except aiohttp.ClientConnectorError:
        return Reply(Result(ok=False, retryable=True, error_class="connection_error"), b"")
    except aiohttp.ClientError as exc:
        return Reply(Result(ok=False, retryable=True, error_class=_error_name(exc)), b"")
    raw = bytes(body)
    excerpt = raw.decode("utf-8", errors="replace")[:EXCERPT_CHARS] or None
    verdict = classify_status(response.status)
    wait = None
    if verdict is Verdict.RETRY:
        wait = parse_retry_after(response.headers.get("retry-after"), now=datetime.now(UTC))
        hint = retry_after(raw) if retry_after is not None else None
        if hint is not None:
            # A service may ask in its body as well as in the header: the longer wait wins.
            wait = max(hint, wait or 0.0)
        if wait is not None:
            wait = min(wait, MAX_RETRY_AFTER)
    result = Result(
        ok=verdict is Verdict.SENT,
        retryable=verdict is Verdict.RETRY,
        http_status=response.status,
        excerpt=excerpt,
        retry_after=wait,
    )
    return Reply(result, raw)


def _error_name(exc: Exception) -> str:
    """`ServerDisconnectedError` → `server_disconnected_error` (a class name, never a message)."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


@dataclass(frozen=True, slots=True)
class Answer:
    """A verification service's answer to a form POST (its first 16 KiB)."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


async def post_form(url: str, data: Mapping[str, str], *, timeout: float) -> Answer | None:
    """One bounded form POST through the shared client (Turnstile's, hCaptcha's,
    reCAPTCHA's siteverify, Akismet): the answer, or None when the service could not be
    reached or did not answer within `timeout` seconds. Never raises for I/O."""
    try:
        async with asyncio.timeout(timeout):
            async with shared_client().post(
                url, data=dict(data), allow_redirects=False
            ) as response:
                return Answer(response.status, await response.content.read(_READ_LIMIT))
    except (TimeoutError, aiohttp.ClientError):
        return None
