"""A member's own account: their sessions (each can be ended), TOTP with recovery codes, and
switching to another of their organizations."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import (
    SESSION_COOKIE,
    CheckedForm,
    SessionDep,
    form_text,
    page_needs,
    see_other,
)
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.owner import dashboard_sessions, members
from core.owner.credentials import totp_uri
from core.owner.dashboard_sessions import member_sessions, switch_organization
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput, Unauthenticated

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


@router.get("/sessions", dependencies=[page_needs("read")])
async def sessions_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.connection() as conn:
        found = await member_sessions(conn, session.member_id, now=utcnow())
    return await page(
        request,
        services,
        session,
        "sessions.html",
        title="Sessions",
        active="/app/sessions",
        sessions=found,
    )


@router.post("/sessions/{session_id}/end", dependencies=[page_needs("read", "session.revoked")])
async def end_session(
    change: ChangeDep, session: SessionDep, _form: CheckedForm, session_id: str
) -> Response:
    await dashboard_sessions.end_session(change, session_id[:40])
    return see_other("/app/sign-in" if session_id == session.id else "/app/sessions")


@router.post("/switch", dependencies=[page_needs("read")])
async def switch(
    request: Request, services: ServicesDep, _session: SessionDep, form: CheckedForm
) -> Response:
    async with services.db.connection() as conn:
        await switch_organization(
            conn, request.cookies.get(SESSION_COOKIE, ""), form_text(form, "organization")[:40]
        )
    return see_other("/app")


async def _two_factor_page(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    *,
    status_code: int = 200,
    **context: object,
) -> Response:
    async with services.db.connection() as conn:
        state = await members.two_factor_state(conn, session.member_id)
    pending = state.pop("pending")
    uri = totp_uri(pending, state["address"]) if pending else None
    response = await page(
        request,
        services,
        session,
        "two_factor.html",
        title="Two-factor sign-in",
        active="/app/two-factor",
        state=state,
        uri=uri,
        secret=pending,
        **context,
    )
    response.status_code = status_code
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/two-factor", dependencies=[page_needs("read")])
async def two_factor(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    return await _two_factor_page(request, services, session)


@router.post("/two-factor/start", dependencies=[page_needs("read")])
async def start(services: ServicesDep, session: SessionDep, _form: CheckedForm) -> Response:
    async with services.db.connection() as conn:
        await members.start_totp(conn, session.member_id)
    return see_other("/app/two-factor")


@router.post("/two-factor/confirm", dependencies=[page_needs("read", "member.totp_enabled")])
async def confirm(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    form: CheckedForm,
) -> Response:
    try:
        codes = await members.turn_on_two_factor(change, form_text(form, "code"))
    except InvalidInput as exc:
        return await _two_factor_page(request, services, session, status_code=422, error=str(exc))
    return await _two_factor_page(request, services, session, recovery_codes=codes)


@router.post("/two-factor/off", dependencies=[page_needs("read", "member.totp_disabled")])
async def turn_off(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    form: CheckedForm,
) -> Response:
    try:
        await members.turn_off_two_factor(
            change, password=form_text(form, "password"), cost=services.settings.password_hash_cost
        )
    except Unauthenticated as exc:
        return await _two_factor_page(request, services, session, status_code=422, error=str(exc))
    return see_other("/app/two-factor")
