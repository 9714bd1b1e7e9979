"""The visitor's field order, end to end: values, labels, text, the receipt and the CSV."""

from __future__ import annotations

import csv
import io
import json
import re

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import TELEGRAM_TOKEN, make_form, make_submission, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver, telegram_api
from tests.support.settings import with_settings
from tests.support.submit import submit_client

LABELS = {"mid": "Middle", "zeta": "Zeta", "unused": "Never sent"}


def _receipt_names(html: str) -> list[str]:
    """The field names of a receipt page's values, top to bottom."""
    values = html.split('class="fields values"', 1)[1].split("</dl>", 1)[0]
    return re.findall(r"<dt>([^<]*?)(?: <span|</dt>)", values)


async def test_field_order__posted_order_everywhere(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver(telegram_api()) as bot_api:
        bot = with_settings(services, telegram_api_url=bot_api.url + "/")
        async with api_client(bot) as api:
            form = await create(api, acme, "/v1/forms", {"name": "Contact", "labels": LABELS})
            chat = await create(
                api,
                acme,
                "/v1/destinations",
                {
                    "type": "telegram",
                    "name": "Team",
                    "config": {"chat_id": "-100123"},
                    "secret": TELEGRAM_TOKEN,
                },
            )
            await create(
                api, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": chat["id"]}
            )
        async with submit_client(bot) as client:
            first = await client.post(
                f"/s/{form['id']}",
                content="zeta=z&alpha=a&mid=m",
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Accept": "application/json",
                },
            )
            second = await client.post(
                f"/s/{form['id']}",
                json={"omega": "o", "beta": "b", "zeta": "z2"},
            )
        await Deliverer(bot).run_pass(now=utcnow(), budget=30)
        receipt = first.json()["receipt"]
        async with api_client(bot, acme.key) as api:
            read = (await api.get(f"/v1/submissions/{receipt}")).json()
            forms_read = (await api.get(f"/v1/forms/{form['id']}")).json()
            exported = await api.get("/v1/submissions/export.csv", params={"form": form["id"]})
        async with dashboard_client(bot) as dash:
            await sign_in(dash, acme.key)
            page = (await dash.get(f"/app/submissions/{receipt}")).text
    assert second.status_code == 201
    assert list(read["values"]) == ["zeta", "alpha", "mid"]
    assert list(forms_read["labels"]) == ["mid", "zeta", "unused"]
    # The text every person reads (email, Telegram, chat): one line per field, in order.
    texts = [json.loads(r.body)["text"].splitlines() for r in bot_api.requests]
    first_text = next(t for t in texts if t[-1].startswith(f"Receipt {receipt}"))
    assert first_text[2:5] == ["Zeta: z", "alpha: a", "Middle: m"]
    assert _receipt_names(page) == ["Zeta", "alpha", "Middle"]
    header = next(csv.reader(io.StringIO(exported.text)))
    assert header[5:] == ["mid", "zeta", "unused", "alpha", "omega", "beta"]


async def test_field_order__rows_stored_before_fall_back_to_labels_then_names(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme, labels={"zeta": "Zeta", "mid": "Middle"})
    # Stored before the order was kept: no field_order.
    old = await make_submission(conn, acme, form, {"b": 1, "mid": 2, "a": 3, "zeta": 4})
    async with api_client(services, acme.key) as api:
        read = (await api.get(f"/v1/submissions/{old}")).json()
        exported = await api.get("/v1/submissions/export.csv", params={"form": form})
    assert list(read["values"]) == ["zeta", "mid", "a", "b"]
    assert next(csv.reader(io.StringIO(exported.text)))[5:] == ["zeta", "mid", "a", "b"]
