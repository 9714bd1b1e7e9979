"""Recorded Lambda events replayed against the real handlers give the same answer as the
same request over HTTP to the local runner (uvicorn serving both apps)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.http.server import combined_app
from core.platform.db import connect
from tests.support.builders import make_form, make_tenant
from tests.support.databases import Clones, database_url
from tests.support.fuzzing import served
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.settings import TEST_SECRET_KEY

FORM_ID = "frm_01j1ambda0mv1t1part0000000"
COMPARED_HEADERS = (
    "content-type",
    "location",
    "access-control-allow-origin",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-max-age",
    "vary",
    "retry-after",
)
EVENTS = [
    "function_url_get_health.json",
    "function_url_post_json.json",
    "function_url_post_urlencoded.json",
    "function_url_post_submit_multipart.json",
    "function_url_options_preflight.json",
    "apigw_http_get_form.json",
]
_TIMES = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?")
_IDS = re.compile(r"\b(sub|att|dlv|key|org)_[0-9a-hjkmnp-tv-z]{26}\b")


async def _prepare(url: str) -> str:
    """The state every replay starts from: an organization, its key and the events' form."""
    conn = await connect(url)
    try:
        tenant = await make_tenant(conn, plan="pro")
        await make_form(
            conn,
            tenant,
            id=FORM_ID,
            allowed_origins=["https://site.example"],
            redirect_url="https://site.example/thanks",
            file_fields={"notes": {"types": [".txt"]}},
        )
        return tenant.key
    finally:
        await conn.close()


@pytest.fixture
def twin_databases(admin_url: str, clones: Clones) -> Iterator[tuple[str, str]]:
    names = [clones.take() for _ in range(2)]
    yield database_url(admin_url, names[0]), database_url(admin_url, names[1])
    for name in names:
        clones.give_back(name)


def _normalise_body(text: str, content_type: str) -> Any:
    # Two databases prepared a moment apart: ids and times differ, nothing else may.
    text = _TIMES.sub("<time>", _IDS.sub(lambda m: f"{m.group(1)}_*", text))
    if "json" in content_type and text:
        body = json.loads(text)
        if isinstance(body, dict):
            body.pop("worker_heartbeat_age_seconds", None)
        return body
    return text


def _normalise(status: int, headers: dict[str, str], body: str) -> dict[str, Any]:
    kept = {
        name: _IDS.sub(lambda m: f"{m.group(1)}_*", headers[name])
        for name in COMPARED_HEADERS
        if name in headers
    }
    if not body:
        # Mangum labels an empty Lambda answer application/json; there is nothing to label.
        kept.pop("content-type", None)
    return {
        "status": status,
        "headers": kept,
        "body": _normalise_body(body, headers.get("content-type", "")),
    }


def _http_request(event: dict[str, Any], base: str) -> httpx.Response:
    body = event.get("body") or ""
    content = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    headers = {k: v for k, v in event["headers"].items() if k not in ("host", "content-length")}
    query = f"?{event['rawQueryString']}" if event.get("rawQueryString") else ""
    return httpx.request(
        event["requestContext"]["http"]["method"],
        f"{base}{event['rawPath']}{query}",
        content=content or None,
        headers=headers,
        timeout=30,
        follow_redirects=False,
    )


@pytest.mark.parametrize("name", EVENTS)
def test_recorded_event__same_answer_as_http_to_the_local_runner(
    name: str, twin_databases: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lambda_db, http_db = twin_databases
    keys = [asyncio.run(_prepare(url)) for url in (lambda_db, http_db)]
    event = load_event(name)
    handler = "api" if event["rawPath"].startswith("/v1") else "submit"

    def with_key(key: str) -> dict[str, Any]:
        filled = json.loads(json.dumps(event).replace("{{API_KEY}}", key))
        assert isinstance(filled, dict)
        return filled

    [answer] = invoke(
        handler,
        [with_key(keys[0])],
        FakeContext(),
        monkeypatch,
        POSTBAG_DATABASE_URL=lambda_db,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'lambda-files'}",
    )
    body = answer.get("body", "")
    if answer.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    from_lambda = _normalise(answer["statusCode"], answer["headers"], body)

    # The local runner's HTTP side, on a thread of its own.
    with served(http_db, tmp_path / "http-files", combined_app) as base:
        response = _http_request(with_key(keys[1]), base)
    from_http = _normalise(response.status_code, dict(response.headers), response.text)

    assert from_lambda == from_http
    assert from_lambda["status"] < 400, from_lambda
