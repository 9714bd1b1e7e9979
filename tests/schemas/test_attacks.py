"""The attacks on the schema engine, against a real `postbag serve` with `/health` polled
from another client meanwhile: each attack's posts end with a status (never a stall, never
a 500), and the server keeps answering everyone else."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.platform.db import Conn
from tests.support.builders import add_schema, setup_form
from tests.support.cli import serving, subprocess_env
from tests.support.hostile import health_watch
from tests.support.records import rows
from tests.support.schemas import ref_pairs
from tests.support.settings import TEST_SECRET_KEY

pytestmark = pytest.mark.slow

# Before this engine, each of these stalled every tenant for 4 to 30 s. With checks in
# child processes the event loop never waits on one; this bound is far above a healthy
# server's answer and below those stalls. Measured on the 2-core machine for eight 256 KB
# arrays at once: at most 0.66 s with the server alone, once 2.11 s while the parallel
# suite's three workers shared the cores (each post is also parsed, checked for storable
# values and read by the spam rules on the event loop).
HEALTH_BOUND = 3.0

ATTACKS: list[tuple[str, dict[str, Any], dict[str, Any], int, str]] = [
    (
        "uniqueItems on 3,000 objects",
        {"properties": {"tags": {"type": "array", "uniqueItems": True, "maxItems": 10}}},
        {"tags": [{"n": i} for i in range(3000)]},
        1,
        "schema_violation",
    ),
    (
        "256 KB array against items string, 8 at once",
        {"properties": {"x": {"items": {"type": "string"}}}},
        {"x": [1] * 120_000},
        8,
        "schema_violation",
    ),
    (
        "pattern ^(a+)+$ and 30 characters",
        {"properties": {"x": {"pattern": "^(a+)+$"}}},
        {"x": "a" * 30 + "!"},
        1,
        "schema_violation",
    ),
    # Refused when saved today; an upgraded database may hold one (inserted with SQL).
    ("26 nested anyOf pairs of $refs", ref_pairs(26), {"x": "abc"}, 2, "schema_unchecked"),
    ("a $ref typo", {"$ref": "#/$defs/emial"}, {"email": "a@example.com"}, 1, "schema_error"),
]


@pytest.mark.parametrize(
    ("schema", "values", "posts", "reason"),
    [attack[1:] for attack in ATTACKS],
    ids=[attack[0] for attack in ATTACKS],
)
async def test_attack__posts_end_with_a_status_and_health_keeps_answering(
    db_url: str,
    tmp_path: Path,
    conn: Conn,
    schema: dict[str, Any],
    values: dict[str, Any],
    posts: int,
    reason: str,
) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    await add_schema(conn, tenant, form, schema)
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
    )
    with serving(env) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            warm = await client.post(f"/s/{form}", json={"warm": "up"})  # starts the children
            assert warm.status_code == 201, warm.text
            async with health_watch(base) as watch:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            f"/s/{form}",
                            json={**values, "n": i},
                            headers={"Accept": "application/json"},
                        )
                        for i in range(posts)
                    )
                )
    assert [a.status_code for a in answers] == [201] * posts, answers[0].text
    stored = await rows(
        conn, "SELECT status, reason FROM submissions WHERE NOT (\"values\" ? 'warm')"
    )
    assert stored == [{"status": "quarantined", "reason": reason}] * posts
    assert watch.waits, "the health poll never got an answer"
    assert watch.stall < HEALTH_BOUND, watch.waits
