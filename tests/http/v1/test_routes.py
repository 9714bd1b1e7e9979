from __future__ import annotations

from typing import Any

import httpx
import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import EMAIL, WEBHOOK, api_client, assert_problem, create, error_fields
from tests.support.builders import Tenant, make_tenant


async def _form_and_email(client: httpx.AsyncClient, who: Tenant) -> tuple[str, str]:
    form = await create(client, who, "/v1/forms", {"name": "C"})
    email = await create(client, who, "/v1/destinations", EMAIL)
    return form["id"], email["id"]


async def test_routes__crud_round_trip(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form_id, email_id = await _form_and_email(client, acme)
        path = f"/v1/forms/{form_id}/routes"
        route = await create(client, acme, path, {"destination_id": email_id})
        assert route["id"].startswith("rte_")
        assert (route["form_id"], route["destination_id"]) == (form_id, email_id)
        assert route["enabled"] is True
        assert route["include_statuses"] == ["accepted"]
        assert (route["mode"], route["period"], route["template"]) == ("immediate", None, None)

        listed = await client.get(path, headers=acme.headers)
        assert listed.json() == {"data": [route], "next_cursor": None}

        template = {"subject": "New lead: {{name}}", "text": "{{name}} <{{ email }}> wrote"}
        patched = await client.patch(
            f"/v1/routes/{route['id']}",
            json={
                "enabled": False,
                "include_statuses": ["accepted", "quarantined"],
                "mode": "digest",
                "period": "daily",
                "template": template,
            },
            headers=acme.headers,
        )
        assert patched.status_code == 200, patched.text
        body = patched.json()
        assert body["enabled"] is False
        assert body["include_statuses"] == ["accepted", "quarantined"]
        assert (body["mode"], body["period"], body["template"]) == ("digest", "daily", template)

        back = await client.patch(
            f"/v1/routes/{route['id']}", json={"mode": "immediate"}, headers=acme.headers
        )
        assert (back.json()["mode"], back.json()["period"]) == ("immediate", None)

        deleted = await client.delete(f"/v1/routes/{route['id']}", headers=acme.headers)
        assert deleted.status_code == 204
        assert (await client.get(path, headers=acme.headers)).json()["data"] == []
        again = await client.patch(
            f"/v1/routes/{route['id']}", json={"enabled": True}, headers=acme.headers
        )
        assert_problem(again, 404, "not_found")
        # The pair is free again once the live route is gone.
        await create(client, acme, path, {"destination_id": email_id})


async def test_routes__one_live_route_per_form_and_destination(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form_id, email_id = await _form_and_email(client, acme)
        path = f"/v1/forms/{form_id}/routes"
        await create(client, acme, path, {"destination_id": email_id})
        duplicate = await client.post(path, json={"destination_id": email_id}, headers=acme.headers)
        assert_problem(duplicate, 409, "route_exists")
        listed = await client.get(path, headers=acme.headers)
    assert len(listed.json()["data"]) == 1


INVALID_ROUTES: list[tuple[str, dict[str, Any], str, str]] = [
    ("digest without period", {"mode": "digest"}, "invalid_input", "period"),
    ("period without digest", {"period": "daily"}, "invalid_input", "period"),
    ("unknown period", {"mode": "digest", "period": "monthly"}, "invalid_input", "period"),
    ("unknown mode", {"mode": "batch"}, "invalid_input", "mode"),
    ("no statuses", {"include_statuses": []}, "invalid_input", "include_statuses"),
    ("unknown status", {"include_statuses": ["deleted"]}, "invalid_input", "include_statuses.0"),
    ("filter", {"template": {"text": "{{ name | upper }}"}}, "invalid_template", "template.text"),
    (
        "tag",
        {"template": {"subject": "{% if a %}x{% endif %}"}},
        "invalid_template",
        "template.subject",
    ),
    ("comment", {"template": {"text": "{# note #}"}}, "invalid_template", "template.text"),
    ("template key", {"template": {"html": "<b>"}}, "invalid_input", "template.html"),
    ("unknown field", {"priority": 1}, "invalid_input", "priority"),
]


@pytest.mark.parametrize(
    ("case", "extra", "code", "field"), INVALID_ROUTES, ids=[c for c, *_ in INVALID_ROUTES]
)
async def test_routes__invalid_is_422(
    services: Services, conn: Conn, case: str, extra: dict[str, Any], code: str, field: str
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form_id, email_id = await _form_and_email(client, acme)
        path = f"/v1/forms/{form_id}/routes"
        body = {"destination_id": email_id, **extra}
        response = await client.post(path, json=body, headers=acme.headers)
        assert field in error_fields(assert_problem(response, 422, code)), case
        assert (await client.get(path, headers=acme.headers)).json()["data"] == []


async def test_routes__templates_do_not_apply_to_webhooks(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "C"})
        hook = await create(client, acme, "/v1/destinations", WEBHOOK)
        response = await client.post(
            f"/v1/forms/{form['id']}/routes",
            json={"destination_id": hook["id"], "template": {"text": "{{name}}"}},
            headers=acme.headers,
        )
    assert error_fields(assert_problem(response, 422, "invalid_template")) == {"template"}


async def test_routes__patch_validates_the_result(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form_id, email_id = await _form_and_email(client, acme)
        route = await create(
            client, acme, f"/v1/forms/{form_id}/routes", {"destination_id": email_id}
        )
        url = f"/v1/routes/{route['id']}"
        cases = [
            ({"mode": "digest"}, "invalid_input", "period"),
            ({"enabled": None}, "invalid_input", "enabled"),
            ({"include_statuses": []}, "invalid_input", "include_statuses"),
            ({"destination_id": email_id}, "invalid_input", "destination_id"),
            ({"template": {"text": "{{a|b}}"}}, "invalid_template", "template.text"),
        ]
        for body, code, field in cases:
            response = await client.patch(url, json=body, headers=acme.headers)
            assert field in error_fields(assert_problem(response, 422, code)), body
        listed = await client.get(f"/v1/forms/{form_id}/routes", headers=acme.headers)
    assert listed.json()["data"] == [route]


async def test_routes__unknown_or_deleted_form_and_destination_are_404(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        form_id, email_id = await _form_and_email(client, acme)
        path = f"/v1/forms/{form_id}/routes"
        unknown = await client.post(path, json={"destination_id": "dst_x"}, headers=acme.headers)
        assert_problem(unknown, 404, "not_found")
        await client.delete(f"/v1/destinations/{email_id}", headers=acme.headers)
        gone = await client.post(path, json={"destination_id": email_id}, headers=acme.headers)
        assert_problem(gone, 404, "not_found")
        other = await create(client, acme, "/v1/destinations", EMAIL)
        await client.delete(f"/v1/forms/{form_id}", headers=acme.headers)
        closed = await client.post(path, json={"destination_id": other["id"]}, headers=acme.headers)
        assert_problem(closed, 404, "not_found")
        assert_problem(await client.get(path, headers=acme.headers), 404, "not_found")
