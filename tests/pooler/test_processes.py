"""`postbag serve` and `postbag worker`, each its own process, configured through the
environment as an operator would, on PgBouncer in transaction mode."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from core.platform.db import Conn
from tests.support.builders import make_route_to, setup_form
from tests.support.cli import serving, spawn, subprocess_env, terminate
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

pytestmark = pytest.mark.slow

POSTS = 120
CONCURRENCY = 20


async def test_serve_and_worker__120_concurrent_posts_through_the_pooler_delivered_once(
    pooled_url: str, conn: Conn, tmp_path: Path
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0, rate_limit_max=POSTS)
    env = subprocess_env(
        POSTBAG_DATABASE_URL=pooled_url,
        POSTBAG_DB_POOLER="transaction",
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        POSTBAG_ALLOW_PRIVATE_TARGETS="true",  # the receiver is on loopback
    )
    with receiver() as peer:
        await make_route_to(conn, tenant, form, config={"url": peer.url})
        worker = spawn("worker", "--ticks", "deliver", env=env)
        try:
            with serving(env) as base:
                gate = asyncio.Semaphore(CONCURRENCY)
                async with httpx.AsyncClient(base_url=base, timeout=30) as client:

                    async def post(n: int) -> int | str:
                        """The answer's status, or the error that stood for one."""
                        async with gate:
                            try:
                                answer = await client.post(
                                    f"/s/{form}",
                                    data={"n": str(n)},
                                    headers={"Accept": "application/json"},
                                )
                            except httpx.HTTPError as exc:
                                return type(exc).__name__
                            return answer.status_code

                    statuses = Counter(await asyncio.gather(*(post(n) for n in range(POSTS))))
                deadline = time.monotonic() + 60
                while len(peer.requests) < POSTS and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(2.0)  # a duplicate would arrive now
        finally:
            code, out, _ = terminate(worker)
    assert statuses == {201: POSTS}, statuses
    assert code == 0, out
    assert "prepared statement" not in out
    received = Counter(request.headers["webhook-id"] for request in peer.requests)
    sent = await rows(conn, "SELECT id, status, attempts FROM deliveries")
    assert received == {row["id"]: 1 for row in sent} and len(sent) == POSTS
    assert {(row["status"], row["attempts"]) for row in sent} == {("sent", 1)}
