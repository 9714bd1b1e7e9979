"""Mounting the dashboard into the api app: routers, static assets, error pages."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from core.http.dashboard import (
    account,
    activity,
    audit,
    destinations,
    dev_mail,
    forms,
    inbox,
    keys,
    members,
    receipts,
    replays,
    schemas,
    signing_in,
    spam,
    sso,
    streams,
)
from core.http.dashboard.pages import (
    CsrfRejected,
    SignInRequired,
    TwoFactorSetupRequired,
    error_page,
    see_other,
)
from core.http.problems import http_error_response, problem_for, status_and_code
from core.platform.errors import InvalidInput, PostbagError
from core.platform.settings import Settings

# Each page's router; a new page adds its router here.
PAGE_ROUTERS: list[APIRouter] = [
    signing_in.router,
    sso.router,
    account.router,
    inbox.router,
    receipts.router,
    forms.router,
    schemas.router,
    spam.router,
    destinations.router,
    replays.router,
    activity.router,
    streams.router,
    audit.router,
    keys.router,
    members.router,
]

_TITLES = {
    401: "Please sign in",
    403: "Not allowed",
    404: "Not found",
    409: "Not possible now",
    422: "Please check the form",
    429: "Too many for now",
    503: "Postbag is unavailable",
}


def install_dashboard(app: FastAPI, settings: Settings) -> None:
    """Serve the dashboard under /app from the api app, with HTML error pages there (and
    the development mailbox when email is caught: `POSTBAG_EMAIL_PROVIDER=dev`)."""
    for page_router in PAGE_ROUTERS:
        app.include_router(page_router)
    if settings.email_provider == "dev":
        app.include_router(dev_mail.router)
    app.mount(
        "/app/static",
        StaticFiles(directory=Path(__file__).parent / "static"),
        name="dashboard-static",
    )

    async def on_sign_in_required(_request: Request, _exc: Exception) -> Response:
        return see_other("/app/sign-in")

    async def on_csrf_rejected(request: Request, _exc: Exception) -> Response:
        return error_page(
            request,
            403,
            "Not allowed",
            "This form expired or did not come from this page. Reload and try again.",
        )

    async def on_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PostbagError)
        if not request.url.path.startswith("/app"):
            return problem_for(exc)
        status, _code = status_and_code(exc)
        problems = exc.errors if isinstance(exc, InvalidInput) else None
        return error_page(
            request, status, _TITLES.get(status, "Something went wrong"), str(exc), problems
        )

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if not request.url.path.startswith("/app"):
            return http_error_response(exc, request)
        return error_page(
            request,
            exc.status_code,
            _TITLES.get(exc.status_code, "Error"),
            "There is nothing here. It may have been removed, or the link is wrong.",
        )

    async def on_two_factor_setup_required(_request: Request, _exc: Exception) -> Response:
        return see_other("/app/two-factor")

    app.add_exception_handler(SignInRequired, on_sign_in_required)
    app.add_exception_handler(TwoFactorSetupRequired, on_two_factor_setup_required)
    app.add_exception_handler(CsrfRejected, on_csrf_rejected)
    app.add_exception_handler(PostbagError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
