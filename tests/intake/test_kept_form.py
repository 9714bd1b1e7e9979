"""A form kept from an earlier submit (core/intake/form.py): the next submit skips reading
it, and any change to what the submit path reads takes effect on the very next submit."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import (
    Tenant,
    add_schema,
    make_route_to,
    make_tenant,
    setup_form,
)
from tests.support.files import pdf
from tests.support.records import rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON = {"Accept": "application/json"}


async def _post(client: httpx.AsyncClient, form: str, **fields: str) -> httpx.Response:
    return await client.post(f"/s/{form}", data=fields, headers=JSON)


async def _last(conn: Conn) -> dict[str, object]:
    [row] = await rows(
        conn,
        "SELECT id, status, reason, flags, schema_version FROM submissions "
        "ORDER BY received_at DESC, id DESC LIMIT 1",
    )
    return row


async def _unrevised(conn: Conn, sql: str, *params: str) -> None:
    """Run `sql` on forms with the trigger that moves the revision switched off."""
    await conn.execute("ALTER TABLE forms DISABLE TRIGGER forms_revised")
    try:
        await conn.execute(sql, params)
    finally:
        await conn.execute("ALTER TABLE forms ENABLE TRIGGER forms_revised")


async def test_kept_form__the_next_submit_uses_it_without_reading_the_form(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, redirect_url="https://site.example/thanks")
    moved = "https://site.example/moved"
    async with submit_client(services) as client:
        first = await client.post(f"/s/{form}", data={"n": "1"})
        # A change the revision does not see: only a submit that read the form would.
        await _unrevised(conn, "UPDATE forms SET redirect_url = %s WHERE id = %s", moved, form)
        second = await client.post(f"/s/{form}", data={"n": "2"})
        # Any change through the normal path moves the revision: the next submit reads it.
        await conn.execute("UPDATE forms SET redirect_url = %s WHERE id = %s", (moved, form))
        third = await client.post(f"/s/{form}", data={"n": "3"})
    assert first.headers["location"].startswith("https://site.example/thanks")
    assert second.headers["location"].startswith("https://site.example/thanks")
    assert third.headers["location"].startswith("https://site.example/moved")
    assert len(await rows(conn, "SELECT id FROM submissions")) == 3


Change = Callable[[Conn, Tenant, str], Awaitable[None]]


async def _close(conn: Conn, tenant: Tenant, form: str) -> None:
    await conn.execute("UPDATE forms SET accepting = false WHERE id = %s", (form,))


async def _delete(conn: Conn, tenant: Tenant, form: str) -> None:
    await conn.execute("UPDATE forms SET deleted_at = now() WHERE id = %s", (form,))


async def _restrict_origins(conn: Conn, tenant: Tenant, form: str) -> None:
    await conn.execute(
        "UPDATE forms SET allowed_origins = '{https://other.example}' WHERE id = %s", (form,)
    )


async def _enforce_schema(conn: Conn, tenant: Tenant, form: str) -> None:
    await add_schema(conn, tenant, form, {"type": "object", "required": ["email"]})
    await conn.execute("UPDATE forms SET schema_mode = 'enforce' WHERE id = %s", (form,))


async def _new_schema_version(conn: Conn, tenant: Tenant, form: str) -> None:
    await add_schema(conn, tenant, form, {"type": "object", "required": ["email"]})


async def _add_route(conn: Conn, tenant: Tenant, form: str) -> None:
    await make_route_to(conn, tenant, form)


async def _disable_route(conn: Conn, tenant: Tenant, form: str) -> None:
    await conn.execute("UPDATE routes SET enabled = false WHERE form_id = %s", (form,))


async def _spam_only_route(conn: Conn, tenant: Tenant, form: str) -> None:
    await conn.execute("UPDATE routes SET include_statuses = '{spam}' WHERE form_id = %s", (form,))


async def _add_to_month(conn: Conn, tenant: Tenant, submissions: int) -> None:
    """Other processes' submits: the month's count only, nothing about the form (on a
    shard the first submit may have taken)."""
    await conn.execute(
        "INSERT INTO usage_counters AS u (organization_id, month, shard, submissions) "
        "VALUES (%s, %s, 0, %s) ON CONFLICT (organization_id, month, shard) "
        "DO UPDATE SET submissions = u.submissions + excluded.submissions",
        (tenant.org, utcnow().date().replace(day=1), submissions),
    )


async def _downgrade_plan_over_its_quota(conn: Conn, tenant: Tenant, form: str) -> None:
    await _add_to_month(conn, tenant, 500)
    await conn.execute("UPDATE organizations SET plan = 'free' WHERE id = %s", (tenant.org,))


async def _cross_the_quota(conn: Conn, tenant: Tenant, form: str) -> None:
    await _add_to_month(conn, tenant, 100)


CHANGES: list[tuple[Change, str]] = [
    (_close, "closed"),
    (_delete, "not found"),
    (_restrict_origins, "quarantined origin_rejected"),
    (_enforce_schema, "quarantined schema_violation"),
    (_new_schema_version, "accepted, schema 1"),
    (_add_route, "2 deliveries"),
    (_disable_route, "0 deliveries"),
    (_spam_only_route, "0 deliveries"),
    (_downgrade_plan_over_its_quota, "over quota"),
    (_cross_the_quota, "over quota"),
]


@pytest.mark.parametrize(("change", "expected"), CHANGES, ids=[c.__name__ for c, _ in CHANGES])
async def test_kept_form__a_change_takes_effect_on_the_next_submit(
    services: Services, conn: Conn, change: Change, expected: str
) -> None:
    plan = "free" if change is _cross_the_quota else "pro"
    tenant, form = await setup_form(conn, plan=plan, routes=1, schema_mode="observe")
    async with submit_client(services) as client:
        before = await _post(client, form, n="1")
        assert before.status_code == 201, before.text
        assert (await _last(conn))["status"] == "accepted"
        await change(conn, tenant, form)
        after = await _post(client, form, n="2")
    if expected == "closed":
        assert after.status_code == 403 and after.json()["code"] == "form_closed"
        return
    if expected == "not found":
        assert after.status_code == 404
        return
    assert after.status_code == 201, after.text
    row = await _last(conn)
    assert row["id"] == after.json()["receipt"]
    deliveries = await rows(
        conn, "SELECT held FROM deliveries WHERE submission_id = %(id)s", id=row["id"]
    )
    if expected.startswith("quarantined"):
        assert f"{row['status']} {row['reason']}" == expected
    elif expected == "accepted, schema 1":
        assert (row["status"], row["schema_version"]) == ("accepted", 1)
    elif expected.endswith("deliveries"):
        assert row["status"] == "accepted"
        assert f"{len(deliveries)} deliveries" == expected
    else:
        assert (row["status"], row["flags"]) == ("accepted", ["over_quota"])
        assert deliveries == [{"held": True}]


async def test_kept_form__a_turnstile_form_is_read_on_every_submit(
    services: Services, conn: Conn
) -> None:
    # Its rate limit must spare a flood the Turnstile call, so its client count is read.
    _, form = await setup_form(conn, turnstile_secret="0x4AAAAAAA-secret")
    async with submit_client(services) as client:
        await _post(client, form, n="1")
        # Turnstile switched off behind the revision's back: only a fresh read sees it.
        await _unrevised(conn, "UPDATE forms SET turnstile_secret = NULL WHERE id = %s", form)
        second = await _post(client, form, n="2")
    assert second.status_code == 201
    found = await rows(conn, "SELECT status, reason FROM submissions ORDER BY received_at, id")
    assert found == [
        {"status": "quarantined", "reason": "turnstile_failed"},
        {"status": "accepted", "reason": None},
    ]


async def test_kept_form__posts_racing_a_new_route_all_get_it_once_it_is_committed(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=1, rate_limit_max=10_000)
    posted: list[tuple[float, str]] = []
    committed_at = float("inf")
    async with submit_client(services) as client:
        assert (await _post(client, form, n="first")).status_code == 201  # now kept

        async def poster(n: int) -> None:
            for i in range(12):
                started = time.monotonic()
                answer = await _post(client, form, n=f"{n}-{i}")
                assert answer.status_code == 201, answer.text
                posted.append((started, answer.json()["receipt"]))

        async def add_route() -> None:
            nonlocal committed_at
            await asyncio.sleep(0.1)
            await make_route_to(conn, tenant, form)  # autocommit: committed on return
            committed_at = time.monotonic()

        await asyncio.gather(*(poster(n) for n in range(8)), add_route())
    counts = {
        row["submission_id"]: row["n"]
        for row in await rows(
            conn, "SELECT submission_id, count(*) AS n FROM deliveries GROUP BY submission_id"
        )
    }
    after = [receipt for started, receipt in posted if started > committed_at]
    assert after, "no post started after the route was added"
    assert {counts[receipt] for receipt in after} == {2}
    assert {counts[receipt] for _, receipt in posted} <= {1, 2}


async def test_kept_form__owner_writes_racing_on_one_form_all_succeed(
    services: Services, conn: Conn
) -> None:
    # Each of these moves the form's revision (an update of its row) while holding other
    # rows: they must queue on the form, never wait on each other in a cycle.
    tenant = await make_tenant(conn, plan="pro")
    async with api_client(services) as api:
        form = await create(api, tenant, "/v1/forms", {"name": "Busy"})
        hooks = [
            await create(
                api,
                tenant,
                "/v1/destinations",
                {
                    "type": "webhook",
                    "name": f"Hook {n}",
                    "config": {"url": f"https://h{n}.example"},
                },
            )
            for n in range(6)
        ]
        first = await create(
            api, tenant, f"/v1/forms/{form['id']}/routes", {"destination_id": hooks[0]["id"]}
        )
        answers = await asyncio.gather(
            *(
                api.post(
                    f"/v1/forms/{form['id']}/routes",
                    json={"destination_id": hook["id"]},
                    headers=tenant.headers,
                )
                for hook in hooks[1:4]
            ),
            api.patch(f"/v1/routes/{first['id']}", json={"enabled": False}, headers=tenant.headers),
            api.delete(f"/v1/destinations/{hooks[4]['id']}", headers=tenant.headers),
            api.patch(f"/v1/forms/{form['id']}", json={"name": "Busier"}, headers=tenant.headers),
        )
    assert [a.status_code for a in answers] == [201, 201, 201, 200, 204, 200], [
        a.text for a in answers
    ]


async def test_kept_form__a_file_field_added_since_takes_the_next_posts_file(
    db_url: str, tmp_path: Path, conn: Conn, storage_url: str
) -> None:
    _, form = await setup_form(conn)
    async with built_services(db_url, tmp_path, storage_url=storage_url) as services:
        async with submit_client(services) as client:
            assert (await _post(client, form, n="1")).status_code == 201  # kept: no files
            await conn.execute(
                "UPDATE forms SET file_fields = %s WHERE id = %s",
                (json.dumps({"cv": {"types": [".pdf"], "required": True}}), form),
            )
            answer = await client.post(
                f"/s/{form}",
                data={"n": "2"},
                files=[("cv", ("cv.pdf", pdf(), "application/pdf"))],
                headers=JSON,
            )
    assert answer.status_code == 201, answer.text
    [attachment] = await rows(conn, "SELECT submission_id, name FROM attachments")
    assert attachment == {"submission_id": answer.json()["receipt"], "name": "cv.pdf"}
