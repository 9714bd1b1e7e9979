"""A real OpenID Connect provider for the SSO tests: the `oidc-provider` npm package
(`oidc_provider.mjs`, installed by local/test into .venv/node) started as a Node process on
a free loopback port, with two clients and keys it can rotate; and the browser's part of a
sign-in (following the provider's redirects, its login and consent being automatic)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from joserfc.jwk import RSAKey

from core.owner.sso import CALLBACK_PATH
from tests.support.dashboard import DashboardClient, csrf_of

ROOT = Path(__file__).parents[2]
NODE_MODULES = ROOT / ".venv" / "node" / "node_modules"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
REDIRECT_URI = "http://127.0.0.1:8080" + CALLBACK_PATH


@dataclass
class OidcProvider:
    """A running provider: its issuer, its clients (id to secret), its signing keys."""

    issuer: str
    clients: dict[str, str]
    keys: list[RSAKey]
    next_keys: list[RSAKey]
    process: subprocess.Popen[str] = field(repr=False)

    async def rotate(self) -> None:
        """A new key signs from now on (the old one stays published)."""
        async with httpx.AsyncClient() as client:
            assert (await client.post(f"{self.issuer}/__rotate")).status_code == 204
        self.keys.insert(0, self.next_keys.pop(0))

    async def disable(self, email: str) -> None:
        """The person may no longer sign in: the provider refuses their refresh."""
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{self.issuer}/__disable", params={"email": email})
            assert answer.status_code == 204

    def settings(self, client_id: str, domains: list[str], **more: Any) -> dict[str, Any]:
        """What `PUT /v1/organization/sso` takes for one of the clients."""
        return {
            "issuer": self.issuer,
            "client_id": client_id,
            "client_secret": self.clients[client_id],
            "allowed_domains": domains,
            **more,
        }


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@contextlib.contextmanager
def running_provider(tmp_path: Path) -> Iterator[OidcProvider]:
    """oidc-provider with clients `postbag-a` and `postbag-b`, for a test's fixture; the test
    is skipped where Node or the package is missing (local/test installs it)."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "oidc-provider").is_dir():
        pytest.skip("node or .venv/node/node_modules/oidc-provider is missing (see local/test)")
    clients = {"postbag-a": "secret-a-" + "x" * 32, "postbag-b": "secret-b-" + "y" * 32}
    keys, next_keys = [_key("k1")], [_key("k2")]
    config = {
        "clients": [
            {
                "client_id": client_id,
                "client_secret": secret,
                "redirect_uris": [REDIRECT_URI],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_post",
            }
            for client_id, secret in clients.items()
        ],
        "keys": [key.as_dict(private=True) for key in keys],
        "next_keys": [key.as_dict(private=True) for key in next_keys],
    }
    path = tmp_path / "oidc.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    log = (tmp_path / "oidc.log").open("w")
    process = subprocess.Popen(
        [node, str(SCRIPT), str(NODE_MODULES), str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NODE_ENV": "test"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening "), (tmp_path / "oidc.log").read_text()
        yield OidcProvider(line.split()[1], clients, keys, next_keys, process)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        log.close()


async def sso_redirect(dashboard: DashboardClient, email: str) -> httpx.Response:
    """The sign-in page's "Sign in with SSO" for `email`: Postbag's answer (303 to the
    provider when the domain signs in somewhere)."""
    page = await dashboard.get("/app/sign-in")
    return await dashboard.post("/app/sso", data={"email": email, "csrf": csrf_of(page.text)})


async def through_provider(url: str) -> str:
    """Follow the provider's redirects (its automatic login and consent) from the
    authorization request to the redirect back to Postbag; that address."""
    async with httpx.AsyncClient() as browser:
        for _ in range(10):
            answer = await browser.get(url)
            assert answer.status_code in (302, 303), answer.text
            url = str(answer.headers["location"])
            if url.startswith(REDIRECT_URI):
                return url
            if not urlsplit(url).netloc:
                url = str(answer.url.join(url))
    raise AssertionError("the provider never redirected back")


async def sso_sign_in(dashboard: DashboardClient, email: str) -> httpx.Response:
    """A whole sign-in with SSO; Postbag's answer to the provider's redirect back."""
    started = await sso_redirect(dashboard, email)
    assert started.status_code == 303, started.text
    back = await through_provider(started.headers["location"])
    parts = urlsplit(back)
    return await dashboard.get(f"{parts.path}?{parts.query}")
