"""`GET /metrics` of `postbag serve` and `postbag worker --metrics-port`: real processes,
the real Postgres, a loopback receiver, parsed with prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.platform.db import Conn
from tests.support.builders import make_route_to, setup_form
from tests.support.cli import serving, spawn, subprocess_env, terminate, wait_until_serving
from tests.support.peers import closed_port, receiver
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

pytestmark = pytest.mark.slow

TOKEN = "metrics-token-" + "m" * 32


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found[(name, frozenset(labels.items()))]


def _env(db_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        POSTBAG_ALLOW_PRIVATE_TARGETS="true",
        **extra,
    )


async def _all_sent(conn: Conn, count: int) -> None:
    deadline = time.monotonic() + 60
    while len(await rows(conn, "SELECT 1 FROM deliveries WHERE status = 'sent'")) < count:
        assert time.monotonic() < deadline, "the worker did not deliver"
        await asyncio.sleep(0.1)


async def test_metrics__serve_and_worker_count_real_submits_and_deliveries(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    tenant, form = await setup_form(conn, routes=0)
    env = _env(db_url, tmp_path, POSTBAG_METRICS_TOKEN=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    metrics_port = closed_port()
    with receiver() as hook:
        await make_route_to(conn, tenant, form, config={"url": f"{hook.url}/hook"})
        worker = spawn("worker", "--ticks", "deliver", "--metrics-port", str(metrics_port), env=env)
        worker_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        try:
            wait_until_serving(worker, worker_metrics)
            with serving(env) as base:
                posts = [
                    {"name": "Ada"},
                    {"name": "Grace"},
                    {"name": "Bot", "_gotcha": "x"},  # the honeypot: stored as spam
                ]
                for data in posts:
                    answer = httpx.post(
                        f"{base}/s/{form}",
                        data=data,
                        headers={"Accept": "application/json"},
                        timeout=10,
                    )
                    assert answer.status_code == 201
                missing = httpx.post(f"{base}/s/frm_01jnotthere0000000000000000", data={"a": "b"})
                assert missing.status_code == 404
                await _all_sent(conn, 2)
                served = httpx.get(f"{base}/metrics", headers=auth, timeout=10)
            scraped = httpx.get(worker_metrics, headers=auth, timeout=10)
            refused = httpx.get(worker_metrics, timeout=10)
        finally:
            code, out, _ = terminate(worker)
        assert code == 0, out
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(served.text)
    assert value(found, "postbag_submissions_total", status="accepted") == 2
    assert value(found, "postbag_submissions_total", status="spam") == 1
    assert value(found, "postbag_submissions_total", status="refused") == 1
    assert value(found, "postbag_submissions_total", status="quarantined") == 0
    assert value(found, "postbag_submit_duration_seconds_count") == 4
    assert value(found, "postbag_deliveries", status="sent") == 2
    assert value(found, "postbag_deliveries", status="pending") == 0
    assert value(found, "postbag_oldest_due_delivery_seconds") == 0
    assert value(found, "postbag_db_pool_connections", state="idle") >= 1
    # The worker made the sends; the server made none.
    assert (
        "postbag_delivery_attempts_total",
        frozenset({("channel", "webhook"), ("outcome", "sent")}),
    ) not in found
    worker_found = samples(scraped.text)
    assert (
        value(worker_found, "postbag_delivery_attempts_total", channel="webhook", outcome="sent")
        == 2
    )
    assert value(worker_found, "postbag_submissions_total", status="accepted") == 0
    # Organization, form and destination ids never appear, in labels or anywhere else.
    for text in (served.text, scraped.text):
        assert tenant.org not in text and form not in text
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthenticated"


async def test_metrics__serve_with_two_processes_answers_for_both(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    _, form = await setup_form(conn, routes=0, rate_limit_max=1000)
    with serving(_env(db_url, tmp_path), "--workers", "2") as base:
        for index in range(20):
            # A connection each: the two processes accept from one socket.
            with httpx.Client(timeout=10) as client:
                answer = client.post(
                    f"{base}/s/{form}",
                    data={"n": str(index)},
                    headers={"Accept": "application/json"},
                )
            assert answer.status_code == 201
        scrapes = []
        for _ in range(4):
            with httpx.Client(timeout=10) as client:
                scrapes.append(samples(client.get(f"{base}/metrics").text))
    for found in scrapes:
        assert value(found, "postbag_submissions_total", status="accepted") == 20
        assert value(found, "postbag_submit_duration_seconds_count") == 20
