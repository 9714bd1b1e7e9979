"""The development mailbox (`POSTBAG_EMAIL_PROVIDER=dev`, the default of `postbag dev`):
every email the process would send is caught here instead, in memory, and shown on
`/app/dev/mail` (docs/dashboard.md#the-development-mailbox).

One process's mailbox: `postbag dev` serves the dashboard and runs the worker in one
process, so an invitation, a password reset, a notice and an email destination's delivery
all land in the same place. It keeps the last CAUGHT messages; a restart empties it.
`production_settings` refuses the `dev` provider, so a production process never has one.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from core.platform.clock import utcnow

# How many messages the mailbox keeps, newest first (the oldest go).
CAUGHT = 200


@dataclass(frozen=True, slots=True)
class CaughtMail:
    """One email caught instead of sent: its key (a delivery's or an invitation's id)."""

    key: str
    to: tuple[str, ...]
    subject: str
    text: str
    reply_to: str | None
    at: datetime


_caught: deque[CaughtMail] = deque(maxlen=CAUGHT)
_lock = threading.Lock()


def catch(key: str, to: list[str], subject: str, text: str, reply_to: str | None) -> None:
    """Keep one email in the mailbox (a retried delivery's copy replaces nothing: each
    attempt that reached the mailbox was a message the process sent)."""
    with _lock:
        _caught.appendleft(CaughtMail(key, tuple(to), subject, text, reply_to, utcnow()))


def caught() -> list[CaughtMail]:
    """The messages caught, newest first."""
    with _lock:
        return list(_caught)
