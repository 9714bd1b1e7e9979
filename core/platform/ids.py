"""Prefixed, time-ordered identifiers (`sub_01hx…`): 48 bits of milliseconds, 80 random."""

from __future__ import annotations

import re
import secrets
import time

PREFIXES = frozenset(
    {"org", "key", "frm", "dst", "rte", "sub", "dlv", "att", "dgs", "alr", "rpl"}
    | {"str", "sky", "evt", "srt"}  # streams, ingest keys, stream events, stream routes
    | {"aud"}  # audit rows
    | {"mem", "inv", "ses"}  # members, invitations, dashboard sessions
    | {"hok"}  # REST hooks
)
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
ID_LENGTH = 26
# Every pair of digits, for ten bits at a time: an id is 13 pairs (26 digits, 130 bits).
_PAIRS = tuple(a + b for a in _ALPHABET for b in _ALPHABET)
_PAIR_SHIFTS = tuple(range(10 * (ID_LENGTH // 2 - 1), -1, -10))
_SHAPE = re.compile(rf"[a-z]{{3}}_[{_ALPHABET}]{{{ID_LENGTH}}}")


def is_id(value: str, prefix: str) -> bool:
    """Whether `value` has the shape of an id made by `new_id(prefix)`: checked before any
    query, so a malformed id (NUL, another alphabet, any length) never reaches the database."""
    return value.startswith(f"{prefix}_") and _SHAPE.fullmatch(value) is not None


def id_pattern(prefix: str) -> str:
    """The regular expression of an id made by `new_id(prefix)` (for a model's field)."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return rf"^{prefix}_[{_ALPHABET}]{{{ID_LENGTH}}}$"


def new_id(prefix: str, *, now_ms: int | None = None) -> str:
    """Return a new id for `prefix`; ids made later sort after ids made earlier."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    millis = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return _encoded(prefix, (millis << 80) | secrets.randbits(80))


def id_bound(prefix: str, millis: int) -> str:
    """The least id `new_id(prefix)` makes in the millisecond `millis` (its random part
    zero): every id made then or later sorts at or after it, byte by byte."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return _encoded(prefix, max(millis, 0) << 80)


def _encoded(prefix: str, value: int) -> str:
    return f"{prefix}_{''.join([_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])}"
