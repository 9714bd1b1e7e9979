from __future__ import annotations

import ipaddress

import pytest

from core.deliver import Deliverer, WorkerOptions
from core.services import Services, utcnow
from core.ssrf import PinnedTarget, ResolutionFailed, TargetRefused, pin, refused
from tests.outbox_support import (
    close_http,  # noqa: F401
    delivery,
    make_delivery,
    make_destination,
    make_tenant,
    with_settings,
)
from tests.peers import receiver


def resolver_to(*addresses: str):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "198.51.100.7",
        "203.0.113.9",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
    ],
)
def test_refused__non_public_addresses(address: str) -> None:
    assert refused(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700::1111"])
def test_refused__public_addresses_pass(address: str) -> None:
    assert not refused(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/h",
        "https://10.0.0.1/h",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/h",
        "https://[::ffff:127.0.0.1]/h",
        "http://example.com/h",
        "https://user:pw@example.com/h",
    ],
)
async def test_pin__refuses_literal_and_unsafe_urls(url: str) -> None:
    with pytest.raises(TargetRefused):
        await pin(url, resolver=resolver_to("93.184.215.14"), allow_private=False)


async def test_pin__hostname_resolving_to_loopback_is_refused() -> None:
    with pytest.raises(TargetRefused):
        await pin(
            "https://hooks.example.com/h", resolver=resolver_to("127.0.0.1"), allow_private=False
        )


async def test_pin__one_internal_answer_among_public_ones_is_refused() -> None:
    resolver = resolver_to("93.184.215.14", "10.1.2.3")
    with pytest.raises(TargetRefused):
        await pin("https://hooks.example.com/h", resolver=resolver, allow_private=False)


async def test_pin__connects_to_the_checked_address_with_the_real_name() -> None:
    target = await pin(
        "https://hooks.example.com:8443/h?a=1",
        resolver=resolver_to("93.184.215.14"),
        allow_private=False,
    )
    assert target == PinnedTarget(
        "https://93.184.215.14:8443/h?a=1", "hooks.example.com:8443", "hooks.example.com"
    )
    v6 = await pin(
        "https://hooks.example.com/h", resolver=resolver_to("2606:4700::1111"), allow_private=False
    )
    assert v6.url == "https://[2606:4700::1111]/h"


async def test_pin__no_answer_is_a_retryable_failure() -> None:
    with pytest.raises(ResolutionFailed):
        await pin("https://hooks.example.com/h", resolver=resolver_to(), allow_private=False)


async def test_pin__private_targets_allowed_in_development() -> None:
    target = await pin("http://127.0.0.1:9/h", resolver=resolver_to(), allow_private=True)
    assert target.url == "http://127.0.0.1:9/h"


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:{port}/h",
        "https://10.0.0.1/h",
        "https://169.254.169.254/h",
        "https://[::1]:{port}/h",
        "https://[::ffff:127.0.0.1]:{port}/h",
        "https://receiver.test:{port}/h",
    ],
)
async def test_deliver__refused_target_is_dead_invalid_target(
    services: Services,
    conn,
    url: str,  # type: ignore[no-untyped-def]
) -> None:
    strict = with_settings(services, allow_private_targets=False)
    with receiver() as peer:
        url = url.format(port=peer.port)
        tenant = await make_tenant(conn)
        dst, rte = await make_destination(conn, tenant, config={"url": url})
        _, dlv = await make_delivery(conn, tenant, dst, rte, target={"url": url})
        worker = Deliverer(
            strict, options=WorkerOptions(timeout=1), resolver=resolver_to("127.0.0.1")
        )
        await worker.run_pass(now=utcnow(), budget=5)
    assert peer.requests == []
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["attempts"]) == ("dead", "invalid_target", 1)
