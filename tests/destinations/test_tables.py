"""The table-like types' credentials (Airtable, Notion, Google Sheets) are held to their
vendor's shape when a destination is made and when its secret is replaced: a malformed one
(a line break, a space, a control character, another prefix, over-long; a NUL inside a
Google credential's JSON) is `422 invalid_secret` and stored nowhere, rather than met by a
send. A NUL in any body is `422 unstorable_value` before the type's check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import make_tenant
from tests.support.records import rows
from tests.support.vendors import (
    AIRTABLE_BASE,
    AIRTABLE_TOKEN,
    NOTION_DATABASE,
    NOTION_TOKEN,
    SPREADSHEET,
    refresh_token_credential,
    service_account_key,
)


def _spoilt(token: str) -> list[str]:
    """`token` with what no vendor's token holds."""
    return [
        token + "\n",
        token[:24] + "\r\nX-Injected: 1" + token[24:],
        token[:24] + " " + token[24:],
        token[:24] + "\x7f" + token[24:],
        token[:24] + "é" + token[24:],
        token + "a" * 200,
    ]


def _credentials(**changed: str) -> str:
    return json.dumps(json.loads(refresh_token_credential()) | changed)


_SERVICE = json.loads(service_account_key())
CASES: dict[str, tuple[dict[str, Any], str, list[str]]] = {
    "airtable": (
        {"base_id": AIRTABLE_BASE, "table": "Submissions"},
        AIRTABLE_TOKEN,
        [*_spoilt(AIRTABLE_TOKEN), "key" + AIRTABLE_TOKEN[3:], "pat.short"],
    ),
    "notion": (
        {"database_id": NOTION_DATABASE},
        NOTION_TOKEN,
        [*_spoilt(NOTION_TOKEN), "ntnx" + NOTION_TOKEN[4:], "secret_"],
    ),
    "google_sheets": (
        {"spreadsheet_id": SPREADSHEET, "sheet": "Responses"},
        refresh_token_credential(),
        [
            _credentials(refresh_token="1//0refresh\x00token"),
            _credentials(client_secret="GOCSPX-client\nsecret"),
            _credentials(client_id="1234 abc.apps.googleusercontent.com"),
            _credentials(refresh_token="1//0" + "r" * 600),
            _credentials(client_id=""),
            json.dumps(_SERVICE | {"client_email": "writer@acme.iam\r\n.example.com"}),
        ],
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_tables__a_malformed_credential_is_refused_when_made_and_when_replaced(
    kind: str, services: Services, conn: Conn
) -> None:
    config, good, malformed = CASES[kind]
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        for secret in malformed:
            body = {"type": kind, "name": "Table", "config": config, "secret": secret}
            refused = await client.post("/v1/destinations", json=body, headers=acme.headers)
            assert_problem(refused, 422, "invalid_secret")
            assert refused.json()["errors"][0]["field"] == "secret"
        made = await create(
            client,
            acme,
            "/v1/destinations",
            {"type": kind, "name": "Table", "config": config, "secret": good},
        )
        for secret in malformed:
            refused = await client.patch(
                f"/v1/destinations/{made['id']}", json={"secret": secret}, headers=acme.headers
            )
            assert_problem(refused, 422, "invalid_secret")
        if kind != "google_sheets":
            # A NUL in a body is refused before any check of its type.
            body = {"type": kind, "name": "Table", "config": config, "secret": good + "\x00"}
            refused = await client.post("/v1/destinations", json=body, headers=acme.headers)
            assert_problem(refused, 422, "unstorable_value")
    assert await rows(conn, "SELECT destination_id, version FROM destination_secrets") == [
        {"destination_id": made["id"], "version": 1}
    ]
