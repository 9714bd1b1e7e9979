"""The SSRF guard: resolve a webhook host once, refuse non-public addresses, pin the result.

The request then goes to the checked address itself (the URL's host replaced by the IP,
with the `Host` header and TLS SNI set to the real name), so a DNS answer that changes
between the check and the connect (rebinding) cannot reach an internal address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

# Ranges `is_global` lets through but no webhook receiver lives in.
_ALSO_REFUSED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "100.64.0.0/10",  # carrier-grade NAT
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/96",  # IPv4-compatible IPv6 (deprecated)
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT)
        "64:ff9b:1::/48",  # local-use NAT64
        "2001:db8::/32",  # documentation
        "3ffe::/16",  # the 6bone (returned)
        "5f00::/16",  # SRv6 segment identifiers
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


MAX_URL_LENGTH = 2048
# Control characters and white space, anywhere in a URL (CR/LF could split a request line).
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
# A host name: labels of letters, digits, hyphens and underscores (a name in another script
# is checked in its IDNA `xn--` form); an IP literal passes through `ipaddress` instead.
_HOST_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?")


def check_target_url(value: str, *, allow_private: bool) -> str:
    """The rule for a URL Postbag posts to, checked when it is saved: `https://` (http too
    when private targets are allowed), a host, no user name or password, and no literal
    private address. Raises ValueError with the rule, never the value."""
    if len(value) > MAX_URL_LENGTH:
        raise ValueError(f"must be at most {MAX_URL_LENGTH} characters")
    if _UNSAFE.search(value):
        raise ValueError("must not contain spaces or control characters (encode them: %20)")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port refuses a malformed one
    except ValueError:
        raise ValueError("must be a well-formed URL") from None
    allowed = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in allowed:
        raise ValueError("must be an https:// URL")
    if not parts.hostname:
        raise ValueError("must name a host")
    if not _is_ip(parts.hostname) and not _HOST_NAME.fullmatch(_ascii_host(parts.hostname)):
        raise ValueError("must name a host by its DNS name (letters, digits, hyphens) or address")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain a user name or password")
    if not allow_private:
        try:
            address = ipaddress.ip_address(parts.hostname)
        except ValueError:
            address = None
        if address is not None and refused(address):
            raise ValueError("must not target a private, loopback or link-local address")
    return value


def _ascii_host(host: str) -> str:
    """The host in ASCII (IDNA for a name in another script); '' when it has no such form."""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return ""


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def url_origin(url: str) -> str:
    """`scheme://host[:port]` of a URL without its user info; an IPv6 host keeps its
    brackets (`https://[2001:db8::1]:8443`)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


class TargetRefused(Exception):
    """The webhook host resolves to an address Postbag must not connect to."""


class ResolutionFailed(Exception):
    """The webhook host did not resolve (a retryable DNS failure)."""


def refused(address: IPAddress) -> bool:
    """Whether an address is loopback, private, link-local, CGNAT, multicast, documentation…"""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return refused(embedded)
        if address.teredo is not None:
            return True
    if any(address in net for net in _ALSO_REFUSED if net.version == address.version):
        return True
    return (
        not address.is_global
        or address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
    )


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the operating system's resolver gives for `host`."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ResolutionFailed(str(exc)) from exc
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


@dataclass(frozen=True, slots=True)
class PinnedTarget:
    """Where to connect (`url` with the checked IP), and the name to present (Host, SNI)."""

    url: str
    host_header: str | None
    sni_hostname: str | None


async def pin(url: str, *, resolver: Resolver, allow_private: bool) -> PinnedTarget:
    """Check `url`'s host and return the request target pinned to a checked address.

    Raises TargetRefused when the host or any address it resolves to is not public, and
    ResolutionFailed when it does not resolve. With `allow_private` nothing is checked.
    """
    try:
        # The rule a URL is saved under; a row saved before a rule existed meets it here.
        check_target_url(url, allow_private=True)
    except ValueError as exc:
        raise TargetRefused(str(exc)) from None
    parts = urlsplit(url)
    if allow_private:
        return PinnedTarget(url, None, None)
    if parts.scheme != "https":
        raise TargetRefused("only https:// targets are allowed")
    host = parts.hostname or ""  # never empty: the rule above requires a host
    port = parts.port or 443
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        if refused(literal):
            raise TargetRefused(f"{host} is not a public address")
        return PinnedTarget(url, None, None)
    addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in await resolver(host, port)]
    if not addresses:
        raise ResolutionFailed(f"{host} has no address")
    # One non-public answer refuses the host: a name that mixes public and internal
    # addresses is a rebinding attempt, not a receiver.
    if any(refused(address) for address in addresses):
        raise TargetRefused(f"{host} resolves to a non-public address")
    chosen = addresses[0]
    ip_host = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    netloc = ip_host if parts.port is None else f"{ip_host}:{parts.port}"
    pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    return PinnedTarget(pinned, host_header, host)
