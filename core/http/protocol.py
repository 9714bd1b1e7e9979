"""The production HTTP protocol: uvicorn's httptools protocol with a header-read timeout.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive`, but it waits
forever for a request's head: a client sending its headers a byte at a time (slowloris)
holds a connection open as long as it likes. Here a request's head must be complete
within HEADER_READ_TIMEOUT seconds of the connection opening (or of the request's first
byte, on a kept-alive connection); otherwise the connection is closed unanswered.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_READ_TIMEOUT = 10.0


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """httptools, refusing to wait more than HEADER_READ_TIMEOUT for a request's head."""

    _head_timer: asyncio.TimerHandle | None = None

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(HEADER_READ_TIMEOUT, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        super().on_headers_complete()
