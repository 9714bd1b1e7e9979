"""The submit function wakes the deliver function: real handlers, a Lambda API double on
loopback running the deliver handler, a webhook receiver on loopback."""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from typing import Any

import pytest

from core.platform import deliver_function
from core.platform.db import Conn
from tests.support.builders import Tenant, make_form, make_route_to, make_tenant
from tests.support.lambda_api import lambda_api, lambda_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.peers import Peer, closed_port, hang, receiver
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

FORM_ID = "frm_01j1ambda0mv1t1part0000000"


def _posts(count: int) -> list[dict[str, Any]]:
    """`count` JSON posts to FORM_ID, each a different submission."""
    template = load_event("function_url_post_json.json")
    events = []
    for index in range(count):
        event = copy.deepcopy(template)
        event["body"] = json.dumps({"name": f"Visitor {index}", "email": "v@example.com"})
        event["headers"]["content-length"] = str(len(event["body"]))
        event["headers"]["idempotency-key"] = f"wake-{index}-{uuid.uuid4()}"
        events.append(event)
    return events


async def _form_to(conn: Conn, peer: Peer) -> Tenant:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant, id=FORM_ID, allowed_origins=["https://site.example"])
    await make_route_to(conn, tenant, form, config={"url": f"{peer.url}/hook"})
    return tenant


def _env(db_url: str, endpoint: dict[str, str]) -> dict[str, str]:
    # A function name of its own: the debounce is per process and per function.
    return {
        "POSTBAG_DATABASE_URL": db_url,
        "POSTBAG_SECRET_KEY": TEST_SECRET_KEY,
        "POSTBAG_ALLOW_PRIVATE_TARGETS": "true",
        "POSTBAG_DELIVER_FUNCTION_NAME": f"postbag-deliver-{uuid.uuid4().hex[:8]}",
        **endpoint,
    }


async def _statuses(conn: Conn) -> list[str]:
    return [r["status"] for r in await rows(conn, "SELECT status FROM deliveries ORDER BY id")]


async def test_wakeup__submit_invokes_the_deliver_function_which_delivers(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as hook, lambda_api() as api:
        await _form_to(conn, hook)
        # The schedule's long loop shapes scheduled invocations only, never a woken one.
        env = {**_env(db_url, lambda_env(api)), "POSTBAG_DELIVER_LOOP_SECONDS": "60"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        [response] = await asyncio.to_thread(
            invoke, "submit", _posts(1), FakeContext(), monkeypatch
        )
        assert response["statusCode"] == 201
        await asyncio.to_thread(api.wait_idle)
        [woken] = api.invocations
        assert woken.function == env["POSTBAG_DELIVER_FUNCTION_NAME"]
        assert woken.payload == {"source": "postbag.wakeup"}
        # The woken invocation, not a schedule (none runs here), made the send.
        assert api.results[0]["sent"] == 1
        assert [r.path for r in hook.requests] == ["/hook"]
        [(began, ended)] = api.runs
        assert 2.0 < ended - began < 10, "a woken invocation passes for about 2.2 s"
    assert await _statuses(conn) == ["sent"]


async def test_wakeup__a_burst_costs_one_invoke_and_all_of_it_is_delivered(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A longer interval than the default second, so that a slow machine's burst still falls
    # inside one; the woken invocation lingers for longer accordingly.
    monkeypatch.setattr(deliver_function, "WAKE_INTERVAL_SECONDS", 2.0)
    with receiver() as hook, lambda_api() as api:
        await _form_to(conn, hook)
        for key, value in _env(db_url, lambda_env(api)).items():
            monkeypatch.setenv(key, value)
        started = time.monotonic()
        responses = await asyncio.to_thread(invoke, "submit", _posts(5), FakeContext(), monkeypatch)
        burst = time.monotonic() - started
        assert [r["statusCode"] for r in responses] == [201] * 5
        await asyncio.to_thread(api.wait_idle)
        assert burst < 2.0, f"the burst took {burst:.2f} s, longer than the interval"
        assert len(api.invocations) == 1
        assert sum(result["sent"] for result in api.results) == 5
        assert len(hook.requests) == 5
    assert await _statuses(conn) == ["sent"] * 5


def _timed_submits(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> tuple[list[dict[str, Any]], list[float]]:
    """`count` submits in one warm sandbox, each after the wake-up interval, and how long
    each warm one took (the first one's import is left out)."""
    marks: list[float] = []

    def between(_index: int) -> None:
        marks.append(time.monotonic())
        time.sleep(deliver_function.WAKE_INTERVAL_SECONDS + 0.1)
        marks.append(time.monotonic())

    responses = invoke("submit", _posts(count), FakeContext(), monkeypatch, between=between)
    took = [marks[2 * i + 2] - marks[2 * i + 1] for i in range(count - 1)]
    return responses, took


async def test_wakeup__a_hanging_lambda_api_is_given_up_within_the_bound(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as hook, lambda_api(answer=hang(5.0, 202)) as api:
        await _form_to(conn, hook)
        for key, value in _env(db_url, lambda_env(api)).items():
            monkeypatch.setenv(key, value)
        responses, took = await asyncio.to_thread(_timed_submits, monkeypatch, 3)
        assert [r["statusCode"] for r in responses] == [201] * 3
        # Each submit asked (the double heard it) and none waited for the 5 s answer: the
        # bound is 0.1 s on top of a submit's own time.
        assert len(api.invocations) == 3
        assert max(took) < 1.0, took
    assert await _statuses(conn) == ["pending"] * 3


async def test_wakeup__lambda_api_down_submit_still_answers_and_the_schedule_delivers(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as hook:
        await _form_to(conn, hook)
        env = _env(db_url, lambda_env(f"http://127.0.0.1:{closed_port()}"))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        responses, took = await asyncio.to_thread(_timed_submits, monkeypatch, 2)
        assert [r["statusCode"] for r in responses] == [201] * 2
        assert max(took) < 1.0, took
        assert await _statuses(conn) == ["pending"] * 2
        # Nothing is lost: the minute's scheduled invocation delivers them.
        [result] = await asyncio.to_thread(
            invoke,
            "deliver_tick",
            [load_event("eventbridge_scheduled.json")],
            FakeContext(),
            monkeypatch,
        )
        assert result["sent"] == 2
    assert await _statuses(conn) == ["sent"] * 2


def _api_post(path: str, key: str) -> dict[str, Any]:
    """The api function's event for an empty `POST` to `path`."""
    event = copy.deepcopy(load_event("function_url_post_json.json"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["body"] = ""
    event["headers"] = {
        "host": event["headers"]["host"],
        "authorization": f"Bearer {key}",
        "content-length": "0",
        "x-forwarded-for": "203.0.113.7",
    }
    return event


async def test_wakeup__releasing_from_quarantine_wakes_the_deliver_function(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as hook, lambda_api() as api:
        tenant = await _form_to(conn, hook)
        for key, value in _env(db_url, lambda_env(api)).items():
            monkeypatch.setenv(key, value)
        [post] = _posts(1)
        post["headers"]["origin"] = "https://elsewhere.example"  # stored, quarantined
        [submitted] = await asyncio.to_thread(invoke, "submit", [post], FakeContext(), monkeypatch)
        receipt = json.loads(submitted["body"])["receipt"]
        assert await _statuses(conn) == []
        assert api.invocations == []  # nothing to deliver, nothing woken
        [released] = await asyncio.to_thread(
            invoke,
            "api",
            [_api_post(f"/v1/submissions/{receipt}/release", tenant.key)],
            FakeContext(),
            monkeypatch,
        )
        assert released["statusCode"] == 200, released["body"]
        await asyncio.to_thread(api.wait_idle)
        assert len(api.invocations) == 1
        assert api.results[0]["sent"] == 1
        assert [r.path for r in hook.requests] == ["/hook"]
    assert await _statuses(conn) == ["sent"]


async def test_wakeup__retrying_a_dead_delivery_by_hand_wakes_the_deliver_function(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as hook, lambda_api() as api:
        tenant = await _form_to(conn, hook)
        for key, value in _env(db_url, lambda_env(api)).items():
            monkeypatch.setenv(key, value)
        [post] = _posts(1)
        [submitted] = await asyncio.to_thread(invoke, "submit", [post], FakeContext(), monkeypatch)
        assert submitted["statusCode"] == 201, submitted["body"]
        await asyncio.to_thread(api.wait_idle)
        assert await _statuses(conn) == ["sent"]
        # The receiver lost it after all: the owner sends it again by hand.
        await conn.execute("UPDATE deliveries SET status = 'dead', reason = 'http_500'")
        [delivery] = await rows(conn, "SELECT id FROM deliveries")
        path = f"/v1/deliveries/{delivery['id']}/retry"
        await asyncio.sleep(deliver_function.WAKE_INTERVAL_SECONDS)  # past the debounce
        [retried] = await asyncio.to_thread(
            invoke, "api", [_api_post(path, tenant.key)], FakeContext(), monkeypatch
        )
        assert retried["statusCode"] == 200, retried["body"]
        await asyncio.to_thread(api.wait_idle)
        assert len(api.invocations) == 2
        assert [r.path for r in hook.requests] == ["/hook", "/hook"]
    assert await _statuses(conn) == ["sent"]
