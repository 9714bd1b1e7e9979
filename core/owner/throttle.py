"""Throttling of sign-ins, password-reset links and bad API keys, in Postgres.

Counts live in `auth_failures`, one row per kind, counter and fixed WINDOW (aligned to the
epoch). A counter is an HMAC of what is counted: a client's address (an IPv6 client by its
/64, which one subscriber usually holds whole) or an account. Over a kind's limit the
answer is `429 too_many_attempts` with `Retry-After`, the seconds left in the window.

An attempt is counted in one atomic statement before anything secret is checked
(`count_attempt`), and past a limit it is refused without being checked: N guesses sent at
once cost what N sent one after another do. A success is given back (`forgive`).

- Sign-in (password, with its TOTP or recovery code) counts per client, then per account
  (`sign_in`, `sign_in_account`): an attempt refused for its client is not counted on the
  account. The account's limit is above the client's, so one address guessing never locks a
  member out by itself; guesses from many addresses meet it.
- Password-reset and invitation links count per client (`reset_link`, `invitation_link`):
  each use of a link, given back when the link turns out live.
- API keys count failures only (a valid key costs nothing here and is never throttled, so a
  neighbour behind the same address keeps working); a bad key over the limit is answered
  429 instead of 401.

`count_attempt` and `forgive` are the general throttle: another guessable secret gets a kind
of its own (vocabulary, LIMITS, the table's CHECK) and counts through them.
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
LIMITS: dict[AuthFailureKind, int] = {
    "sign_in": 10,
    "sign_in_account": 20,
    "reset_link": 10,
    "invitation_link": 10,
    "api_key": 20,
}
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


def throttle_account(account: str, key: bytes) -> bytes:
    """The stored stand-in for a throttled account (see `members.sign_in_account`)."""
    return hmac.new(key, f"account {account}".encode(), hashlib.sha256).digest()


def _window(now: datetime) -> tuple[datetime, int]:
    """The start of `now`'s window and the whole seconds left in it (at least 1)."""
    start = WINDOW_EPOCH + WINDOW * ((now - WINDOW_EPOCH) // WINDOW)
    left = math.ceil((start + WINDOW - now).total_seconds())
    return start, max(left, 1)


Counter = tuple[AuthFailureKind, bytes]


@dataclass(frozen=True, slots=True)
class Turn:
    """An attempt as counted: the counters it was counted on and their window, whether it is
    within every limit, and the seconds left in the window."""

    counted: tuple[Counter, ...]
    window_start: datetime
    within: bool
    retry_after: int


async def count_attempt(
    conn: Conn, first: Counter, *, then: Counter | None = None, now: datetime
) -> Turn:
    """Count an attempt before what it tries is checked (one atomic statement): on `first`
    (a client), and on `then` (an account) only when within first's limit, so attempts
    refused for their client use up no account's limit."""
    start, left = _window(now)
    cur = await conn.execute(
        queries["count_attempt"],
        {
            "kind": first[0],
            "client_hash": first[1],
            "window_start": start,
            "limit": LIMITS[first[0]],
            "then_kind": then[0] if then else None,
            "then_hash": then[1] if then else None,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    within = row["failures"] <= LIMITS[first[0]]
    counted: tuple[Counter, ...] = (first,)
    if then is not None and row["then_failures"] is not None:
        counted += (then,)
        within = row["then_failures"] <= LIMITS[then[0]]
    return Turn(counted, start, within, left)


async def forgive(conn: Conn, turn: Turn) -> None:
    """Give back a successful attempt's counts: succeeding never uses up a limit."""
    await conn.execute(
        queries["forgive_attempt"],
        {
            "kinds": [kind for kind, _ in turn.counted],
            "client_hashes": [key for _, key in turn.counted],
            "window_start": turn.window_start,
        },
    )


async def count_sign_in(
    conn: Conn, client: bytes, *, now: datetime, account: bytes | None = None
) -> Turn:
    """Count a sign-in attempt of the client (and, when given, to the account)."""
    then: Counter | None = None if account is None else ("sign_in_account", account)
    return await count_attempt(conn, ("sign_in", client), then=then, now=now)


async def bad_api_key(conn: Conn, client: bytes, *, now: datetime) -> None:
    """Count a bad API key; raise TooManyAttempts when the client is over the limit."""
    turn = await count_attempt(conn, ("api_key", client), now=now)
    if not turn.within:
        raise TooManyAttempts(
            "too many invalid API keys from this address; try again later", turn.retry_after
        )
