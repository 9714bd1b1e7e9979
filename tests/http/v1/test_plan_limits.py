"""Plan limits on API keys and schema versions per form or stream, refused with `402 plan_limit`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import add_schema, make_form, make_tenant
from tests.support.records import rows
from tests.support.settings import built_services

SCHEMA = {"type": "object", "properties": {"email": {"type": "string"}}}


async def test_keys__past_the_plans_live_keys_is_402_and_a_revoked_key_frees_a_slot(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")  # one key already
    async with api_client(services) as client:
        answers = [
            await client.post("/v1/keys", json={"name": f"k{i}"}, headers=acme.headers)
            for i in range(12)
        ]
        assert [r.status_code for r in answers].count(201) == 4  # the free plan allows 5
        body = assert_problem(answers[4], 402, "plan_limit")
        assert "5 live API keys" in body["detail"]
        listed = (await client.get("/v1/keys?limit=200", headers=acme.headers)).json()["data"]
        assert len(listed) == 5
        revoked = await client.delete(f"/v1/keys/{answers[0].json()['id']}", headers=acme.headers)
        assert revoked.status_code == 204
        await create(client, acme, "/v1/keys", {"name": "again"})
        usage = (await client.get("/v1/usage", headers=acme.headers)).json()
    assert (usage["api_keys"], usage["limits"]["api_keys"]) == (5, 5)


async def test_schemas__past_the_plans_versions_per_form_is_402(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")
    form = await make_form(conn, acme)
    other = await make_form(conn, acme, name="Other")
    for _ in range(19):
        await add_schema(conn, acme, form, SCHEMA)
    async with api_client(services) as client:
        path = f"/v1/forms/{form}/schemas"
        twentieth = await client.post(path, json={"schema": SCHEMA}, headers=acme.headers)
        assert twentieth.status_code == 201 and twentieth.json()["version"] == 20
        refused = await client.post(path, json={"schema": SCHEMA}, headers=acme.headers)
        body = assert_problem(refused, 402, "plan_limit")
        assert "20 schema versions per form" in body["detail"]
        listed = await client.get(f"{path}?limit=200", headers=acme.headers)
        assert len(listed.json()["data"]) == 20
        # The limit is per form.
        await create(client, acme, f"/v1/forms/{other}/schemas", {"schema": SCHEMA})


async def test_keys__concurrent_creations_never_pass_the_plans_live_keys(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")  # one key already
    async with built_services(db_url, tmp_path, pool_max=8) as services:
        async with api_client(services) as client:
            answers = await asyncio.gather(
                *(
                    client.post("/v1/keys", json={"name": f"k{i}"}, headers=acme.headers)
                    for i in range(10)
                )
            )
    assert sorted(a.status_code for a in answers) == [201] * 4 + [402] * 6
    live = await rows(conn, "SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL")
    assert live == [{"n": 5}]


async def test_schemas__concurrent_appends_never_pass_the_plans_versions_per_form_or_stream(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")  # 20 versions per form or stream
    form = await make_form(conn, acme)
    for _ in range(17):
        await add_schema(conn, acme, form, SCHEMA)
    async with built_services(db_url, tmp_path, pool_max=8) as services:
        async with api_client(services) as client:
            stream = await create(client, acme, "/v1/streams", {"name": "Orders"})
            for _ in range(17):
                await create(
                    client, acme, f"/v1/streams/{stream['id']}/schemas", {"schema": SCHEMA}
                )
            for path in (f"/v1/forms/{form}/schemas", f"/v1/streams/{stream['id']}/schemas"):
                answers = await asyncio.gather(
                    *(
                        client.post(path, json={"schema": SCHEMA}, headers=acme.headers)
                        for _ in range(8)
                    )
                )
                assert sorted(a.status_code for a in answers) == [201] * 3 + [402] * 5
                added = sorted(a.json()["version"] for a in answers if a.status_code == 201)
                assert added == [18, 19, 20]
    counts = await rows(
        conn,
        "SELECT (SELECT count(*) FROM form_schemas) AS forms,"
        " (SELECT count(*) FROM stream_schemas) AS streams",
    )
    assert counts == [{"forms": 20, "streams": 20}]
