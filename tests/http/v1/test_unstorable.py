"""`/v1` answers what the database cannot store, and malformed ids, with a problem and a
code, before any query with them: never a 500, nothing written."""

from __future__ import annotations

import logging

import psycopg
import pytest

from core.platform.db import Conn
from core.platform.logs import JsonFormatter
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import make_tenant
from tests.support.records import rows

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (b'{"name": "a\\u0000b"}', "unstorable_value", "name"),
        (b'{"name": "\\ud800"}', "unstorable_value", "name"),
        (b'{"name": "F", "labels": {"e\\u0000": "E"}}', "unstorable_value", "labels.e\ufffd"),
        (b'{"name": "F", "retention_days": 1e400}', "unstorable_value", "body"),
        (
            b'{"name": "F", "labels": ' + b'{"a":' * 40 + b"1" + b"}" * 40 + b"}",
            "input_limit",
            "labels" + ".a" * 31,
        ),
    ],
    ids=["nul", "surrogate", "nul-key", "1e400", "depth-41"],
)
async def test_v1_unstorable__json_body_refused_and_nothing_written(
    services: Services, conn: Conn, body: bytes, code: str, field: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        response = await client.post("/v1/forms", content=body, headers={**JSON, **acme.headers})
    problem = assert_problem(response, 422, code)
    assert [e["field"] for e in problem["errors"]] == [field]
    assert await rows(conn, "SELECT id FROM forms") == []


async def test_v1_unstorable__deeply_nested_body_is_a_problem_not_a_500(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    deep = b'{"name": "F", "labels": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    async with api_client(services) as client:
        response = await client.post("/v1/forms", content=deep, headers={**JSON, **acme.headers})
    assert response.status_code in (400, 422), response.text
    assert response.json()["code"] in ("malformed_body", "input_limit", "http_error")
    assert await rows(conn, "SELECT id FROM forms") == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/forms/frm_%00"),
        ("PATCH", "/v1/forms/frm_%00"),
        ("DELETE", "/v1/forms/frm_%00"),
        ("GET", "/v1/forms/frm_x%00y/routes"),
        ("POST", "/v1/forms/not-an-id/schemas"),
        ("GET", "/v1/destinations/dst_" + "z" * 40),
        ("DELETE", "/v1/routes/rte_%ff"),
        ("GET", "/v1/deliveries/frm_01jexamp1eexamp1eexamp1e00"),
        ("GET", "/v1/submissions/sub_%00/attachments/att_%00"),
        ("POST", "/v1/alerts/alr_%00/ack"),
        ("DELETE", "/v1/keys/key_%00"),
    ],
)
async def test_v1_unstorable__malformed_path_id_is_404(
    services: Services, conn: Conn, method: str, path: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        response = await client.request(
            method, path, json={"name": "x", "schema": {}}, headers=acme.headers
        )
    assert_problem(response, 404, "not_found")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/submissions?form=%00",
        "/v1/submissions/export.csv?form=%00",
        "/v1/deliveries?destination=dst_%00",
        "/v1/deliveries?submission=nope",
        "/v1/digests?route=%00",
        "/v1/submissions?form=",
    ],
)
async def test_v1_unstorable__malformed_query_id_is_422(
    services: Services, conn: Conn, path: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        response = await client.get(path, headers=acme.headers)
    assert_problem(response, 422, "invalid_input")


async def test_v1_unstorable__well_formed_ids_still_reach_the_endpoint(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "F"})
        found = await client.get(f"/v1/forms/{form['id']}", headers=acme.headers)
        listed = await client.get(f"/v1/submissions?form={form['id']}", headers=acme.headers)
        options = await client.options(f"/v1/forms/{form['id']}", headers=acme.headers)
    assert found.status_code == 200 and listed.status_code == 200
    assert_problem(options, 405, "method_not_allowed")
    assert set(options.headers["allow"].replace(" ", "").split(",")) == {"GET", "PATCH", "DELETE"}


@pytest.mark.parametrize(
    "path",
    [
        "/v1/audit?actor=a%00b",
        "/v1/audit?action=form.updated&subject=%00",
        "/v1/submissions?q=ada%00",
        "/v1/deliveries?status=sent&status=%00",
    ],
)
async def test_v1_unstorable__a_nul_in_a_query_parameter_is_422(
    services: Services, conn: Conn, path: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        response = await client.get(path, headers=acme.headers)
    assert_problem(response, 422, "unstorable_value")


@pytest.mark.parametrize("resource", ["forms", "submissions", "deliveries", "alerts", "digests"])
async def test_v1_unstorable__empty_cursor_is_the_first_page_and_a_nul_cursor_is_422(
    services: Services, conn: Conn, resource: str
) -> None:
    acme = await make_tenant(conn)
    nul_cursor = "WyJcdTAwMDAiXQ"  # base64 of ["\u0000"]
    async with api_client(services) as client:
        empty = await client.get(f"/v1/{resource}?cursor=", headers=acme.headers)
        nul = await client.get(f"/v1/{resource}?cursor={nul_cursor}", headers=acme.headers)
    assert empty.status_code == 200, empty.text
    assert_problem(nul, 422, "invalid_input")


async def test_v1_unstorable__a_logged_database_error_carries_no_value(conn: Conn) -> None:
    secret = "Jane Doe +44 7700 900123"
    try:
        await conn.execute("SELECT %s::jsonb", [f'{{"name": "{secret}\\u0000"}}'])
    except psycopg.Error as exc:
        error = exc
    else:  # pragma: no cover
        pytest.fail("the database took a NUL")
    assert secret in str(error)  # what used to reach the log line
    record = logging.LogRecord(
        "postbag", logging.ERROR, __file__, 1, "unexpected error", None, None
    )
    record.exc_info = (type(error), error, error.__traceback__)
    line = JsonFormatter().format(record)
    assert secret not in line and "Jane" not in line
    assert "SQLSTATE" in line and type(error).__name__ in line
