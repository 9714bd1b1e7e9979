"""The role matrix: every `/v1` route with a key of each role, every MCP tool with the least
role that may call it and the one below.

The routes come from the app's route table and the tools from `tools/list`; each must be in
the tables below (the least role that may call it), so a new route or tool without a rule
here fails. A role below the least is refused `403 forbidden` naming that role; a role at
or above it gets past the check (here to a `404`, `422` or an answer: the ids are made up).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from core.http.access import checked_routes, rule_of
from core.http.api_app import create_api_app
from core.http.v1.checks import PATH_IDS
from core.owner.organizations import create_api_key
from core.owner.roles import LEAST_ROLE, ROLES, outranks
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from core.platform.vocabulary import Role
from tests.support.api import assert_problem
from tests.support.builders import make_form, make_submission, make_tenant

# The least role that may call each `/v1` route.
ROUTES: dict[tuple[str, str], Role] = {
    ("POST", "/v1/keys"): "admin",
    ("GET", "/v1/keys"): "admin",
    ("DELETE", "/v1/keys/{key_id}"): "admin",
    ("POST", "/v1/forms"): "admin",
    ("GET", "/v1/forms"): "viewer",
    ("GET", "/v1/forms/{form_id}"): "viewer",
    ("PATCH", "/v1/forms/{form_id}"): "admin",
    ("DELETE", "/v1/forms/{form_id}"): "admin",
    ("GET", "/v1/forms/{form_id}/schemas"): "viewer",
    ("POST", "/v1/forms/{form_id}/schemas"): "admin",
    ("POST", "/v1/forms/{form_id}/schemas/{version}/adopt"): "admin",
    ("GET", "/v1/forms/{form_id}/drift"): "viewer",
    ("POST", "/v1/destinations"): "admin",
    ("GET", "/v1/destinations"): "viewer",
    ("GET", "/v1/destinations/{destination_id}"): "viewer",
    ("PATCH", "/v1/destinations/{destination_id}"): "admin",
    ("DELETE", "/v1/destinations/{destination_id}"): "admin",
    ("POST", "/v1/destinations/{destination_id}/test"): "operator",
    ("POST", "/v1/forms/{form_id}/routes"): "admin",
    ("GET", "/v1/forms/{form_id}/routes"): "viewer",
    ("PATCH", "/v1/routes/{route_id}"): "admin",
    ("DELETE", "/v1/routes/{route_id}"): "admin",
    ("GET", "/v1/submissions"): "viewer",
    ("GET", "/v1/submissions/export.csv"): "operator",
    ("GET", "/v1/submissions/{submission_id}"): "operator",
    ("POST", "/v1/submissions/{submission_id}/erase"): "operator",
    ("POST", "/v1/submissions/{submission_id}/release"): "operator",
    ("POST", "/v1/submissions/{submission_id}/spam"): "operator",
    ("GET", "/v1/submissions/{submission_id}/attachments/{attachment_id}"): "operator",
    ("GET", "/v1/events"): "viewer",
    ("GET", "/v1/deliveries"): "viewer",
    ("GET", "/v1/deliveries/{delivery_id}"): "operator",
    ("POST", "/v1/deliveries/{delivery_id}/retry"): "operator",
    ("POST", "/v1/deliveries/replay"): "operator",
    ("GET", "/v1/replays/{replay_id}"): "viewer",
    ("GET", "/v1/alerts"): "viewer",
    ("POST", "/v1/alerts/{alert_id}/ack"): "operator",
    ("GET", "/v1/digests"): "viewer",
    ("GET", "/v1/usage"): "viewer",
    ("GET", "/v1/organization"): "viewer",
    ("PATCH", "/v1/organization"): "admin",
    ("GET", "/v1/organization/sso"): "owner",
    ("PUT", "/v1/organization/sso"): "owner",
    ("DELETE", "/v1/organization/sso"): "owner",
    ("GET", "/v1/organization/policy"): "viewer",
    ("PUT", "/v1/organization/policy"): "owner",
    ("GET", "/v1/organization/email"): "viewer",
    ("GET", "/v1/organization/email/dns"): "viewer",
    ("PUT", "/v1/organization/email"): "admin",
    ("DELETE", "/v1/organization/email"): "admin",
    ("POST", "/v1/organization/email/test"): "admin",
    ("GET", "/v1/forms/{form_id}/spam"): "viewer",
    ("DELETE", "/v1/spam/model"): "admin",
    ("POST", "/v1/streams"): "admin",
    ("GET", "/v1/streams"): "viewer",
    ("GET", "/v1/streams/{stream_id}"): "viewer",
    ("PATCH", "/v1/streams/{stream_id}"): "admin",
    ("DELETE", "/v1/streams/{stream_id}"): "admin",
    ("POST", "/v1/streams/{stream_id}/keys"): "admin",
    ("GET", "/v1/streams/{stream_id}/keys"): "admin",
    ("DELETE", "/v1/streams/{stream_id}/keys/{ingest_key_id}"): "admin",
    ("GET", "/v1/streams/{stream_id}/schemas"): "viewer",
    ("POST", "/v1/streams/{stream_id}/schemas"): "admin",
    ("POST", "/v1/streams/{stream_id}/schemas/suggest"): "admin",
    ("POST", "/v1/streams/{stream_id}/schemas/{version}/adopt"): "admin",
    ("POST", "/v1/streams/{stream_id}/routes"): "admin",
    ("GET", "/v1/streams/{stream_id}/routes"): "viewer",
    ("DELETE", "/v1/streams/{stream_id}/routes/{stream_route_id}"): "admin",
    ("GET", "/v1/streams/{stream_id}/events"): "operator",
    ("GET", "/v1/streams/{stream_id}/events/{event_id}"): "operator",
    ("POST", "/v1/streams/{stream_id}/events/{event_id}/erase"): "operator",
    ("POST", "/v1/streams/{stream_id}/events"): "operator",
    ("POST", "/v1/streams/{stream_id}/batch"): "operator",
    ("GET", "/v1/audit"): "admin",
    ("GET", "/v1/audit/export"): "admin",
    ("POST", "/v1/members"): "owner",
    ("GET", "/v1/members"): "owner",
    ("PATCH", "/v1/members/{member_id}"): "owner",
    ("DELETE", "/v1/members/{member_id}"): "owner",
    ("GET", "/v1/invitations"): "owner",
    ("DELETE", "/v1/invitations/{invitation_id}"): "owner",
    ("POST", "/v1/hooks"): "admin",
    ("GET", "/v1/hooks"): "admin",
    ("GET", "/v1/hooks/{hook_id}"): "admin",
    ("DELETE", "/v1/hooks/{hook_id}"): "admin",
    ("GET", "/v1/forms/{form_id}/sample"): "operator",
    ("GET", "/v1/streams/{stream_id}/sample"): "operator",
    ("POST", "/v1/streams/{stream_id}/events/{event_id}/release"): "operator",
    ("POST", "/v1/invitations/{invitation_id}/resend"): "owner",
}

# The least role that may call each MCP tool (the same as its `/v1` route's).
TOOLS: dict[str, Role] = {
    "list_forms": "viewer",
    "get_form": "viewer",
    "create_form": "admin",
    "list_submissions": "viewer",
    "get_submission": "operator",
    "export_submissions": "operator",
    "erase_submission": "operator",
    "release_submission": "operator",
    "release_stream_event": "operator",
    "mark_submission_spam": "operator",
    "list_deliveries": "viewer",
    "get_delivery": "operator",
    "retry_delivery": "operator",
    "list_destinations": "viewer",
    "list_events": "viewer",
    "get_usage": "viewer",
    "list_alerts": "viewer",
    "acknowledge_alert": "operator",
    "list_streams": "viewer",
    "list_stream_events": "operator",
    "send_event": "operator",
}

_PARAM = re.compile(r"\{(\w+)\}")
_MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def _path(template: str) -> str:
    """The route's path with made-up ids of the right shapes."""

    def made_up(match: re.Match[str]) -> str:
        name = match.group(1)
        return "1" if name == "version" else new_id({**PATH_IDS, "replay_id": "rpl"}[name])

    return _PARAM.sub(made_up, template)


async def _keys(conn: Conn) -> tuple[str, dict[Role, str]]:
    tenant = await make_tenant(conn)
    keys: dict[Role, str] = {}
    for role in ROLES:
        keys[role] = (await create_api_key(conn, tenant.scope, name=role, role=role)).secret
    return tenant.org, keys


async def test_every_v1_route_refuses_the_roles_below_its_least_with_403_naming_it(
    services: Services, conn: Conn
) -> None:
    _org, keys = await _keys(conn)
    app = create_api_app(services)
    served = {
        (method, route.path): route
        for route in checked_routes(app)
        if route.path.startswith("/v1/")
        for method in route.methods
    }
    # A new route fails here until it is given its least role above (and a rule in code).
    assert set(served) == set(ROUTES)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        for (method, template), least in sorted(ROUTES.items()):
            rule = rule_of(served[method, template].route)
            assert rule is not None and rule.permission is not None
            assert LEAST_ROLE[rule.permission] == least, (method, template)
            params = {"form": new_id("frm")} if template.endswith("export.csv") else None
            body = {} if method in ("POST", "PATCH") else None
            for role, key in keys.items():
                answer = await client.request(
                    method,
                    _path(template),
                    params=params,
                    json=body,
                    headers={"Authorization": f"Bearer {key}"},
                )
                where = (method, template, role, answer.text[:200])
                if outranks(role, least):
                    assert answer.status_code != 403, where
                else:
                    problem = assert_problem(answer, 403, "forbidden")
                    assert problem["needed"] == least, where


async def test_every_mcp_tool_refuses_the_roles_below_its_least(
    services: Services, conn: Conn
) -> None:
    _org, keys = await _keys(conn)
    app = create_api_app(services)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=_MCP_HEADERS
    ) as client:
        listed = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Authorization": f"Bearer {keys['viewer']}"},
        )
        tools = listed.json()["result"]["tools"]
        # A new tool fails here until it is given its least role above.
        assert {tool["name"] for tool in tools} == set(TOOLS)
        for tool in tools:
            least = TOOLS[tool["name"]]
            assert LEAST_ROLE[tool["_meta"]["postbag/permission"]] == least, tool["name"]
            arguments = _arguments(tool["inputSchema"])
            # The least role passes, the one below it is refused (roles are ordered: the
            # unit test of the role table holds the rest).
            at = ROLES.index(least)
            for role in ROLES[at : at + 2]:
                key = keys[role]
                call = {"name": tool["name"], "arguments": arguments}
                answer = await client.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                    headers={"Authorization": f"Bearer {key}"},
                )
                result = answer.json()["result"]
                text = " ".join(block.get("text", "") for block in result["content"])
                where = (tool["name"], role, text[:200])
                refused = result.get("isError") and "forbidden:" in text
                if outranks(role, least):
                    assert not refused, where
                else:
                    assert refused and f"needs the {least} role" in text, where


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Made-up values for a tool's required arguments: ids of the right shape."""
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        pattern = spec.get("pattern") or ""
        if pattern.startswith("^") and "_" in pattern:
            values[name] = new_id(pattern[1:4])
        elif spec.get("type") == "object":
            values[name] = {}
        else:
            values[name] = "x"
    return values


async def test_another_organizations_object_stays_404_for_a_role_that_may_act(
    services: Services, conn: Conn
) -> None:
    _org, keys = await _keys(conn)
    other = await make_tenant(conn, "Other")
    form = await make_form(conn, other)
    theirs = await make_submission(conn, other, form, {"message": "hi"})
    app = create_api_app(services)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        operator = {"Authorization": f"Bearer {keys['operator']}"}
        viewer = {"Authorization": f"Bearer {keys['viewer']}"}
        erase = f"/v1/submissions/{theirs}/erase"
        assert_problem(await client.post(erase, headers=operator), 404, "not_found")
        assert_problem(await client.get(f"/v1/forms/{form}", headers=viewer), 404, "not_found")
        # A role that may not act is refused before any lookup: the answer says nothing
        # about whether the object exists.
        assert_problem(await client.post(erase, headers=viewer), 403, "forbidden")
