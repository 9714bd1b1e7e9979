"""The Zapier app (`integrations/zapier/`) in zapier-platform-core's app tester against a
real Postbag: its definition valid for Zapier's schema, the connection's base URL and key,
the forms' dropdown, subscribing a REST hook, a delivery signed and read as the trigger
reads it, the samples, the search, unsubscribing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from core.http.server import combined_app
from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.streams.test_ingest import new_stream
from tests.support.api import api_client, create
from tests.support.builders import make_tenant
from tests.support.connectors import INTEGRATIONS, need_node_package, run_node
from tests.support.fuzzing import served
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.runner import submit

HARNESS = INTEGRATIONS / "zapier" / "test" / "harness.js"

pytestmark = pytest.mark.slow


def _steps(*steps: tuple[str, dict[str, Any]]) -> str:
    return json.dumps([list(step) for step in steps])


async def test_zapier__the_app_subscribes_receives_samples_finds_and_unsubscribes(
    services: Services, conn: Conn, db_url: str, tmp_path: Path
) -> None:
    need_node_package("zapier-platform-core")
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as api:
        form = await create(api, acme, "/v1/forms", {"name": "Contact"})
        stream = await new_stream(api, acme)
    on_form = {"trigger": "new_submission", "inputData": {"form": form["id"]}}
    on_stream = {"trigger": "new_stream_event", "inputData": {"stream": stream["id"]}}
    with served(db_url, tmp_path, combined_app) as url, receiver() as zapier:
        env = {"POSTBAG_URL": url, "POSTBAG_KEY": acme.key}
        # What a Zap's editor does before the first submission: connect, pick a form, show
        # the sample, turn the Zap on.
        invalid, _, forms, streams, placeholder, subscribed = run_node(
            HARNESS,
            [
                _steps(
                    ("validate", {}),
                    ("auth", {}),
                    ("forms", {}),
                    ("streams", {}),
                    ("list", on_form),
                    ("subscribe", {**on_form, "targetUrl": f"{zapier.url}/hooks/standard/1/"}),
                )
            ],
            **env,
        )
        receipt = submit(url, form["id"], {"email": "ada@example.com", "message": "Hello there"})
        assert (await Deliverer(services).run_pass(now=utcnow(), budget=30))["sent"] == 1
        [request] = zapier.requests
        hook_two = {**on_stream, "targetUrl": f"{zapier.url}/hooks/standard/2/"}
        received, listed, by_receipt, by_words, nothing, stream_hook, stream_placeholder = run_node(
            HARNESS,
            [
                _steps(
                    ("receive", {"trigger": "new_submission", "body": json.loads(request.body)}),
                    ("list", on_form),
                    ("find", {"inputData": {"receipt": receipt}}),
                    ("find", {"inputData": {"query": "hello", "form": form["id"]}}),
                    ("find", {"inputData": {"query": "absent"}}),
                    ("subscribe", hook_two),
                    ("list", on_stream),
                )
            ],
            **env,
        )
        # Turning the Zaps off; again for one already gone (a 410 ended it): not an error.
        unsubscribed = run_node(
            HARNESS,
            [
                _steps(
                    ("unsubscribe", {"trigger": "new_submission", "subscribeData": subscribed}),
                    ("unsubscribe", {"trigger": "new_stream_event", "subscribeData": stream_hook}),
                    ("unsubscribe", {"trigger": "new_submission", "subscribeData": subscribed}),
                )
            ],
            **env,
        )
    assert unsubscribed == [{}, {}, {}]
    assert invalid == []
    assert [f["id"] for f in forms] == [form["id"]]
    assert [s["id"] for s in streams] == [stream["id"]]
    assert [item["id"] for item in placeholder] == ["sub_sample"]
    assert subscribed["event"] == "submission.created" and subscribed["form"] == form["id"]
    Webhook(subscribed["secret"]).verify(request.body, request.headers)
    # The trigger reads the delivered body as it is, with Zapier's `id` (the receipt) first.
    [item] = received
    assert item == {"id": receipt, **json.loads(request.body)}
    assert listed == received
    assert [found["id"] for found in by_receipt] == [receipt]
    assert by_receipt[0]["values"]["message"] == "Hello there"
    assert [found["id"] for found in by_words] == [receipt]
    assert nothing == []
    assert [item["id"] for item in stream_placeholder] == ["evt_sample"]
    ended = await rows(conn, "SELECT event, deleted_reason FROM hooks ORDER BY id")
    assert ended == [
        {"event": "submission.created", "deleted_reason": "unsubscribed"},
        {"event": "stream.event", "deleted_reason": "unsubscribed"},
    ]
