"""The n8n trigger node (`integrations/n8n/`): its webhook lifecycle against a real Postbag,
as n8n runs it when a workflow is activated and deactivated, and its webhook method on a
real delivery: verified, started once per `webhook-id`, a forged one refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.http.server import combined_app
from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import make_tenant
from tests.support.connectors import INTEGRATIONS, run_node
from tests.support.fuzzing import served
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.runner import submit

LIFECYCLE = INTEGRATIONS / "n8n" / "test" / "lifecycle.js"

pytestmark = pytest.mark.slow


async def test_n8n__activation_subscribes_deliveries_start_once_deactivation_unsubscribes(
    services: Services, conn: Conn, db_url: str, tmp_path: Path
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as api:
        form = await create(api, acme, "/v1/forms", {"name": "Contact"})
    with served(db_url, tmp_path, combined_app) as url, receiver() as n8n:
        node: dict[str, Any] = {
            "host": url + "/",
            "apiKey": acme.key,
            "webhookUrl": f"{n8n.url}/webhook/abc/webhook",
            "parameters": {"event": "submission.created", "form": form["id"]},
            "state": str(tmp_path / "static.json"),
        }
        activated = run_node(LIFECYCLE, ["activate", json.dumps(node)])
        receipt = submit(url, form["id"], {"email": "ada@example.com", "message": "Hello"})
        assert (await Deliverer(services).run_pass(now=utcnow(), budget=30))["sent"] == 1
        [request] = n8n.requests
        body = tmp_path / "body.json"
        body.write_bytes(request.body)
        delivery = {**node, "headers": request.headers, "bodyFile": str(body)}
        first = run_node(LIFECYCLE, ["deliver", json.dumps(delivery)])
        # The same delivery again (a retry after a lost answer): acknowledged, not started.
        again = run_node(LIFECYCLE, ["deliver", json.dumps(delivery)])
        forged_body = tmp_path / "forged.json"
        forged_body.write_bytes(request.body.replace(b"Hello", b"Jello"))
        forged = {**delivery, "bodyFile": str(forged_body)}
        forged["headers"] = {**request.headers, "webhook-id": "msg_other"}
        refused = run_node(LIFECYCLE, ["deliver", json.dumps(forged)])
        deactivated = run_node(LIFECYCLE, ["deactivate", json.dumps(node)])
        # Activated again: a new hook, with a new secret.
        reactivated = run_node(LIFECYCLE, ["activate", json.dumps(node)])
    assert activated["before"] is False and activated["created"] is True
    assert activated["after"] is True and activated["secretKept"] is True
    assert activated["forms"] == [{"name": "Contact", "value": form["id"]}]
    [[started]] = first["result"]["workflowData"]
    assert started["json"] == json.loads(request.body)
    assert started["json"]["receipt"] == receipt
    assert again["result"] == {"webhookResponse": "duplicate"}
    assert refused["result"] == {"noWebhookResponse": True}
    assert refused["answered"]["status"] == 401
    assert deactivated["hookId"] == activated["hookId"]
    assert (deactivated["deleted"], deactivated["after"]) == (True, False)
    assert reactivated["created"] is True and reactivated["hookId"] != activated["hookId"]
    hooks = await rows(conn, "SELECT id, deleted_reason FROM hooks ORDER BY id")
    assert hooks == [
        {"id": activated["hookId"], "deleted_reason": "unsubscribed"},
        {"id": reactivated["hookId"], "deleted_reason": None},
    ]
