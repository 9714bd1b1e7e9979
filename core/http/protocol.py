"""The HTTP protocol of `postbag serve` and `postbag dev`: uvicorn's httptools protocol with
limits on what one client can hold (docs/self-host.md#limits-on-clients).

- **Head**: a request's head must be complete within HEAD_TIMEOUT (10 s) of the connection
  opening, or of the request's first byte on a kept-alive connection; otherwise the
  connection is closed unanswered (a slowloris never reaches the app).
- **Whole request**: head and body must be complete within `POSTBAG_REQUEST_TIMEOUT`
  (default 30 s) of the request's first byte. Past it, a request whose answer has not
  begun is answered `408` (problem+json, `request_timeout`) and its connection closed; the
  app reading the body sees the client gone. A body trickled a byte at a time therefore
  holds a connection (and a spooled upload) for at most that long.
- **Connections**: at most `POSTBAG_MAX_CONNECTIONS` (default 1,000) open per process,
  lowered to fit the open-files limit. Past the cap a request is answered `503`
  (problem+json, `over_capacity`, `Retry-After: 1`, `Connection: close`) as soon as its
  head arrives, except `GET /health`: HEALTH_RESERVE connections beyond the cap are kept
  for it, so an orchestrator still sees the process alive while clients are refused. Past
  cap and reserve, a connection is answered the same `503` at once and closed unread.

uvicorn's own `limit_concurrency` answers a `text/plain` 503 to every request past its
limit, `/health` included, and counts running tasks as well as connections; this cap is
on connections alone (what a slow client holds), answers problem+json and keeps `/health`.

`raise_open_files_limit` lifts the process's soft RLIMIT_NOFILE to its hard limit at start
(each connection is a file descriptor; the default soft limit is often 1,024).
"""

from __future__ import annotations

import asyncio
import functools
import resource
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from core.http.problems import problem
from core.platform.logs import log
from core.platform.settings import Settings, load_settings

HEAD_TIMEOUT = 10.0
HEALTH_RESERVE = 16
# Descriptors kept for everything but client connections: the listening sockets, the
# database pool, log and spooled files, the delivery client's sockets.
OTHER_DESCRIPTORS = 256
# The soft limit asked for when the hard limit is unlimited.
OPEN_FILES_TARGET = 1_048_576
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """What one serving process lets clients hold."""

    request_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ClientLimits:
        """The configured limits, the connection cap lowered to fit the open-files limit."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        room = settings.max_connections
        if soft != resource.RLIM_INFINITY:
            room = min(room, max(1, soft - OTHER_DESCRIPTORS - HEALTH_RESERVE))
        return cls(request_timeout=settings.request_timeout, max_connections=room)


@functools.cache
def client_limits() -> ClientLimits:
    """This process's limits, read once from the environment (uvicorn's worker processes
    build their protocols from it, as they build their app)."""
    return ClientLimits.from_settings(load_settings())


def raise_open_files_limit() -> tuple[int, int]:
    """Lift the soft limit of open files to the hard one (at most OPEN_FILES_TARGET when the
    hard limit is unlimited); the soft and hard limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            log.warning(
                "could not raise the open files limit",
                extra={"detail": {"soft": soft, "hard": hard}},
            )
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def prepare_serving() -> ClientLimits:
    """At a serving process's start: raise the open-files limit, then log the limits."""
    soft, hard = raise_open_files_limit()
    limits = client_limits()
    log.info(
        "client limits",
        extra={
            "detail": {
                "open_files": soft,
                "open_files_hard": hard,
                "max_connections": limits.max_connections,
                "request_timeout": limits.request_timeout,
            }
        },
    )
    return limits


def _raw_problem(status: int, code: str, detail: str, headers: dict[str, str]) -> bytes:
    """A whole problem+json answer as bytes, closing the connection, for the protocol to
    write itself (no app runs for it)."""
    response = problem(status, code, detail, headers={**headers, "Connection": "close"})
    head = b"".join(name + b": " + value + b"\r\n" for name, value in response.raw_headers)
    return STATUS_LINE[status] + head + b"\r\n" + bytes(response.body)


_OVER_CAPACITY_DETAIL = "the server has as many connections as it takes; try again shortly"
_OVER_CAPACITY_HEADERS = {"Retry-After": str(RETRY_AFTER_SECONDS)}
_OVER_CAPACITY = _raw_problem(503, "over_capacity", _OVER_CAPACITY_DETAIL, _OVER_CAPACITY_HEADERS)
# The same answer as an ASGI app, run instead of Postbag's for a request past the cap.
_REFUSE_OVER_CAPACITY = problem(
    503,
    "over_capacity",
    _OVER_CAPACITY_DETAIL,
    headers={**_OVER_CAPACITY_HEADERS, "Connection": "close"},
)
_TOO_SLOW = _raw_problem(
    408, "request_timeout", "the request did not arrive in time; send it again faster", {}
)


class GuardedProtocol(HttpToolsProtocol):
    """httptools with a head deadline, a whole-request deadline and a connection cap."""

    _head_timer: asyncio.TimerHandle | None = None
    _request_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_too_slow)
        self._request_timer = self.loop.call_later(
            client_limits().request_timeout, self._request_too_slow
        )

    def _disarm(self) -> None:
        self._disarm_head()
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _request_too_slow(self) -> None:
        self._request_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.transport.write(_TOO_SLOW)
            # The app reading the body sees the client gone; whatever it answers is dropped.
            cycle.response_started = cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits = client_limits()
        if len(self.connections) > limits.max_connections + HEALTH_RESERVE:
            transport.write(_OVER_CAPACITY)
            transport.close()
            # Refused: no longer counted, though its closing finishes a little later.
            self.connections.discard(self)
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm_head()
        if len(self.connections) > client_limits().max_connections and not self._asks_health():
            self.app = _REFUSE_OVER_CAPACITY
            self.connections.discard(self)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _asks_health(self) -> bool:
        return self.parser.get_method() == b"GET" and self.url.split(b"?", 1)[0] == b"/health"
