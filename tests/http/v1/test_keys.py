from __future__ import annotations

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import make_tenant


async def test_keys__create_list_revoke_round_trip(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        created = await create(client, acme, "/v1/keys", {"name": "ci"})
        assert created["key"].startswith("pb_")
        assert created["prefix"] == created["key"][:10]
        assert created["id"].startswith("key_")

        listed = await client.get("/v1/keys", headers=acme.headers)
        assert listed.status_code == 200
        rows = listed.json()["data"]
        assert {row["name"] for row in rows} == {"test", "ci"}
        assert created["key"] not in listed.text
        assert all(
            set(row) == {"id", "name", "prefix", "role", "created_at", "last_used_at"}
            for row in rows
        )

        new_key = {"Authorization": f"Bearer {created['key']}"}
        assert (await client.get("/v1/usage", headers=new_key)).status_code == 200

        revoked = await client.delete(f"/v1/keys/{created['id']}", headers=acme.headers)
        assert revoked.status_code == 204
        listed = await client.get("/v1/keys", headers=acme.headers)
        assert [row["name"] for row in listed.json()["data"]] == ["test"]


async def test_keys__revoked_key_is_401_on_the_next_request(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        created = await create(client, acme, "/v1/keys", {"name": "doomed"})
        own = {"Authorization": f"Bearer {created['key']}"}
        # A key may revoke itself; the very next request with it is refused.
        assert (await client.delete(f"/v1/keys/{created['id']}", headers=own)).status_code == 204
        assert_problem(await client.get("/v1/forms", headers=own), 401, "unauthenticated")
        assert (await client.get("/v1/forms", headers=acme.headers)).status_code == 200


async def test_keys__missing_or_unknown_key_is_401_without_a_hint(
    services: Services, conn: Conn
) -> None:
    await make_tenant(conn)
    async with api_client(services) as client:
        missing = await client.get("/v1/forms")
        unknown = await client.get("/v1/forms", headers={"Authorization": "Bearer pb_nope"})
        malformed = await client.get("/v1/forms", headers={"Authorization": "Basic eDp5"})
    bodies = [assert_problem(r, 401, "unauthenticated") for r in (missing, unknown, malformed)]
    assert bodies[0] == bodies[1] == bodies[2]


async def test_keys__validation(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        for body in ({}, {"name": ""}, {"name": "x" * 201}, {"name": "ok", "scopes": ["all"]}):
            response = await client.post("/v1/keys", json=body, headers=acme.headers)
            assert_problem(response, 422, "invalid_input")
        missing = await client.delete("/v1/keys/key_unknown", headers=acme.headers)
        assert_problem(missing, 404, "not_found")
