from __future__ import annotations

from typing import Any

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create, error_fields
from tests.support.builders import make_tenant

V1 = {"type": "object", "properties": {"email": {"type": "string"}}}
V2 = {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}}


async def test_schemas__append_versions_and_list(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        path = f"/v1/forms/{form['id']}/schemas"
        empty = await client.get(path, headers=acme.headers)
        assert empty.json() == {"data": [], "next_cursor": None}

        first = await create(client, acme, path, {"schema": V1})
        second = await create(client, acme, path, {"schema": V2})
        assert (first["version"], first["schema"], first["source"]) == (1, V1, "manual")
        assert (second["version"], second["schema"]) == (2, V2)

        listed = await client.get(path, headers=acme.headers)
        assert [(s["version"], s["schema"]) for s in listed.json()["data"]] == [(1, V1), (2, V2)]

        page = await client.get(path, params={"limit": 1}, headers=acme.headers)
        assert [s["version"] for s in page.json()["data"]] == [1]
        rest = await client.get(
            path, params={"limit": 1, "cursor": page.json()["next_cursor"]}, headers=acme.headers
        )
        assert [s["version"] for s in rest.json()["data"]] == [2]
        assert rest.json()["next_cursor"] is None


async def test_schemas__versions_are_never_edited(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        path = f"/v1/forms/{form['id']}/schemas"
        await create(client, acme, path, {"schema": V1})
        for method in ("PUT", "PATCH", "DELETE"):
            response = await client.request(method, path, json={"schema": V2}, headers=acme.headers)
            assert_problem(response, 405, "method_not_allowed")
        listed = await client.get(path, headers=acme.headers)
    assert [s["schema"] for s in listed.json()["data"]] == [V1]


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "objekt"}, "schema.type"),
        ({"properties": {"email": {"minLength": -1}}}, "schema.properties.email.minLength"),
        ({"required": "email"}, "schema.required"),
    ],
)
async def test_schemas__invalid_json_schema_is_422_invalid_schema(
    services: Services, conn: Conn, schema: dict[str, Any], field: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        path = f"/v1/forms/{form['id']}/schemas"
        response = await client.post(path, json={"schema": schema}, headers=acme.headers)
        assert error_fields(assert_problem(response, 422, "invalid_schema")) == {field}
        assert (await client.get(path, headers=acme.headers)).json()["data"] == []


async def test_schemas__too_large_is_422_invalid_schema(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    huge = {"description": "x" * 70_000}
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        response = await client.post(
            f"/v1/forms/{form['id']}/schemas", json={"schema": huge}, headers=acme.headers
        )
    assert_problem(response, 422, "invalid_schema")


@pytest.mark.parametrize(
    "body", [{}, {"schema": "string"}, {"schema": [1]}, {"schema": {}, "version": 7}]
)
async def test_schemas__malformed_body_is_422_invalid_input(
    services: Services, conn: Conn, body: dict[str, Any]
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        response = await client.post(
            f"/v1/forms/{form['id']}/schemas", json=body, headers=acme.headers
        )
    assert_problem(response, 422, "invalid_input")


async def test_schemas__deleted_form_is_404(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        await client.delete(f"/v1/forms/{form['id']}", headers=acme.headers)
        path = f"/v1/forms/{form['id']}/schemas"
        assert_problem(await client.get(path, headers=acme.headers), 404, "not_found")
        posted = await client.post(path, json={"schema": V1}, headers=acme.headers)
        assert_problem(posted, 404, "not_found")
