from __future__ import annotations

from typing import Any

import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create, error_fields
from tests.support.builders import make_tenant
from tests.support.settings import with_settings

FULL_FORM: dict[str, Any] = {
    "name": "Contact",
    "accepting": False,
    "allowed_origins": ["https://Example.com:443", "http://localhost:3000/"],
    "honeypot_field": "_trap",
    "redirect_url": "https://example.com/thanks",
    "retention_days": 30,
    "rate_limit": {"max": 5, "per_seconds": 60},
    "schema_mode": "observe",
    "labels": {"email": "Email address"},
    "file_fields": {"cv": {"types": [".PDF", "image/png"], "max_files": 2, "required": True}},
    "consent_field": "consent",
    "ack_email": {"field": "email", "subject": "Thanks {{name}}", "text": "We got it, {{name}}."},
    "turnstile_secret": "0x4AAAAAAAturnstile-secret",
}


async def test_forms__crud_round_trip(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", FULL_FORM)
        assert form["id"].startswith("frm_")
        assert form["allowed_origins"] == ["https://example.com", "http://localhost:3000"]
        assert form["file_fields"]["cv"] == {
            "types": [".pdf", "image/png"],
            "max_files": 2,
            "max_bytes": 5 * 1024 * 1024,
            "required": True,
        }
        assert form["turnstile_enabled"] is True
        assert "turnstile_secret" not in form
        for name in (
            "name",
            "accepting",
            "honeypot_field",
            "redirect_url",
            "retention_days",
            "rate_limit",
            "schema_mode",
            "labels",
            "consent_field",
            "ack_email",
        ):
            assert form[name] == FULL_FORM[name], name

        got = await client.get(f"/v1/forms/{form['id']}", headers=acme.headers)
        assert got.status_code == 200
        assert got.json() == form

        patched = await client.patch(
            f"/v1/forms/{form['id']}",
            json={"name": "Contact us", "retention_days": None, "turnstile_secret": None},
            headers=acme.headers,
        )
        assert patched.status_code == 200, patched.text
        body = patched.json()
        assert body["name"] == "Contact us"
        assert body["retention_days"] is None
        assert body["turnstile_enabled"] is False
        assert body["labels"] == FULL_FORM["labels"]  # left out: kept

        listed = await client.get("/v1/forms", headers=acme.headers)
        assert [f["id"] for f in listed.json()["data"]] == [form["id"]]

        deleted = await client.delete(f"/v1/forms/{form['id']}", headers=acme.headers)
        assert deleted.status_code == 204
        again = await client.get(f"/v1/forms/{form['id']}", headers=acme.headers)
        assert_problem(again, 404, "not_found")
        assert (await client.get("/v1/forms", headers=acme.headers)).json()["data"] == []
        second = await client.delete(f"/v1/forms/{form['id']}", headers=acme.headers)
        assert_problem(second, 404, "not_found")
    row = await (
        await conn.execute("SELECT deleted_at FROM forms WHERE id = %(id)s", {"id": form["id"]})
    ).fetchone()
    assert row is not None and row["deleted_at"] is not None  # a soft delete


async def test_forms__defaults_submit_url_and_snippet(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "Minimal"})
    assert form["accepting"] is True
    assert form["allowed_origins"] == []
    assert form["honeypot_field"] == "_gotcha"
    assert form["rate_limit"] == {"max": 10, "per_seconds": 600}
    assert form["schema_mode"] == "off"
    assert form["turnstile_enabled"] is False
    assert form["submit_url"] == f"http://127.0.0.1:8080/s/{form['id']}"
    snippet = form["html_snippet"]
    assert f'action="{form["submit_url"]}" method="POST"' in snippet
    assert 'name="_gotcha"' in snippet and 'style="display:none"' in snippet
    assert "multipart" not in snippet


async def test_forms__snippet_has_file_inputs_and_multipart(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    body = {"name": "Jobs", "file_fields": {"cv": {"types": [".pdf"]}}}
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", body)
    assert 'enctype="multipart/form-data"' in form["html_snippet"]
    assert '<input type="file" name="cv" accept=".pdf">' in form["html_snippet"]


INVALID_FORMS: list[tuple[str, dict[str, Any], str]] = [
    ("name missing", {}, "name"),
    ("name empty", {"name": ""}, "name"),
    ("name too long", {"name": "x" * 201}, "name"),
    ("origin with a path", {"allowed_origins": ["https://example.com/form"]}, "allowed_origins"),
    ("origin not http(s)", {"allowed_origins": ["ftp://example.com"]}, "allowed_origins"),
    ("origin with userinfo", {"allowed_origins": ["https://a:b@example.com"]}, "allowed_origins"),
    ("origin bad port", {"allowed_origins": ["https://example.com:99999"]}, "allowed_origins"),
    ("honeypot with spaces", {"honeypot_field": "a b"}, "honeypot_field"),
    ("redirect over ftp", {"redirect_url": "ftp://example.com/thanks"}, "redirect_url"),
    ("redirect not a URL", {"redirect_url": "thanks.html"}, "redirect_url"),
    ("retention 0", {"retention_days": 0}, "retention_days"),
    ("retention 3651", {"retention_days": 3651}, "retention_days"),
    ("rate max 0", {"rate_limit": {"max": 0, "per_seconds": 60}}, "rate_limit.max"),
    ("rate unknown key", {"rate_limit": {"burst": 3}}, "rate_limit.burst"),
    ("schema mode", {"schema_mode": "strict"}, "schema_mode"),
    ("file wildcard", {"file_fields": {"cv": {"types": ["image/*"]}}}, "file_fields.cv.types"),
    ("file unsupported", {"file_fields": {"cv": {"types": [".exe"]}}}, "file_fields.cv.types"),
    ("file no types", {"file_fields": {"cv": {"types": []}}}, "file_fields.cv.types"),
    (
        "file max_files 6",
        {"file_fields": {"cv": {"types": [".pdf"], "max_files": 6}}},
        "file_fields.cv.max_files",
    ),
    (
        "file max_bytes over 5 MiB",
        {"file_fields": {"cv": {"types": [".pdf"], "max_bytes": 5 * 1024 * 1024 + 1}}},
        "file_fields.cv.max_bytes",
    ),
    (
        "ack email without text",
        {"consent_field": "ok", "ack_email": {"field": "email"}},
        "ack_email.text",
    ),
    ("unknown field", {"colour": "blue"}, "colour"),
]


@pytest.mark.parametrize(
    ("case", "body", "field"), INVALID_FORMS, ids=[case for case, _, _ in INVALID_FORMS]
)
async def test_forms__invalid_field_is_422(
    services: Services, conn: Conn, case: str, body: dict[str, Any], field: str
) -> None:
    acme = await make_tenant(conn)
    full = body if case.startswith("name") else {"name": "Contact", **body}
    async with api_client(services) as client:
        response = await client.post("/v1/forms", json=full, headers=acme.headers)
        problem = assert_problem(response, 422, "invalid_input")
        assert field in error_fields(problem), problem
        # Nothing was stored.
        assert (await client.get("/v1/forms", headers=acme.headers)).json()["data"] == []


async def test_forms__http_redirect_url_only_where_private_targets_are_allowed(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    local = {"name": "Local", "redirect_url": "http://127.0.0.1:8000/thanks.html"}
    strict = with_settings(services, allow_private_targets=False)
    async with api_client(strict) as client:
        refused = await client.post("/v1/forms", json=local, headers=acme.headers)
        problem = assert_problem(refused, 422, "invalid_input")
        assert error_fields(problem) == {"redirect_url"}
        assert (await client.get("/v1/forms", headers=acme.headers)).json()["data"] == []
    async with api_client(services) as client:  # the local runner's setting
        created = await create(client, acme, "/v1/forms", local)
    async with api_client(strict) as client:
        # A form keeps its redirect when other settings change; a new http one is refused.
        renamed = await client.patch(
            f"/v1/forms/{created['id']}", json={"name": "Renamed"}, headers=acme.headers
        )
        changed = await client.patch(
            f"/v1/forms/{created['id']}",
            json={"redirect_url": "http://127.0.0.1:8000/other.html"},
            headers=acme.headers,
        )
    assert created["redirect_url"] == "http://127.0.0.1:8000/thanks.html"
    assert renamed.status_code == 200
    assert error_fields(assert_problem(changed, 422, "invalid_input")) == {"redirect_url"}


async def test_forms__ack_email_needs_a_consent_field(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    body = {"name": "C", "ack_email": {"field": "email", "text": "Thanks"}}
    async with api_client(services) as client:
        response = await client.post("/v1/forms", json=body, headers=acme.headers)
    assert error_fields(assert_problem(response, 422, "invalid_input")) == {"ack_email"}


@pytest.mark.parametrize("text", ["Hi {{ name | upper }}", "{% if x %}hi{% endif %}", "{# c #}"])
async def test_forms__ack_email_template_with_logic_is_422_invalid_template(
    services: Services, conn: Conn, text: str
) -> None:
    acme = await make_tenant(conn)
    body = {"name": "C", "consent_field": "ok", "ack_email": {"field": "email", "text": text}}
    async with api_client(services) as client:
        response = await client.post("/v1/forms", json=body, headers=acme.headers)
    problem = assert_problem(response, 422, "invalid_template")
    assert error_fields(problem) == {"ack_email.text"}


async def test_forms__patch_validates_the_result(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        url = f"/v1/forms/{form['id']}"
        cases = [
            ({"name": None}, "name"),
            ({"accepting": None}, "accepting"),
            ({"retention_days": 0}, "retention_days"),
            ({"allowed_origins": ["nope"]}, "allowed_origins"),
            ({"id": "frm_other"}, "id"),
        ]
        for body, field in cases:
            response = await client.patch(url, json=body, headers=acme.headers)
            problem = assert_problem(response, 422, "invalid_input")
            assert field in error_fields(problem), (body, problem)
        ack = {"ack_email": {"field": "email", "text": "hi"}}
        response = await client.patch(url, json=ack, headers=acme.headers)
        assert error_fields(assert_problem(response, 422, "invalid_input")) == {"ack_email"}
        response = await client.patch(
            url, json={**ack, "consent_field": "ok"}, headers=acme.headers
        )
        assert response.status_code == 200
        unchanged = await client.get(url, headers=acme.headers)
        assert unchanged.json()["name"] == "C"


async def test_forms__plan_limit_is_402(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, plan="free")  # three forms
    async with api_client(services) as client:
        made = [await create(client, acme, "/v1/forms", {"name": f"F{i}"}) for i in range(3)]
        refused = await client.post("/v1/forms", json={"name": "F4"}, headers=acme.headers)
        assert_problem(refused, 402, "plan_limit")
        # A deleted form frees its slot.
        await client.delete(f"/v1/forms/{made[0]['id']}", headers=acme.headers)
        await create(client, acme, "/v1/forms", {"name": "F4"})


async def test_forms__pagination_walks_120_forms_without_gaps_or_repeats(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as client:
        made = [
            (await create(client, acme, "/v1/forms", {"name": f"Form {i}"}))["id"]
            for i in range(120)
        ]
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            params: dict[str, Any] = {"limit": 50}
            if cursor:
                params["cursor"] = cursor
            response = await client.get("/v1/forms", params=params, headers=acme.headers)
            assert response.status_code == 200
            body = response.json()
            seen.extend(form["id"] for form in body["data"])
            pages += 1
            cursor = body["next_cursor"]
            if cursor is None:
                break
    assert pages == 3
    assert seen == made  # every form once, in creation order


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 201}, {"cursor": "not-a-cursor"}])
async def test_forms__bad_page_parameters_are_422(
    services: Services, conn: Conn, params: dict[str, Any]
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        response = await client.get("/v1/forms", params=params, headers=acme.headers)
    problem = assert_problem(response, 422, "invalid_input")
    assert error_fields(problem) == set(params)
