"""Installation mail in tests: the app sending through the test's SMTP peer, and the
one-time links its emails hold."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope

from core.platform.services import Services
from tests.support.peers import free_port
from tests.support.settings import SENDER, with_settings

# The `smtp_server` fixture: the peer's URL and the envelopes it received.
Smtp = tuple[str, list[Envelope]]


class Inbox:
    """An SMTP peer's handler: refuses `nobody@…`, keeps the rest in `received`."""

    def __init__(self) -> None:
        self.received: list[Envelope] = []

    async def handle_RCPT(
        self, _server: Any, _session: Any, envelope: Envelope, address: str, _options: Any
    ) -> str:
        if address.startswith("nobody@"):
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Envelope) -> str:
        self.received.append(envelope)
        return "250 Message accepted for delivery"


@contextmanager
def smtp_peer(handler: Any) -> Iterator[str]:
    """A real SMTP server on loopback (aiosmtpd) answering with `handler`; its URL."""
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{port}"
    finally:
        controller.stop()


def mailed(services: Services, smtp: Smtp) -> Services:
    """The services sending email through the test's SMTP peer."""
    return with_settings(services, email_provider="smtp", smtp_url=smtp[0], mail_from=SENDER)


def link_in(envelope: Envelope, path: str) -> str:
    """The path of the one-time link under `path` (`/app/invitations/`, `/app/reset/`) that
    an email holds."""
    text = message_from_bytes(bytes(envelope.content)).get_payload(decode=True).decode()
    found = re.search(rf"http://127\.0\.0\.1:8080({re.escape(path)}[\w-]+)", text)
    assert found, text
    return found.group(1)
