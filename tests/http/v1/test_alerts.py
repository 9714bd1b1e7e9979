"""Alerts resolve themselves when a later delivery to their destination is sent."""

from __future__ import annotations

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.peers import receiver, status

FAST = WorkerOptions(timeout=1, margin=0.1)


async def test_alerts__a_later_sent_delivery_resolves_the_open_alert(
    services: Services, conn: Conn
) -> None:
    with receiver(status(410)) as peer, receiver(status(410)) as other_peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        other, other_rte = await make_route_to(conn, tenant, form, config={"url": other_peer.url})
        _, dead = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        await make_delivery(conn, tenant, form, other, other_rte, target={"url": other_peer.url})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
        async with api_client(services, tenant.key) as api:
            opened = (await api.get("/v1/alerts")).json()["data"]
            # A failure does not resolve it.
            peer.respond = status(503)
            await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            still = (await api.get("/v1/alerts", params={"status": "open"})).json()["data"]
            peer.respond = status(200)
            _, recovered = await make_delivery(
                conn, tenant, form, dst, rte, target={"url": peer.url}
            )
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            alerts = {a["subject"]: a for a in (await api.get("/v1/alerts")).json()["data"]}
            events = (await api.get("/v1/events")).json()["data"]
    assert {(a["subject"], a["status"], a["subject_name"]) for a in opened} == {
        (dst, "open", "Hook"),
        (other, "open", "Hook"),
    }
    assert {a["subject"] for a in still} == {dst, other}
    assert (alerts[dst]["status"], alerts[dst]["resolved_by"]) == ("resolved", recovered)
    assert alerts[dst]["resolved_at"] is not None and alerts[dst]["acknowledged_at"] is None
    assert alerts[other]["status"] == "open"
    [resolved] = [e for e in events if e["type"] == "alert.resolved"]
    assert resolved["subject"] == alerts[dst]["id"]
    assert resolved["data"] == {
        "kind": "delivery.dead",
        "subject": dst,
        "occurrences": 1,
        "last_dead_delivery": dead,
        "delivery": recovered,
    }
