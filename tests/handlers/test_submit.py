from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from core.platform.db import Conn
from tests.support.builders import setup_form
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY, built_services
from tests.support.submit import submit_client

FORM_ID = "frm_01j1ambda0mv1t1part0000000"


async def _stored(conn: Conn) -> list[dict[str, object]]:
    return await rows(
        conn,
        'SELECT s.status, s.reason, s."values", s.client_hash, a.name, a.content_type, a.size '
        "FROM submissions s JOIN attachments a ON a.submission_id = s.id ORDER BY s.received_at",
    )


async def test_submit_handler__function_url_multipart_event_matches_http(
    db_url: str, tmp_path: Path, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    await setup_form(
        conn,
        id=FORM_ID,
        allowed_origins=["https://site.example"],
        file_fields={"notes": {"types": [".txt"]}},
    )
    event = load_event("function_url_post_submit_multipart.json")
    [response] = invoke(
        "submit",
        [event],
        FakeContext(),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'lambda-files'}",
    )
    assert response["statusCode"] == 201
    assert response["headers"]["access-control-allow-origin"] == "https://site.example"
    lambda_body = json.loads(response["body"])
    assert lambda_body["status"] == "received"
    lambda_row = (await _stored(conn))[0]

    # The same request over HTTP, from the same source address: an identical payload from
    # the same client within 60 s is the same submission.
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services, client=("203.0.113.7", 443)) as client,
    ):
        http = await client.post(
            f"/s/{FORM_ID}",
            content=base64.b64decode(event["body"]),
            headers={k: v for k, v in event["headers"].items() if k != "host"},
        )
    assert http.status_code == 200
    assert http.json() == {**lambda_body, "duplicate": True}
    assert await _stored(conn) == [lambda_row]
    assert lambda_row["values"] == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "topics": ["engines", "poetry"],
    }
    assert (lambda_row["name"], lambda_row["content_type"]) == ("notes.txt", "text/plain")

    # A different source address is another client: over HTTP it is a new submission with
    # the same stored result.
    async with (
        built_services(db_url, tmp_path) as services,
        submit_client(services, client=("198.51.100.99", 1)) as other,
    ):
        fresh = await other.post(
            f"/s/{FORM_ID}",
            content=base64.b64decode(event["body"]),
            headers={k: v for k, v in event["headers"].items() if k != "host"},
        )
    assert fresh.status_code == 201
    first, second = await _stored(conn)
    assert {k: v for k, v in first.items() if k != "client_hash"} == {
        k: v for k, v in second.items() if k != "client_hash"
    }
    assert first["client_hash"] != second["client_hash"]
