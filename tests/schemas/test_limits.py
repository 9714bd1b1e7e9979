"""Schemas are checked when saved: every shape the checker could not run within its budget,
or could not run at all, is refused through `POST /v1/forms/{id}/schemas` with
`422 invalid_schema` and where; nothing is appended."""

from __future__ import annotations

from typing import Any

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from core.schemas.limits import (
    MAX_COMPOSITION_DEPTH,
    MAX_COMPOSITION_WIDTH,
    MAX_SCHEMA_BYTES,
)
from tests.support.api import api_client, assert_problem, error_fields
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.schemas import ref_pairs


def _nested(key: str, levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    for _ in range(levels):
        schema = {key: schema}
    return schema


REFUSED = [
    ("ref typo", {"$ref": "#/$defs/emial", "$defs": {"email": {}}}, "schema.$ref"),
    ("anchor typo", {"$ref": "#nope"}, "schema.$ref"),
    ("remote ref", {"properties": {"a": {"$ref": "https://example.com/s.json"}}}, None),
    (
        "ref cycle",
        {
            "$ref": "#/$defs/a",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#"}]}},
        },
        None,
    ),
    ("self ref", {"$defs": {"a": {"$ref": "#/$defs/a"}}}, "schema.$defs.a.$ref"),
    ("anyOf pairs", ref_pairs(16), "schema"),
    ("deep composition", _nested("not", MAX_COMPOSITION_DEPTH + 2), None),
    ("wide composition", {"anyOf": [{}] * (MAX_COMPOSITION_WIDTH + 1)}, "schema.anyOf"),
    ("backreference", {"properties": {"a": {"pattern": "(a)\\1"}}}, "schema.properties.a.pattern"),
    ("lookahead", {"patternProperties": {"^(?=x)": {}}}, "schema.patternProperties.^(?=x)"),
    ("lookbehind", {"properties": {"a": {"pattern": "(?<!a)b"}}}, "schema.properties.a.pattern"),
    ("not a schema", {"type": "strin"}, "schema.type"),
    ("too large", {"description": "x" * MAX_SCHEMA_BYTES}, "schema"),
]


@pytest.mark.parametrize(
    ("schema", "where"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
async def test_add_schema__refused_shapes(
    services: Services, conn: Conn, schema: dict[str, Any], where: str | None
) -> None:
    tenant, form = await setup_form(conn)
    async with api_client(services, tenant.key) as api:
        response = await api.post(f"/v1/forms/{form}/schemas", json={"schema": schema})
    body = assert_problem(response, 422, "invalid_schema")
    fields = error_fields(body)
    assert len(fields) == 1 and all(f.startswith("schema") for f in fields), body
    if where is not None:
        assert fields == {where}, body
    assert await rows(conn, "SELECT 1 FROM form_schemas") == []


ACCEPTED = [
    (
        "recursive shape through items",
        {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}},
    ),
    ("pattern that backtracks elsewhere", {"properties": {"a": {"pattern": "^(a+)+$"}}}),
    ("anchor", {"$defs": {"e": {"$anchor": "mail", "format": "email"}}, "$ref": "#mail"}),
    ("a few anyOf pairs", ref_pairs(8)),
    ("composition at its depth", _nested("not", MAX_COMPOSITION_DEPTH)),
    ("draft 7", {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {}}),
]


@pytest.mark.parametrize(
    "schema", [case[1] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED]
)
async def test_add_schema__accepted_shapes(
    services: Services, conn: Conn, schema: dict[str, Any]
) -> None:
    tenant, form = await setup_form(conn)
    async with api_client(services, tenant.key) as api:
        response = await api.post(f"/v1/forms/{form}/schemas", json={"schema": schema})
    assert response.status_code == 201, response.text
    assert response.json()["source"] == "manual"
