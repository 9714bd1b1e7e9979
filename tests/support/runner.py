"""The local runner's app (submit and api, no ticks) on a loopback port, for real clients."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from core.http.server import combined_app
from core.platform.db import connect
from tests.support.builders import Tenant, make_form, make_route_to, make_tenant
from tests.support.databases import create_database, database_url, drop_database
from tests.support.fuzzing import served


@dataclass(frozen=True, slots=True)
class World:
    """A served runner with two organizations; Acme has a form, one submission sent in
    through `/s/{form}` to a webhook route, and that submission's delivery, dead."""

    url: str
    acme: Tenant
    other: Tenant
    form: str
    submission: str
    delivery: str


async def _seed(db_url: str) -> tuple[Tenant, Tenant, str]:
    conn = await connect(db_url)
    try:
        acme = await make_tenant(conn, "Acme", plan="pro")
        other = await make_tenant(conn, "Other")
        form = await make_form(conn, acme)
        await make_route_to(conn, acme, form)
        return acme, other, form
    finally:
        await conn.close()


def submit(url: str, form: str, values: dict[str, str]) -> str:
    """POST `values` to the form's public address; the receipt (submission id)."""
    answer = httpx.post(
        f"{url}/s/{form}", data=values, headers={"Accept": "application/json"}, timeout=10
    )
    assert answer.status_code == 201, answer.text
    receipt: str = answer.json()["receipt"]
    return receipt


async def _kill_delivery(db_url: str, submission: str) -> str:
    conn = await connect(db_url)
    try:
        cur = await conn.execute(
            "UPDATE deliveries SET status = 'dead', reason = 'http_404', attempts = 1"
            " WHERE submission_id = %(sub)s RETURNING id",
            {"sub": submission},
        )
        row = await cur.fetchone()
        assert row is not None
        return str(row["id"])
    finally:
        await conn.close()


@contextmanager
def seeded_world(admin_url: str, template: str, tmp_path: Path) -> Iterator[World]:
    """A database of its own (for a whole test module), seeded, served."""
    name = create_database(admin_url, template=template)
    db_url = database_url(admin_url, name)
    try:
        acme, other, form = asyncio.run(_seed(db_url))
        with served(db_url, tmp_path, combined_app) as url:
            submission = submit(url, form, {"email": "ada@example.com", "message": "Hello"})
            delivery = asyncio.run(_kill_delivery(db_url, submission))
            yield World(url, acme, other, form, submission, delivery)
    finally:
        drop_database(admin_url, name)
