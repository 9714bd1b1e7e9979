from __future__ import annotations

import re
from pathlib import Path

from openapi_spec_validator import validate

from core.http.problems import _STATUS_AND_CODE
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import (
    WEBHOOK,
    api_client,
    app_without_database,
    assert_problem,
    openapi_document,
    served_operations,
)
from tests.support.builders import make_tenant

PROBLEM = "application/problem+json"


def test_openapi__document_is_valid() -> None:
    validate(openapi_document())


def test_openapi__lists_every_route_the_app_serves() -> None:
    document = openapi_document()
    served = {
        (method.lower(), path)
        for method, path in served_operations(app_without_database())
        if path.startswith("/v1/")
    }
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert served == documented
    assert len(served) >= 20


def test_openapi__documents_bodies_and_problem_responses() -> None:
    document = openapi_document()
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            responses = operation["responses"]
            assert operation.get("security"), where
            assert {"400", "401", "405", "503"} <= responses.keys(), where
            assert "Allow" in responses["405"]["headers"], where
            if "{" in path:
                assert "404" in responses, where
            if "requestBody" in operation:
                assert "422" in responses, where
            if method == "post" and path in ("/v1/forms", "/v1/destinations"):
                assert "402" in responses, where
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    assert list(response["content"]) == [PROBLEM], (where, status)
                    schema = response["content"][PROBLEM]["schema"]
                    assert "code" in schema["properties"], (where, status)
    assert "409" in document["paths"]["/v1/forms/{form_id}/routes"]["post"]["responses"]


def test_openapi__every_list_is_a_typed_page() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    not_lists = {
        "/v1/usage",
        "/v1/organization",
        "/v1/organization/sso",
        "/v1/organization/policy",
        "/v1/audit/export",
        "/v1/organization/email",
        "/v1/organization/email/dns",
        "/v1/submissions/export.csv",
        "/v1/forms/{form_id}/spam",
        # Samples: the newest few bodies, never paged (docs/hooks.md#sample-data).
        "/v1/forms/{form_id}/sample",
        "/v1/streams/{stream_id}/sample",
    }
    lists = [
        path
        for path, item in document["paths"].items()
        if "get" in item and not path.endswith("}") and path not in not_lists
    ]
    assert len(lists) >= 10
    for path in lists:
        body = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        page = schemas[body["schema"]["$ref"].rsplit("/", 1)[1]]
        assert page["required"] == ["data", "next_cursor"], path
        item = schemas[page["properties"]["data"]["items"]["$ref"].rsplit("/", 1)[1]]
        assert item["properties"], path


def test_openapi__secrets_are_write_only() -> None:
    schemas = openapi_document()["components"]["schemas"]
    for model in ("FormFields", "FormPatch", "DestinationFields", "DestinationPatch"):
        for name, prop in schemas[model]["properties"].items():
            if name in ("secret", "turnstile_secret"):
                assert prop["writeOnly"] is True, (model, name)
    for model in ("Form", "Destination"):
        assert not {"secret", "turnstile_secret"} & schemas[model]["properties"].keys()


def test_docs__list_every_error_code_the_api_returns() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text(encoding="utf-8")
    codes = {code for _, code in _STATUS_AND_CODE.values()} | {"method_not_allowed"}
    missing = {code for code in codes if f"`{code}`" not in text}
    assert not missing


def test_openapi__api_md_names_every_route_the_app_serves() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text()
    named = {
        (method, re.sub(r"\{[^}]*\}", "{}", path))
        for methods, path in re.findall(r"((?:[A-Z]+/)*[A-Z]+) (/v1/[^\s`?]+)", text)
        for method in methods.split("/")
    }
    served = {
        (method, re.sub(r"\{[^}]*\}", "{}", path))
        for method, path in served_operations(app_without_database())
        if path.startswith("/v1/")
    }
    assert served - named == set()


async def test_openapi__destination_patch_takes_no_null_and_refuses_it(
    services: Services, conn: Conn
) -> None:
    document = openapi_document()
    patch = document["components"]["schemas"]["DestinationPatch"]["properties"]
    for name in ("name", "config", "secret", "enabled"):
        assert "anyOf" not in patch[name] and patch[name].get("type") != "null", name
    acme = await make_tenant(conn)
    async with api_client(services, acme.key) as client:
        created = await client.post("/v1/destinations", json=WEBHOOK)
        destination = created.json()["id"]
        refused = await client.patch(f"/v1/destinations/{destination}", json={"config": None})
    assert_problem(refused, 422, "invalid_input")


def test_openapi__destination_config_is_typed_by_type() -> None:
    document = openapi_document()
    fields = document["components"]["schemas"]["DestinationFields"]
    by_type = {
        rule["if"]["properties"]["type"]["const"]: rule["then"]["properties"]["config"]
        for rule in fields["allOf"]
    }
    assert by_type["webhook"]["required"] == ["url"]
    assert by_type["email"]["properties"]["to"]["type"] == "array"
    assert by_type["telegram"]["properties"]["chat_id"]["pattern"]
    assert set(by_type) == set(fields["properties"]["type"]["enum"])
