"""Throttling of failed sign-ins and bad API keys, per client, in Postgres.

Counts live in `auth_failures`, one row per kind, client and fixed WINDOW (aligned to the
epoch), keyed by an HMAC of the client's address (an IPv6 client by its /64, which one
subscriber usually holds whole). Over the kind's limit the client gets `429
too_many_attempts` with `Retry-After`, the seconds left in the window.

- Sign-in counts every attempt before the key is checked, in one atomic upsert, and gives
  a successful one back. Past LIMITS["sign_in"] in a window an attempt's key is checked only
  after OVER_LIMIT_DELAY, without holding a database connection meanwhile: a valid key
  still signs in (others behind the same address are never locked out by whoever guesses
  there), a wrong one is answered 429 with `Retry-After`. Guessing stays slow; a key's 256
  random bits are what make it hopeless.
- API keys count failures only (a valid key costs nothing here and is never throttled, so a
  neighbour behind the same address keeps working); a bad key over the limit is answered
  429 instead of 401.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.platform.db import Conn
from core.platform.errors import TooManyAttempts
from core.platform.queries import queries
from core.platform.vocabulary import AuthFailureKind

WINDOW = timedelta(minutes=10)
# How long an attempt past the limit waits before its key is checked (seconds).
OVER_LIMIT_DELAY = 2.0
LIMITS: dict[AuthFailureKind, int] = {"sign_in": 10, "api_key": 20}
WINDOW_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def throttle_client(address: str, key: bytes) -> bytes:
    """The stored stand-in for a throttled client: HMAC-SHA256 (secret key) of its address,
    or of its /64."""
    name = address
    try:
        if ipaddress.ip_address(address).version == 6:
            name = str(ipaddress.ip_network(f"{address}/64", strict=False))
    except ValueError:
        pass
    return hmac.new(key, name.encode(), hashlib.sha256).digest()


def _window(now: datetime) -> tuple[datetime, int]:
    """The start of `now`'s window and the whole seconds left in it (at least 1)."""
    start = WINDOW_EPOCH + WINDOW * ((now - WINDOW_EPOCH) // WINDOW)
    left = math.ceil((start + WINDOW - now).total_seconds())
    return start, max(left, 1)


async def _count(conn: Conn, kind: AuthFailureKind, client: bytes, start: datetime) -> int:
    cur = await conn.execute(
        queries["count_auth_failure"],
        {"kind": kind, "client_hash": client, "window_start": start},
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["failures"])


def _refused(kind: AuthFailureKind, retry_after: int) -> TooManyAttempts:
    what = "failed sign-ins" if kind == "sign_in" else "invalid API keys"
    return TooManyAttempts(f"too many {what} from this address; try again later", retry_after)


@dataclass(frozen=True, slots=True)
class SignInTurn:
    """A sign-in attempt as counted: whether it is within the client's limit, and the
    seconds left in the window."""

    within: bool
    retry_after: int


async def count_sign_in(conn: Conn, client: bytes, *, now: datetime) -> SignInTurn:
    """Count a sign-in attempt before its key is checked (one atomic upsert)."""
    start, left = _window(now)
    return SignInTurn(await _count(conn, "sign_in", client, start) <= LIMITS["sign_in"], left)


async def forgive_sign_in(conn: Conn, client: bytes, *, now: datetime) -> None:
    """Give back a successful sign-in's count: signing in never uses up the limit."""
    start, _ = _window(now)
    await conn.execute(
        queries["forgive_auth_attempt"],
        {"kind": "sign_in", "client_hash": client, "window_start": start},
    )


def refused_sign_in(turn: SignInTurn) -> TooManyAttempts:
    """What an attempt over the limit whose key was not valid is answered."""
    return _refused("sign_in", turn.retry_after)


async def bad_api_key(conn: Conn, client: bytes, *, now: datetime) -> None:
    """Count a bad API key; raise TooManyAttempts when the client is over the limit."""
    start, left = _window(now)
    if await _count(conn, "api_key", client, start) > LIMITS["api_key"]:
        raise _refused("api_key", left)
