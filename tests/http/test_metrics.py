"""`GET /metrics` over ASGI: where it is served, and its Bearer token."""

from __future__ import annotations

from pathlib import Path

import httpx

from core.http.server import combined_app
from core.http.submit_app import create_submit_app
from core.platform.services import Services
from tests.support.settings import built_services

TOKEN = "metrics-token-" + "t" * 32


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url="http://postbag.test",
    )


async def test_metrics__token_required_when_set(db_url: str, tmp_path: Path) -> None:
    async with built_services(db_url, tmp_path, metrics_token=TOKEN) as services:
        async with _client(combined_app(services, local=False)) as client:
            missing = await client.get("/metrics")
            wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
            basic = await client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"})
            right = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    for refused in (missing, wrong, basic):
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "unauthenticated"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in refused.text
    assert right.status_code == 200
    assert "postbag_submissions_total" in right.text


async def test_metrics__open_without_a_token(services: Services) -> None:
    async with _client(combined_app(services, local=False)) as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert "# TYPE postbag_deliveries gauge" in answer.text


async def test_metrics__not_served_by_the_public_submit_app(services: Services) -> None:
    # The cloud's submit function is this app alone.
    async with _client(create_submit_app(services)) as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 404
    assert "postbag_" not in answer.text
