"""What the receipt and alert pages show: addresses as addresses, names with links."""

from __future__ import annotations

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import EMAIL
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver, status
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=1, margin=0.1)


async def test_receipt__an_email_target_reads_as_its_address(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=0)
    await make_route_to(conn, tenant, form, type="email", config=EMAIL["config"], secrets=())
    async with submit_client(services) as client:
        receipt = (await client.post(f"/s/{form}", json={"a": "1"})).json()["receipt"]
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        page = (await client.get(f"/app/submissions/{receipt}")).text
    assert '<span class="target">owner@example.com</span>' in page
    assert "[&#39;owner@example.com&#39;]" not in page and "['owner" not in page


async def test_alerts_page__names_its_destination_and_links_the_delivery(
    services: Services, conn: Conn
) -> None:
    with receiver(status(410)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await conn.execute(
            "UPDATE destinations SET name = 'Team CRM' WHERE id = %(id)s", {"id": dst}
        )
        sub, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        page = (await client.get("/app/alerts")).text
        line = (await client.get(f"/app/submissions/{sub}")).text
        destinations = (await client.get("/app/destinations")).text
    assert f'<a href="/app/destinations#dest-{dst}">Team CRM</a>' in page
    assert f'<a href="/app/submissions/{sub}#line-{dlv}">Last delivery that gave up</a>' in page
    assert "http 410" in page
    assert f"<code>{dst}</code>" not in page
    # The links land on the destination's row and the delivery's line.
    assert f'id="dest-{dst}"' in destinations and f'id="line-{dlv}"' in line
