"""The public intake app: `POST /s/{form}`, its preflight, and `/health`."""

from __future__ import annotations

from fastapi import FastAPI

from core import __version__
from core.http import health
from core.http.problems import install_problem_handlers
from core.services import Services


def create_submit_app(services: Services) -> FastAPI:
    """Build the submit app around one process's services."""
    app = FastAPI(
        title="Postbag submit", version=__version__, openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.services = services
    install_problem_handlers(app)
    app.include_router(health.router)
    return app
