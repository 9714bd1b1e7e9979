"""Mounting the dashboard into the api app: routers, static assets, error pages."""

from __future__ import annotations

import asyncio
import math
import secrets
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from core.http.access import AuditedRoute, open_to_all
from core.http.dashboard import (
    activity,
    audit,
    destinations,
    forms,
    inbox,
    receipts,
    replays,
    schemas,
    streams,
)
from core.http.dashboard.pages import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    CheckedForm,
    CsrfRejected,
    SessionDep,
    SignInRequired,
    error_page,
    render,
    see_other,
    set_cookie,
)
from core.http.deps import ServicesDep, throttled_client
from core.http.problems import http_error_response, problem_for, status_and_code
from core.owner.dashboard_sessions import close_session, open_session
from core.owner.throttle import (
    OVER_LIMIT_DELAY,
    count_sign_in,
    forgive_sign_in,
    refused_sign_in,
)
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput, PostbagError, TooManyAttempts, Unauthenticated
from core.platform.services import Services

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# Each page's router; a new page adds its router here.
PAGE_ROUTERS: list[APIRouter] = [
    inbox.router,
    receipts.router,
    forms.router,
    schemas.router,
    destinations.router,
    replays.router,
    activity.router,
    streams.router,
    audit.router,
]

_TITLES = {
    401: "Please sign in",
    403: "Not allowed",
    404: "Not found",
    409: "Not possible now",
    422: "Please check the form",
    503: "Postbag is unavailable",
}


@router.get("/sign-in", dependencies=[open_to_all()])
async def sign_in_page(request: Request, services: ServicesDep) -> Response:
    token = secrets.token_urlsafe(32)
    response = render(request, "sign_in.html", title="Sign in", csrf=token)
    set_cookie(response, services, SIGN_IN_COOKIE, token)
    return response


def _sign_in_again(request: Request, services: Services, status: int, error: str) -> Response:
    """The sign-in page again with `error`, under a fresh sign-in token."""
    retry = secrets.token_urlsafe(32)
    response = render(
        request, "sign_in.html", title="Sign in", status_code=status, csrf=retry, error=error
    )
    set_cookie(response, services, SIGN_IN_COOKIE, retry)
    return response


@router.post("/sign-in", dependencies=[open_to_all()])
async def sign_in(request: Request, services: ServicesDep) -> Response:
    form = await request.form()
    token, cookie = form.get("csrf"), request.cookies.get(SIGN_IN_COOKIE)
    if not isinstance(token, str) or not cookie or not secrets.compare_digest(token, cookie):
        raise CsrfRejected
    api_key = form.get("api_key")
    client = throttled_client(request, services)
    async with services.db.connection() as conn:
        turn = await count_sign_in(conn, client, now=utcnow())
    if not turn.within:
        # Past the limit: the key is checked, but only after a wait that holds no connection.
        await asyncio.sleep(OVER_LIMIT_DELAY)
    try:
        async with services.db.connection() as conn:
            try:
                session_id = await open_session(
                    conn, api_key if isinstance(api_key, str) else None, now=utcnow()
                )
            except Unauthenticated:
                if not turn.within:
                    raise refused_sign_in(turn) from None
                raise
            if turn.within:
                await forgive_sign_in(conn, client, now=utcnow())
    except TooManyAttempts as exc:
        response = _sign_in_again(
            request,
            services,
            429,
            "Too many sign-in attempts from your address. Try again in "
            f"{math.ceil(exc.retry_after / 60)} minutes.",
        )
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    except Unauthenticated:
        return _sign_in_again(
            request,
            services,
            401,
            "That key is not valid. Check it, or create a new one with "
            "`postbag create-org` or POST /v1/keys.",
        )
    signed_in = see_other("/app")
    set_cookie(signed_in, services, SESSION_COOKIE, session_id)
    signed_in.delete_cookie(SIGN_IN_COOKIE, path="/app")
    return signed_in


@router.post("/sign-out", dependencies=[open_to_all()])
async def sign_out(
    request: Request, services: ServicesDep, _session: SessionDep, _form: CheckedForm
) -> Response:
    session_id = request.cookies.get(SESSION_COOKIE, "")
    async with services.db.connection() as conn:
        await close_session(conn, session_id)
    response = see_other("/app/sign-in")
    response.delete_cookie(SESSION_COOKIE, path="/app")
    return response


def install_dashboard(app: FastAPI) -> None:
    """Serve the dashboard under /app from the api app, with HTML error pages there."""
    app.include_router(router)
    for page_router in PAGE_ROUTERS:
        app.include_router(page_router)
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

    app.add_exception_handler(SignInRequired, on_sign_in_required)
    app.add_exception_handler(CsrfRejected, on_csrf_rejected)
    app.add_exception_handler(PostbagError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
