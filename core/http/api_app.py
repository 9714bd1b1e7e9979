"""The keyed management app: `/v1/*`, `/mcp` and `/health`."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI

from core import __version__
from core.http import health
from core.http.access import check_rules
from core.http.agents.endpoint import mount_mcp
from core.http.api_docs import install_api_docs
from core.http.body_limit import BodyLimit
from core.http.dashboard.app import install_dashboard
from core.http.problems import install_problem_handlers, install_validation_handler
from core.http.security_headers import SecurityHeaders
from core.http.v1 import (
    alerts,
    audit,
    deliveries,
    destinations,
    digests,
    events,
    forms,
    hooks,
    ingest,
    keys,
    members,
    organization,
    routes,
    schemas,
    spam,
    streams,
    submissions,
    usage,
)
from core.http.v1.checks import check_request
from core.http.v1.shared import problems
from core.platform.services import Services

# Each resource's router; a new resource adds its router here.
V1_ROUTERS: list[APIRouter] = [
    keys.router,
    members.router,
    forms.router,
    schemas.router,
    destinations.router,
    routes.router,
    submissions.router,
    events.router,
    deliveries.router,
    alerts.router,
    digests.router,
    usage.router,
    organization.router,
    streams.router,
    spam.router,
    audit.router,
    hooks.router,
]


def create_api_app(services: Services) -> FastAPI:
    """Build the management app around one process's services."""
    app = FastAPI(
        title="Postbag management API",
        version=__version__,
        openapi_url="/v1/openapi.json",
        docs_url=None,  # served by install_api_docs, from the installed bundle
        redoc_url=None,
        # Postbag sets up no OpenTelemetry: FastAPI's own would only ask, on every request,
        # whether a provider was configured since (3 % of an ingested event's work in the server).
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.services = services
    install_problem_handlers(app)
    install_validation_handler(app)
    app.add_route("/health", health.health, methods=["GET"], include_in_schema=False)
    # Ingest takes an ingest key too, and reads its bodies itself (core/http/v1/ingest.py).
    # It comes first: a request is matched against the routes in order, and ingest is the
    # volume path (its two POST paths take no other method; a GET goes on to `streams`).
    # Its routes are the app's own rather than an included router's: FastAPI matches an
    # included router's routes through the router, a twentieth of a single event's work.
    app.router.routes.extend(ingest.router.routes)
    for router in V1_ROUTERS:
        # Every route may meet a body it cannot parse, a method it does not take, the body
        # limit, a role that may not call it (each route's rule: core/http/access.py) and
        # the bad-key throttle.
        app.include_router(
            router,
            prefix="/v1",
            dependencies=[Depends(check_request)],
            responses=problems(400, 403, 405, 413, 429),
        )
    mount_mcp(app, services)
    install_api_docs(app)
    install_dashboard(app, services.settings)
    check_rules(app)
    app.add_middleware(BodyLimit)
    app.add_middleware(SecurityHeaders)
    return app
