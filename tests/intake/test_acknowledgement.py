from __future__ import annotations

from typing import Any

import pytest

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.settings import SENDER, with_settings
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}
ACK = {
    "field": "email",
    "subject": "Thanks, {{name}}",
    "text": "Hello {{name}},\nwe received your message about {{topic}}.",
}


async def _form(conn: Conn) -> str:
    _, form = await setup_form(conn, routes=1, consent_field="consent", ack_email=ACK, labels={})
    return form


async def test_acknowledgement__consent_ticked_sends_one_email_with_the_template(
    services: Services,
    conn: Conn,
    ses: Any,
) -> None:
    form = await _form(conn)
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            data={"name": "Ada", "email": "ada@example.com", "topic": "bikes", "consent": "on"},
            headers=JSON_ACCEPT,
        )
    assert response.status_code == 201
    deliveries = await rows(
        conn,
        "SELECT kind, channel, route_id, destination_id, target FROM deliveries ORDER BY kind",
    )
    assert [(d["kind"], d["channel"]) for d in deliveries] == [
        ("acknowledgement", "email"),
        ("submission", "webhook"),
    ]
    ack = deliveries[0]
    assert ack["route_id"] is None and ack["destination_id"] is None
    assert ack["target"] == {"to": ["ada@example.com"]}
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    # The webhook goes to a host that does not resolve here; only the email matters.
    await Deliverer(mail, options=WorkerOptions(timeout=1, margin=0.1)).run_pass(
        now=utcnow(), budget=5
    )
    [sent] = ses.sent_messages
    assert sent.destinations["ToAddresses"] == ["ada@example.com"]
    assert sent.subject == "Thanks, Ada"
    assert sent.body == "Hello Ada,\nwe received your message about bikes."
    [row] = await rows(conn, "SELECT status FROM deliveries WHERE kind = 'acknowledgement'")
    assert row["status"] == "sent"


@pytest.mark.parametrize(
    "values",
    [
        {"name": "Ada", "email": "ada@example.com"},
        {"name": "Ada", "email": "ada@example.com", "consent": "off"},
        {"name": "Ada", "email": "not-an-address", "consent": "yes"},
        {"name": "Ada", "consent": "true"},
    ],
    ids=["no_consent", "consent_off", "invalid_address", "no_address"],
)
async def test_acknowledgement__none_without_consent_or_a_valid_address(
    services: Services, conn: Conn, values: dict[str, str]
) -> None:
    form = await _form(conn)
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", data=values, headers=JSON_ACCEPT)
    assert response.status_code == 201
    kinds = await rows(conn, "SELECT kind FROM deliveries")
    assert kinds == [{"kind": "submission"}]


async def test_acknowledgement__json_true_consent_and_not_for_spam(
    services: Services, conn: Conn
) -> None:
    form = await _form(conn)
    async with submit_client(services) as client:
        ok = await client.post(f"/s/{form}", json={"email": "ada@example.com", "consent": True})
        spam = await client.post(
            f"/s/{form}",
            json={"email": "bot@example.com", "consent": True, "_gotcha": "x"},
        )
    assert ok.status_code == spam.status_code == 201
    acks = await rows(conn, "SELECT submission_id FROM deliveries WHERE kind = 'acknowledgement'")
    assert acks == [{"submission_id": ok.json()["receipt"]}]


async def test_acknowledgement__dead_email_alerts_on_the_form(
    services: Services,
    conn: Conn,
    ses: Any,
) -> None:
    form = await _form(conn)
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", json={"email": "ada@example.com", "consent": "1"}
        )
    assert response.status_code == 201
    # An address the provider can never take (here: none at all) ends the email `dead`.
    await conn.execute(
        """UPDATE deliveries SET target = '{"to": []}' WHERE kind = 'acknowledgement'"""
    )
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    await Deliverer(mail, options=WorkerOptions(timeout=1, margin=0.1)).run_pass(
        now=utcnow(), budget=5
    )
    [row] = await rows(conn, "SELECT status, reason FROM deliveries WHERE kind = 'acknowledgement'")
    assert (row["status"], row["reason"]) == ("dead", "invalid_target")
    alerts = await rows(conn, "SELECT kind, subject_id FROM alerts")
    assert {"kind": "delivery.dead", "subject_id": form} in alerts
