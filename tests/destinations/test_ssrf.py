from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from core.destinations import http
from core.destinations.ssrf import PinnedTarget, ResolutionFailed, TargetRefused, pin, refused
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.services import Services
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.peers import receiver
from tests.support.records import delivery
from tests.support.settings import with_settings


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
        "fec0::1",
        "feff::1",
        "::8.8.8.8",
        "::ffff:0:808:808",
        "64:ff9b:1::1",
        "3ffe::1",
        "5f00::1",
        "192.88.99.1",
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
        "https://example.com/h\r\nX-Injected: 1",
        "https://exa mple.com/h",
        "https://ex%0aample.com/h",
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
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
        worker = Deliverer(
            strict, options=WorkerOptions(timeout=1), resolver=resolver_to("127.0.0.1")
        )
        await worker.run_pass(now=utcnow(), budget=5)
    assert peer.requests == []
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["attempts"]) == ("dead", "invalid_target", 1)


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name`: (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_post__pinned_address_presents_and_verifies_the_real_name(tmp_path: Path) -> None:
    cert_file, key_file = _certificate(tmp_path, "hooks.example.com")
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert_file, key_file)
    names: list[str | None] = []

    def record_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(name)

    server_tls.sni_callback = record_name
    trusting = ssl.create_default_context(cafile=str(cert_file))
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusting))
    try:
        with receiver(tls=server_tls) as peer:
            # The request goes to the checked address, named as the URL's host.
            result = await http.post(
                session,
                f"{peer.url}/h",
                content=b"{}",
                headers={"Host": "hooks.example.com"},
                timeout=5,
                server_hostname="hooks.example.com",
            )
            # A certificate that is not the name's is refused.
            other = await http.post(
                session,
                f"{peer.url}/h",
                content=b"{}",
                headers={"Host": "other.example.com"},
                timeout=5,
                server_hostname="other.example.com",
            )
    finally:
        await session.close()
    assert (result.ok, result.http_status) == (True, 200)
    [request] = peer.requests
    assert request.headers["Host"] == "hooks.example.com"
    assert names == ["hooks.example.com", "other.example.com"]
    assert (other.ok, other.retryable, other.error_class) == (False, True, "connection_error")
