"""`GET /health`, served by both apps as a plain Starlette endpoint (no FastAPI on submit)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from core.platform.clock import utcnow
from core.platform.health import check_health
from core.platform.services import Services


async def health(request: Request) -> JSONResponse:
    """This replica's health; with `?scope=installation`, the whole installation's (is the
    outbox drained), for an uptime check rather than a load balancer's probe."""
    services: Services = request.app.state.services
    report = await check_health(services.db, now=utcnow(), replica_worker=services.worker)
    body = report.as_dict(installation=request.query_params.get("scope") == "installation")
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)
