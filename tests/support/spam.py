"""What the spam tests share: a tenant with a form whose spam settings are set through
`/v1`, a post through `POST /s/{form}` that returns the stored status and reason, an
address where no service answers, and the rules' worst cases."""

from __future__ import annotations

import socket
from typing import Any

import httpx

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import Tenant, make_tenant
from tests.support.records import rows

JSON_ACCEPT = {"Accept": "application/json"}
# The catastrophic pattern of issue 44: linear on its engine, but seconds of CPU on 65,000
# letters without a digit; and those letters (CJK, so a word is a whole run of them).
CATASTROPHIC = r"(?:\p{L}{5}){38}\d"
LETTERS = "".join(chr(0x4E00 + n % 2000) for n in range(65_000))
# 500 blocked words, none of which such a post holds.
MANY_WORDS = [f"blocked{n:03d} phrase{n:03d}" for n in range(500)]


async def spam_form(
    services: Services, conn: Conn, spam: dict[str, Any] | None = None, **fields: Any
) -> tuple[Tenant, str]:
    """A new tenant (plan `self_hosted`) and a form made through `/v1` with these spam
    settings and a rate limit that never applies."""
    tenant = await make_tenant(conn, plan="self_hosted")
    body: dict[str, Any] = {"name": "Contact", "rate_limit": {"max": 10_000}, **fields}
    if spam is not None:
        body["spam"] = spam
    async with api_client(services) as api:
        form = await create(api, tenant, "/v1/forms", body)
    return tenant, str(form["id"])


async def stored(
    client: httpx.AsyncClient,
    conn: Conn,
    form: str,
    values: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[str, str | None]:
    """Post `values` as JSON; the (status, reason) the submission was stored with."""
    response = await client.post(
        f"/s/{form}", json=values, headers={**JSON_ACCEPT, **(headers or {})}
    )
    assert response.status_code == 201, response.text
    [row] = await rows(
        conn,
        "SELECT status, reason FROM submissions WHERE id = %(id)s",
        id=response.json()["receipt"],
    )
    return row["status"], row["reason"]


def closed_port_url() -> str:
    """A loopback URL where nothing listens (the service does not answer at all)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/check"
