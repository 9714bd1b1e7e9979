from __future__ import annotations

import asyncio

from core.platform.db import Conn
from core.platform.services import Services
from core.platform.settings import load_settings
from tests.support.api import EMAIL, api_client, assert_problem, create
from tests.support.builders import make_tenant


async def test_errors__database_unreachable_is_503_with_retry_after() -> None:
    settings = load_settings(
        database_url="postgresql://postgres@127.0.0.1:1/postgres", db_connect_timeout=1
    )
    services = Services.from_settings(settings)
    try:
        async with api_client(services) as client:
            response = await client.get("/v1/forms", headers={"Authorization": "Bearer pb_x"})
    finally:
        await services.db.close()
    assert_problem(response, 503, "unavailable")
    assert response.headers["retry-after"] == "5"


async def test_errors__unknown_path_method_and_malformed_json(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        unknown = await client.get("/v1/nothing-here", headers=acme.headers)
        wrong_method = await client.put("/v1/forms", json={}, headers=acme.headers)
        malformed = await client.post(
            "/v1/forms",
            content=b'{"name": ',
            headers={**acme.headers, "Content-Type": "application/json"},
        )
        not_an_object = await client.post("/v1/forms", json=["Contact"], headers=acme.headers)
    assert_problem(unknown, 404, "not_found")
    assert_problem(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "GET, POST"
    assert_problem(malformed, 422, "invalid_input")
    assert_problem(not_an_object, 422, "invalid_input")


async def test_errors__concurrent_creations_cannot_overshoot_the_plan(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")  # three destinations
    async with api_client(services) as client:
        await create(client, acme, "/v1/destinations", EMAIL)
        responses = await asyncio.gather(
            *(client.post("/v1/destinations", json=EMAIL, headers=acme.headers) for _ in range(5))
        )
        listed = await client.get("/v1/destinations", headers=acme.headers)
    assert sorted(r.status_code for r in responses) == [201, 201, 402, 402, 402]
    assert len(listed.json()["data"]) == 3
