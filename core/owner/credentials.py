"""What a member proves who they are with: argon2id passwords, one-time tokens, TOTP codes
and recovery codes. Pure, apart from hashing in a thread; nothing here stores or logs.

A token (invitation, reset, sign-in link, session) is 256 random bits: its SHA-256 is what
the database keeps. A reset link's token is sealed from a random nonce its queued email
keeps and the installation's secret key (`core.destinations.email.sealed_token`), so no
stored row holds a live token.
A password is hashed with argon2id at the installation's cost
(`POSTBAG_PASSWORD_HASH_COST`: RFC 9106's low-memory profile; `test_only` for the suite).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from datetime import datetime

import pyotp
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from argon2.profiles import RFC_9106_LOW_MEMORY

from core.platform.settings import PasswordHashCost

MIN_PASSWORD = 10
MAX_PASSWORD = 200
RECOVERY_CODES = 10
TOTP_ISSUER = "Postbag"

_HASHERS: dict[PasswordHashCost, PasswordHasher] = {
    "standard": PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY),
    "test_only": PasswordHasher(time_cost=1, memory_cost=8, parallelism=1),
}
# Checked against when the address is unknown, so an answer takes as long either way. Not
# on Services: a memo of one hash per cost, with nothing to close and nothing per process.
_STAND_IN: dict[PasswordHashCost, str] = {}


def new_token() -> str:
    """A one-time token for a link or a cookie."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
    """The stored form of a token (256 random bits: a plain hash suffices)."""
    return hashlib.sha256(token.encode()).digest()


def reset_address_hash(key: bytes, address: str) -> bytes:
    """The stand-in for an address a password reset was asked for, in its count: an HMAC
    under the installation's secret key, in any case (as members' addresses compare)."""
    return hmac.new(key, b"reset:" + address.lower().encode(), hashlib.sha256).digest()


def password_problem(password: str) -> str | None:
    """Why `password` cannot be a member's password, or None."""
    if len(password) < MIN_PASSWORD:
        return f"a password has at least {MIN_PASSWORD} characters"
    if len(password) > MAX_PASSWORD:
        return f"a password has at most {MAX_PASSWORD} characters"
    return None


async def hash_password(password: str, cost: PasswordHashCost) -> str:
    """argon2id of `password` (a PHC string), computed off the event loop."""
    return await asyncio.to_thread(_HASHERS[cost].hash, password)


async def password_matches(stored: str | None, password: str, cost: PasswordHashCost) -> bool:
    """Whether `password` matches `stored`; with none stored, as slow as a real check."""
    hasher = _HASHERS[cost]
    if stored is None:
        if cost not in _STAND_IN:
            _STAND_IN[cost] = await asyncio.to_thread(hasher.hash, new_token())
        stored = _STAND_IN[cost]
        password = ""

    def check() -> bool:
        try:
            return hasher.verify(stored, password)
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(check) and bool(password)


def new_totp_secret() -> str:
    return pyotp.random_base32()


def totp_uri(secret: str, email: str) -> str:
    """The `otpauth://` URI an authenticator app reads (as a QR code or typed)."""
    return pyotp.TOTP(secret).provisioning_uri(name=email, issuer_name=TOTP_ISSUER)


def totp_step(secret: str, code: str, now: datetime) -> int | None:
    """The time step whose code `code` is: the secret's current one, or the one just before
    or after (the latest when two share a code); None when it is none of them."""
    code = code.replace(" ", "")
    if len(code) != 6 or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret)
    current = totp.timecode(now)
    for step in (current + 1, current, current - 1):
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def new_recovery_codes() -> list[str]:
    """Ten codes like `k3p9-x2mw-7hqa`, each usable once instead of a TOTP code."""
    alphabet = "23456789abcdefghjkmnpqrstuvwxyz"
    return [
        "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(3))
        for _ in range(RECOVERY_CODES)
    ]


def recovery_hash(code: str) -> bytes:
    """The stored form of a recovery code, as typed in any case, with or without spaces."""
    return token_hash(code.strip().lower().replace(" ", ""))
