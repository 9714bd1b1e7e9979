"""The MCP server through the real `mcp` client SDK, over HTTP (`/mcp`) and stdio."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from core.platform.db import Conn
from core.platform.ids import new_id
from tests.support.builders import make_tenant
from tests.support.cli import subprocess_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.runner import World, seeded_world, submit
from tests.support.settings import TEST_SECRET_KEY

READ_TOOLS = {
    "list_forms",
    "get_form",
    "list_submissions",
    "get_submission",
    "export_submissions",
    "list_deliveries",
    "get_delivery",
    "list_destinations",
    "list_events",
    "get_usage",
    "list_alerts",
    "list_streams",
    "list_stream_events",
}
WRITE_TOOLS = {
    "create_form",
    "erase_submission",
    "release_submission",
    "release_stream_event",
    "mark_submission_spam",
    "retry_delivery",
    "acknowledge_alert",
    "send_event",
}


@pytest.fixture(scope="module")
def world(
    admin_url: str, template_name: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with seeded_world(admin_url, template_name, tmp_path_factory.mktemp("mcp")) as found:
        yield found


@asynccontextmanager
async def over_http(world: World, key: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http,
        Client(streamable_http_client(f"{world.url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28, and the initialize handshake
async def test_mcp_http__initialises_and_lists_the_tools_with_schemas_and_hints(
    world: World, mode: str
) -> None:
    async with over_http(world, world.acme.key, mode) as client:
        assert client.server_info is not None and client.server_info.name == "postbag"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        usage = await call(client, "get_usage")
    assert usage["plan"] == "pro"
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    for name in READ_TOOLS:
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is True, name
    for name in WRITE_TOOLS:
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is False, name
        assert tools[name].annotations.destructive_hint is (name == "erase_submission"), name
    listing = tools["list_submissions"]
    assert {"form_id", "status", "since", "cursor", "limit"} <= set(
        listing.input_schema["properties"]
    )
    assert listing.output_schema is not None
    assert {"data", "next_cursor"} <= set(listing.output_schema["properties"])
    assert tools["get_form"].input_schema["required"] == ["form_id"]


async def test_mcp_http__read_tools_answer_from_the_api(world: World) -> None:
    async with over_http(world, world.acme.key) as client:
        listed = await call(client, "list_submissions", form_id=world.form)
        found = await call(client, "get_submission", submission_id=world.submission)
        deliveries = await call(client, "list_deliveries", status="dead")
        usage = await call(client, "get_usage")
        events = await call(client, "list_events")
        exported = await call(client, "export_submissions", form_id=world.form)
        destinations = await call(client, "list_destinations")
    assert [row["id"] for row in listed["data"]] == [world.submission]
    assert found["values"] == {"email": "ada@example.com", "message": "Hello"}
    assert [line["id"] for line in found["deliveries"]] == [world.delivery]
    assert [row["id"] for row in deliveries["data"]] == [world.delivery]
    assert usage["plan"] == "pro"
    assert "submission.received" in {event["type"] for event in events["data"]}
    assert exported["rows"] == 1 and "ada@example.com" in exported["csv"]
    assert [row["secret_set"] for row in destinations["data"]] == [True]
    assert "whsec_" not in str(destinations)


async def test_mcp_http__export_pages_and_keeps_a_value_over_131072_characters(
    world: World,
) -> None:
    long = "é" + "x" * 200_000  # past csv.reader's field limit of 131,072 characters
    async with over_http(world, world.acme.key) as client:
        form = (await call(client, "create_form", name="Long values"))["id"]
        receipts = [submit(world.url, form, {"message": text}) for text in ("a", long, "c")]
        first = await call(client, "export_submissions", form_id=form, limit=2)
        rest = await call(
            client, "export_submissions", form_id=form, after=first["next_after"], limit=2
        )
        whole = await call(client, "export_submissions", form_id=form)
    assert (first["rows"], first["next_after"]) == (2, receipts[1])
    assert long in first["csv"] and first["csv"].startswith("receipt,")
    assert (rest["rows"], rest["next_after"]) == (1, None)
    assert rest["csv"].splitlines()[1].startswith(receipts[2])
    assert (whole["rows"], whole["next_after"]) == (3, None)


async def test_mcp_http__write_tools_create_a_form_and_retry_a_delivery(world: World) -> None:
    async with over_http(world, world.acme.key) as client:
        created = await call(
            client, "create_form", name="Newsletter", allowed_origins=["https://acme.example"]
        )
        retried = await call(client, "retry_delivery", delivery_id=world.delivery)
    assert created["submit_url"].endswith(f"/s/{created['id']}")
    assert f'action="{created["submit_url"]}"' in created["html_snippet"]
    assert retried["status"] == "pending"
    form = httpx.get(
        f"{world.url}/v1/forms/{created['id']}", headers=world.acme.headers, timeout=10
    )
    assert form.json()["allowed_origins"] == ["https://acme.example"]


async def test_mcp_http__stream_tools_send_and_read_events(world: World) -> None:
    created = httpx.post(
        f"{world.url}/v1/streams", json={"name": "Audit"}, headers=world.acme.headers, timeout=10
    )
    stream = created.json()["id"]
    async with over_http(world, world.acme.key) as client:
        sent = await call(
            client, "send_event", stream_id=stream, type="user.login", data={"user": "u1"}, id="l-1"
        )
        again = await call(
            client, "send_event", stream_id=stream, type="user.login", data={"user": "u1"}, id="l-1"
        )
        streams = await call(client, "list_streams")
        events = await call(client, "list_stream_events", stream_id=stream, type="user.login")
    assert (sent["status"], again["status"]) == ("accepted", "duplicate")
    assert again["event"] == sent["event"]
    assert stream in [s["id"] for s in streams["data"]]
    assert [(e["event"], e["data"]) for e in events["data"]] == [(sent["event"], {"user": "u1"})]
    # An ingest key opens no tool.
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {created.json()['ingest_key']['key']}"}
    ) as http:
        refused = await http.post(
            f"{world.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert refused.status_code == 403 and refused.json()["code"] == "ingest_key_only"


async def test_mcp_http__api_refusals_are_tool_errors_carrying_the_problem_code(
    world: World,
) -> None:
    async with over_http(world, world.acme.key) as client:
        missing = await client.call_tool("get_form", {"form_id": new_id("frm")})
        invalid = await client.call_tool(
            "create_form", {"name": "Bad", "allowed_origins": ["not an origin"]}
        )
    assert missing.is_error and "not_found:" in text_of(missing)
    assert invalid.is_error and "invalid_input:" in text_of(invalid)
    assert "allowed_origins" in text_of(invalid)


async def test_mcp_http__a_second_organization_sees_nothing_of_the_first(world: World) -> None:
    async with over_http(world, world.other.key) as client:
        forms = await call(client, "list_forms")
        submissions = await call(client, "list_submissions")
        deliveries = await call(client, "list_deliveries")
        events = await call(client, "list_events")
        theirs = await client.call_tool("get_submission", {"submission_id": world.submission})
        erase = await client.call_tool("erase_submission", {"submission_id": world.submission})
    assert forms["data"] == submissions["data"] == deliveries["data"] == events["data"] == []
    assert theirs.is_error and "not_found:" in text_of(theirs)
    assert erase.is_error and "not_found:" in text_of(erase)
    still = httpx.get(
        f"{world.url}/v1/submissions/{world.submission}", headers=world.acme.headers, timeout=10
    )
    assert still.json()["values_state"] == "present"


ID_ARGUMENTS = [
    ("get_form", "form_id"),
    ("export_submissions", "form_id"),
    ("list_submissions", "form_id"),
    ("get_submission", "submission_id"),
    ("erase_submission", "submission_id"),
    ("release_submission", "submission_id"),
    ("mark_submission_spam", "submission_id"),
    ("list_deliveries", "submission_id"),
    ("list_deliveries", "destination_id"),
    ("get_delivery", "delivery_id"),
    ("retry_delivery", "delivery_id"),
    ("acknowledge_alert", "alert_id"),
    ("list_stream_events", "stream_id"),
    ("send_event", "stream_id"),
    ("release_stream_event", "stream_id"),
    ("release_stream_event", "event_id"),
]


async def test_mcp_http__every_id_argument_is_in_the_table(world: World) -> None:
    # Guards the table below: every argument named like an id is there.
    async with over_http(world, world.acme.key) as client:
        tools = (await client.list_tools()).tools
    named = {
        (tool.name, argument)
        for tool in tools
        for argument in tool.input_schema["properties"]
        if argument.endswith("_id")
    }
    assert named == set(ID_ARGUMENTS)


@pytest.mark.parametrize(
    ("tool", "argument"), ID_ARGUMENTS, ids=[f"{t}.{a}" for t, a in ID_ARGUMENTS]
)
async def test_mcp_http__path_like_ids_are_refused_before_any_call(
    world: World, tool: str, argument: str
) -> None:
    # What a prompt injection hidden in a submission could ask an assistant to send.
    attacks = [
        f"../submissions/{world.submission}/erase?",
        "../keys",
        f"{world.submission}/erase",
        f"{world.submission}?x=1",
        "frm_" + "0" * 26 + "/../../keys",
    ]
    async with over_http(world, world.acme.key) as client:
        for value in attacks:
            result = await client.call_tool(tool, {argument: value})
            assert result.is_error, (tool, value)
            assert "pattern" in text_of(result), text_of(result)
            assert "pb_" not in text_of(result) and "key_" not in text_of(result)
    still = httpx.get(
        f"{world.url}/v1/submissions/{world.submission}", headers=world.acme.headers, timeout=10
    )
    assert still.json()["values_state"] == "present"


@pytest.mark.parametrize("authorization", [None, "Bearer pb_unknown", "Basic YTpi"])
def test_mcp_http__without_a_live_key_is_401(world: World, authorization: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = httpx.post(f"{world.url}/mcp", json=initialize, headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "unauthenticated"


async def test_mcp_http__the_sdk_client_without_a_key_cannot_connect(world: World) -> None:
    with pytest.raises(BaseExceptionGroup) as refused:
        async with httpx2.AsyncClient() as http:
            async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)):
                pass
    assert refused.group_contains(MCPError)


async def test_mcp_http__erase_erases_the_values(world: World) -> None:
    receipt = submit(world.url, world.form, {"email": "grace@example.com", "message": "Bye"})
    async with over_http(world, world.acme.key) as client:
        erased = await call(client, "erase_submission", submission_id=receipt)
        after = await call(client, "get_submission", submission_id=receipt)
    assert erased["values_state"] == "erased" and erased["values"] is None
    assert after["erased_at"] is not None and after["values"] is None
    exported = httpx.get(
        f"{world.url}/v1/submissions/export.csv",
        params={"form": world.form},
        headers=world.acme.headers,
        timeout=10,
    )
    assert "grace@example.com" not in exported.text


async def test_mcp_http__mark_as_spam_then_release_delivers_once(world: World) -> None:
    receipt = submit(world.url, world.form, {"email": "ada@example.com", "message": "Hi"})
    async with over_http(world, world.acme.key) as client:
        marked = await call(client, "mark_submission_spam", submission_id=receipt)
        released = await call(client, "release_submission", submission_id=receipt)
        again = await client.call_tool("release_submission", {"submission_id": receipt})
    assert (marked["status"], marked["reason"]) == ("spam", "marked_spam")
    assert (released["status"], released["released_at"] is not None) == ("accepted", True)
    assert [h["type"] for h in released["history"]][-2:] == [
        "submission.marked_spam",
        "submission.released",
    ]
    assert again.is_error and "already_released:" in text_of(again)


async def test_mcp_http__release_stream_event_delivers_a_quarantined_event_once(
    world: World,
) -> None:
    headers = world.acme.headers
    with httpx.Client(base_url=world.url, timeout=10) as api:
        made = api.post(
            "/v1/streams", json={"name": "MCP", "schema_mode": "enforce"}, headers=headers
        )
        stream = made.json()
        path = f"/v1/streams/{stream['id']}"
        schema = {"type": "object", "properties": {"total": {"minimum": 1}}}
        assert api.post(f"{path}/schemas", json={"schema": schema}, headers=headers).is_success
        posted = api.post(
            f"{path}/events",
            json={"type": "order.paid", "data": {"total": 0}},
            headers={"Authorization": f"Bearer {stream['ingest_key']['key']}"},
        ).json()
    assert posted["status"] == "quarantined"
    ids = {"stream_id": stream["id"], "event_id": posted["event"]}
    async with over_http(world, world.acme.key) as client:
        released = await call(client, "release_stream_event", **ids)
        again = await client.call_tool("release_stream_event", ids)
    assert (released["status"], released["released_at"] is not None) == ("accepted", True)
    assert again.is_error and "already_released:" in text_of(again)


@pytest.mark.slow
async def test_mcp_stdio__postbag_mcp_serves_the_tools_as_a_client_of_the_url(
    world: World,
) -> None:
    env = {"POSTBAG_API_URL": world.url, "POSTBAG_API_KEY": world.acme.key}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    server = StdioServerParameters(command=sys.executable, args=["-m", "local.cli", "mcp"], env=env)
    async with Client(server) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        listed = await call(client, "list_submissions", form_id=world.form)
        created = await call(client, "create_form", name="From stdio")
        missing = await client.call_tool("get_delivery", {"delivery_id": new_id("dlv")})
    assert tools == READ_TOOLS | WRITE_TOOLS
    assert world.submission in [row["id"] for row in listed["data"]]
    assert missing.is_error and "not_found:" in text_of(missing)
    form = httpx.get(
        f"{world.url}/v1/forms/{created['id']}", headers=world.acme.headers, timeout=10
    )
    assert form.json()["name"] == "From stdio"


def _mcp_event(body: dict[str, Any], authorization: str | None) -> dict[str, Any]:
    event = load_event("function_url_post_json.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/mcp"
    headers = {k: v for k, v in event["headers"].items() if k not in {"origin", "idempotency-key"}}
    headers["accept"] = "application/json, text/event-stream"
    headers["mcp-protocol-version"] = "2025-11-25"
    if authorization:
        headers["authorization"] = authorization
    event["headers"] = headers
    event["body"] = json.dumps(body)
    headers["content-length"] = str(len(event["body"]))
    return event


async def test_mcp_on_the_api_function__a_tool_call_per_invocation_and_401_without_a_key(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_tenant(conn, plan="team")
    call_usage = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_usage", "arguments": {}},
    }
    answered, refused = invoke(
        "api",
        [_mcp_event(call_usage, f"Bearer {tenant.key}"), _mcp_event(call_usage, None)],
        FakeContext(),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
    )
    assert answered["statusCode"] == 200, answered
    result = json.loads(answered["body"])["result"]
    assert result["structuredContent"]["plan"] == "team" and not result.get("isError")
    assert refused["statusCode"] == 401
    body = base64.b64decode(refused["body"]) if refused["isBase64Encoded"] else refused["body"]
    assert json.loads(body)["code"] == "unauthenticated"


@pytest.mark.slow
def test_api_function__cold_import_leaves_the_mcp_sdk_for_the_first_mcp_request(
    db_url: str,
) -> None:
    code = "import sys, handlers.api; print('mcp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "False"
