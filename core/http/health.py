"""`GET /health`, served by both apps."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import JSONResponse

from core.health import check_health
from core.http.deps import NowDep, ServicesDep

router = APIRouter()


@router.get("/health", include_in_schema=False)
async def health(services: ServicesDep, now: NowDep) -> JSONResponse:
    report = await check_health(services.db, now=now)
    return JSONResponse(report.as_dict(), status_code=200 if report.healthy else 503)
