"""`GET /health`, served by both apps as a plain Starlette endpoint (no FastAPI on submit)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from core.platform.clock import utcnow
from core.platform.health import check_health
from core.platform.services import Services


async def health(request: Request) -> JSONResponse:
    services: Services = request.app.state.services
    report = await check_health(services.db, now=utcnow(), replica_worker=services.worker)
    return JSONResponse(report.as_dict(), status_code=200 if report.healthy else 503)
