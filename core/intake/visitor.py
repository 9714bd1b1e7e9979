"""Who is submitting: the client address (trusting proxies only when configured) and its HMAC.

Raw addresses are never stored; the rate limit and the double-submit rule use
`client_hash`, an HMAC-SHA256 keyed with `POSTBAG_SECRET_KEY` of the IPv4 address, or of
the /64 network of an IPv6 address (one subscriber usually holds a whole /64).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from functools import lru_cache

UNKNOWN_CLIENT = "unknown"


def _parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # "[2001:db8::1]:443"
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # "203.0.113.7:443"
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


@lru_cache(maxsize=8)
def _networks(
    trusted: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The trusted proxies' networks, parsed once per setting (an entry that is not one is
    left out)."""
    networks = []
    for entry in trusted:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            continue
    return tuple(networks)


def _is_trusted(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, trusted: tuple[str, ...]
) -> bool:
    return any(address in network for network in _networks(trusted))


def client_address(peer: str | None, forwarded_for: str | None, trusted_proxies: list[str]) -> str:
    """The submitting client's address.

    `peer` is the connection's address (for a Lambda Function URL, Mangum puts the event's
    `sourceIp` there). `X-Forwarded-For` is believed only when the peer is a trusted proxy;
    then the right-most entry that is not itself a trusted proxy is the client.
    """
    peer_ip = _parse_ip(peer) if peer else None
    if peer_ip is None:
        return UNKNOWN_CLIENT
    trusted = tuple(trusted_proxies)
    if not forwarded_for or not trusted or not _is_trusted(peer_ip, trusted):
        return str(peer_ip)
    for hop in reversed(forwarded_for.split(",")):
        hop_ip = _parse_ip(hop)
        if hop_ip is None:
            break
        if not _is_trusted(hop_ip, trusted):
            return str(hop_ip)
    return str(peer_ip)


def counted_client(address: str) -> str:
    """What the rate limit counts as one client: the IPv4 address, an IPv6 address's /64
    (an IPv4-mapped IPv6 address is its IPv4 address)."""
    parsed = _parse_ip(address)
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return address


def client_hash(address: str, key: bytes) -> bytes:
    """The stored stand-in for a client: HMAC-SHA256(secret key, `counted_client`)."""
    return hmac.new(key, counted_client(address).encode(), hashlib.sha256).digest()


# Domains whose mailboxes ignore dots in the local part (one mailbox, many spellings).
_DOTLESS_DOMAINS = {"gmail.com": "gmail.com", "googlemail.com": "gmail.com"}


def mailbox(address: str) -> str:
    """The mailbox an address reaches, as the acknowledgement cap counts it: lower case,
    without a `+tag` (every provider that has tags delivers them to the untagged box), and
    for Gmail without dots in the local part (`a.b+1@googlemail.com` is `ab@gmail.com`)."""
    local, at, domain = address.strip().lower().rpartition("@")
    if not at:
        return address.strip().lower()
    local = local.split("+", 1)[0]
    if domain in _DOTLESS_DOMAINS:
        local, domain = local.replace(".", ""), _DOTLESS_DOMAINS[domain]
    return f"{local}@{domain}"


def recipient_hash(address: str, key: bytes) -> bytes:
    """The stand-in for an acknowledgement's recipient mailbox in its daily count."""
    return hmac.new(key, b"ack:" + mailbox(address).encode(), hashlib.sha256).digest()
