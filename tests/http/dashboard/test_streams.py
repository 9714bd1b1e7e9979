"""The dashboard's stream pages over HTTP with a real database: a stream and its key shown
once, a posted event with its delivery line, erase, keys revoked, scoping."""

from __future__ import annotations

import re

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import WEBHOOK, api_client
from tests.support.builders import make_tenant
from tests.support.dashboard import csrf_of, dashboard_client, sign_in
from tests.support.peers import receiver

PRIVATE = "order-note-private-4471"


async def test_stream_pages__create_post_read_erase_revoke(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    other = await make_tenant(conn, name="Other")
    with receiver() as peer:
        async with dashboard_client(services) as client:
            csrf = await sign_in(client, acme.key)
            made = await client.post("/app/streams", data={"csrf": csrf, "name": "Orders"})
            assert made.status_code == 200, made.text
            key = re.search(r"pbs_[A-Za-z0-9_-]+", made.text)
            assert key is not None
            stream = re.search(r"/app/streams/(str_[0-9a-z]+)", made.text)
            assert stream is not None
            stream_id = stream.group(1)
            async with api_client(services) as api:
                hook = await api.post(
                    "/v1/destinations",
                    json={**WEBHOOK, "config": {"url": peer.url}},
                    headers=acme.headers,
                )
                await api.post(
                    f"/v1/streams/{stream_id}/routes",
                    json={"destination_id": hook.json()["id"]},
                    headers=acme.headers,
                )
                posted = await api.post(
                    f"/v1/streams/{stream_id}/events",
                    json={"id": "o-7", "type": "order.paid", "data": {"note": PRIVATE}},
                    headers={"Authorization": f"Bearer {key.group(0)}"},
                )
            event = posted.json()["event"]
            await Deliverer(services, options=WorkerOptions(timeout=2, margin=0.1)).run_pass(
                now=utcnow(), budget=10
            )
            listed = await client.get("/app/streams")
            shown = await client.get(f"/app/streams/{stream_id}")
            detail = await client.get(f"/app/streams/{stream_id}/events/{event}")
            unconfirmed = await client.post(
                f"/app/streams/{stream_id}/events/{event}/erase", data={"csrf": csrf}
            )
            still = await client.get(f"/app/streams/{stream_id}/events/{event}")
            erased = await client.post(
                f"/app/streams/{stream_id}/events/{event}/erase",
                data={"csrf": csrf, "confirm": "erase"},
            )
            after = await client.get(f"/app/streams/{stream_id}/events/{event}")
            key_id = re.search(r"/keys/(sky_[0-9a-z]+)/revoke", shown.text)
            assert key_id is not None
            revoked = await client.post(
                f"/app/streams/{stream_id}/keys/{key_id.group(1)}/revoke", data={"csrf": csrf}
            )
            async with api_client(services) as api:
                refused = await api.post(
                    f"/v1/streams/{stream_id}/events",
                    json={"type": "t", "data": {}},
                    headers={"Authorization": f"Bearer {key.group(0)}"},
                )
        async with dashboard_client(services) as intruder:
            await sign_in(intruder, other.key)
            foreign = await intruder.get(f"/app/streams/{stream_id}/events/{event}")
    assert "Orders" in listed.text and stream_id in listed.text
    assert "o-7" in shown.text and "order.paid" in shown.text and "Ingest keys" in shown.text
    assert PRIVATE in detail.text and "Delivered" in detail.text
    assert unconfirmed.status_code == 422 and PRIVATE in still.text
    assert erased.status_code == 303
    assert PRIVATE not in after.text and "Data erased" in after.text
    assert revoked.status_code == 303 and refused.status_code == 401
    assert foreign.status_code == 404 and PRIVATE not in foreign.text
    assert csrf_of(after.text)
