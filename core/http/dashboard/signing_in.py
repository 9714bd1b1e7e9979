"""Signing in and out of the dashboard: email, password and TOTP code (throttled per
client and per account), an invitation accepted, a password reset (guesses of its link
throttled per client), and the one-time link `postbag dev` prints. Every form here is posted
before a session exists: its CSRF token is a cookie of its own (`SIGN_IN_COOKIE`)."""

from __future__ import annotations

import math

from fastapi import APIRouter, Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from core.http.access import AuditedRoute, open_to_all, origin_of
from core.http.dashboard.pages import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    CheckedForm,
    SessionDep,
    error_page,
    form_text,
    see_other,
    set_cookie,
)
from core.http.dashboard.public_forms import public_form, public_page
from core.http.deps import ServicesDep, throttled_client
from core.outbox.wakeup import wake_deliveries
from core.owner import members
from core.owner.dashboard_sessions import close_session, open_session
from core.owner.sso import session_organization
from core.owner.throttle import Turn, count_attempt, count_sign_in, forgive, throttle_account
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.errors import InvalidInput, NotFound, Unauthenticated
from core.platform.services import Services
from core.platform.vocabulary import AuthFailureKind

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


async def _audit_sign_in(
    conn: Conn,
    request: Request,
    services: Services,
    *,
    member_id: str | None,
    organization_id: str | None,
) -> None:
    """Record a sign-in (a session opened in `organization_id`) or, with none, a failed
    one of a member's account (an address that is no member's records nothing)."""
    if member_id is None:
        return
    origin = origin_of(request, services, "dashboard")
    # A transaction (a savepoint within one): each append holds its chain's lock to the end.
    async with conn.transaction():
        await members.record_sign_in(
            conn, member_id=member_id, organization_id=organization_id, origin=origin
        )


async def _signed_in(
    request: Request, services: Services, member_id: str, organization_id: str
) -> Response:
    """A new session for the member, its cookie, and the inbox, the sign-in recorded with
    the session; in the organization asked for unless its policy requires single sign-on
    (then another of theirs, or `403 sso_required`)."""
    async with services.db.transaction() as conn:
        organization_id = await session_organization(conn, member_id, organization_id)
        session_id = await open_session(
            conn,
            member_id=member_id,
            organization_id=organization_id,
            user_agent=request.headers.get("user-agent", ""),
            now=utcnow(),
        )
        await _audit_sign_in(
            conn, request, services, member_id=member_id, organization_id=organization_id
        )
    response = see_other("/app")
    set_cookie(response, services, SESSION_COOKIE, session_id)
    response.delete_cookie(SIGN_IN_COOKIE, path="/app")
    return response


@router.get("/sign-in", dependencies=[open_to_all()])
async def sign_in_page(request: Request, services: ServicesDep) -> Response:
    notice = "Your password is set. Sign in with it." if "reset" in request.query_params else None
    return public_page(request, services, "sign_in.html", title="Sign in", notice=notice)


def _sign_in_again(
    request: Request, services: Services, status: int, error: str, email: str
) -> Response:
    return public_page(
        request,
        services,
        "sign_in.html",
        title="Sign in",
        status_code=status,
        error=error,
        email=email,
    )


def _too_many(response: Response, turn: Turn) -> Response:
    response.headers["Retry-After"] = str(turn.retry_after)
    return response


def _minutes(turn: Turn) -> str:
    return f"{math.ceil(turn.retry_after / 60)} minutes"


@router.post("/sign-in", dependencies=[open_to_all()])
async def sign_in(request: Request, services: ServicesDep) -> Response:
    form = await public_form(request)
    email = form_text(form, "email")
    client = throttled_client(request, services)
    async with services.db.connection() as conn:
        account = await members.sign_in_account(conn, email)
        turn = await count_sign_in(
            conn,
            client,
            now=utcnow(),
            account=throttle_account(account, services.settings.require_secret_key()),
        )
        if not turn.within:
            # Past a limit nothing is checked, not even a right password: guesses sent at
            # once are held to the limit as guesses sent one by one are.
            error = (
                "Too many sign-in attempts from your address or to this account. Try again in "
                f"{_minutes(turn)}."
            )
            return _too_many(_sign_in_again(request, services, 429, error, email), turn)
        try:
            member_id, organization_id = await members.check_sign_in(
                conn,
                email=email,
                password=form_text(form, "password"),
                code=form_text(form, "code"),
                cost=services.settings.password_hash_cost,
                now=utcnow(),
            )
        except Unauthenticated as exc:
            tried = await members.member_by_address(conn, email)
            await _audit_sign_in(conn, request, services, member_id=tried, organization_id=None)
            return _sign_in_again(request, services, 401, f"{str(exc).capitalize()}.", email)
        await forgive(conn, turn)
    return await _signed_in(request, services, member_id, organization_id)


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


@router.get("/link/{token}", dependencies=[open_to_all()])
async def sign_in_link(request: Request, token: str, services: ServicesDep) -> Response:
    """The one-time link `postbag dev` prints: signs its local owner in."""
    async with services.db.connection() as conn:
        member_id = await members.use_sign_in_link(conn, token[:100], now=utcnow())
        organization_id = await members.first_organization(conn, member_id)
    return await _signed_in(request, services, member_id, organization_id)


def _link_refused(request: Request, title: str, turn: Turn) -> Response:
    page = error_page(
        request,
        429,
        title,
        f"Too many attempts from your address. Try again in {_minutes(turn)}.",
    )
    return _too_many(page, turn)


@router.get("/invitations/{token}", dependencies=[open_to_all()])
async def invitation_page(request: Request, token: str, services: ServicesDep) -> Response:
    turn = await _count_link(request, services, "invitation_link")
    if not turn.within:
        return _link_refused(request, "Join", turn)
    async with services.db.connection() as conn:
        invitation = await members.open_invitation(conn, token[:100], now=utcnow())
        await forgive(conn, turn)
    return public_page(
        request, services, "invitation.html", title="Join", invitation=invitation, token=token
    )


@router.post("/invitations/{token}", dependencies=[open_to_all()])
async def accept_invitation(request: Request, token: str, services: ServicesDep) -> Response:
    form = await public_form(request)
    turn = await _count_link(request, services, "invitation_link")
    if not turn.within:
        return _link_refused(request, "Join", turn)
    password = form_text(form, "password")
    async with services.db.connection() as conn:
        invitation = await members.open_invitation(conn, token[:100], now=utcnow())
        error = None
        if not invitation["has_password"] and password != form_text(form, "repeat"):
            error = "The two passwords differ."
        else:
            try:
                member_id, organization_id = await members.accept_invitation(
                    conn,
                    token[:100],
                    password=password,
                    code=form_text(form, "code"),
                    cost=services.settings.password_hash_cost,
                    now=utcnow(),
                    origin=origin_of(request, services, "dashboard"),
                )
                await forgive(conn, turn)
            except (InvalidInput, Unauthenticated) as exc:
                error = f"{str(exc).capitalize()}."
    if error:
        return public_page(
            request,
            services,
            "invitation.html",
            title="Join",
            status_code=422,
            invitation=invitation,
            token=token,
            error=error,
        )
    return await _signed_in(request, services, member_id, organization_id)


@router.get("/forgot", dependencies=[open_to_all()])
async def forgot_page(request: Request, services: ServicesDep) -> Response:
    return public_page(request, services, "forgot.html", title="Reset your password")


@router.post("/forgot", dependencies=[open_to_all()])
async def forgot(request: Request, services: ServicesDep) -> Response:
    form = await public_form(request)
    # Each request counts as a sign-in attempt, never given back: past the limit no email
    # goes, so nobody floods a member's inbox from one address.
    async with services.db.connection() as conn:
        turn = await count_sign_in(conn, throttled_client(request, services), now=utcnow())
    if not turn.within:
        response = public_page(
            request,
            services,
            "forgot.html",
            title="Reset your password",
            status_code=429,
            error="Too many attempts from your address. Try again in "
            f"{math.ceil(turn.retry_after / 60)} minutes.",
        )
        response.headers["Retry-After"] = str(turn.retry_after)
        return response
    # The same page, after the same work, for a member and a stranger: the email is queued
    # (one statement) for the worker to send, and the deliverers are woken after the answer
    # either way (where the answer waits for it, as on Lambda, it says nothing either).
    await members.request_password_reset(services, form_text(form, "email"))
    response = public_page(request, services, "forgot.html", title="Reset your password", sent=True)
    response.background = BackgroundTask(wake_deliveries, services)
    return response


async def _count_link(request: Request, services: Services, kind: AuthFailureKind) -> Turn:
    """Count a use of a one-time link (a reset's, an invitation's) before its token is
    looked up (per client)."""
    async with services.db.connection() as conn:
        client = throttled_client(request, services)
        return await count_attempt(conn, (kind, client), now=utcnow())


def _reset_refused(request: Request, services: Services, token: str, turn: Turn) -> Response:
    page = public_page(
        request,
        services,
        "reset.html",
        title="Set a password",
        status_code=429,
        token=token,
        error=f"Too many attempts from your address. Try again in {_minutes(turn)}.",
    )
    return _too_many(page, turn)


@router.get("/reset/{token}", dependencies=[open_to_all()])
async def reset_page(request: Request, token: str, services: ServicesDep) -> Response:
    turn = await _count_link(request, services, "reset_link")
    if not turn.within:
        return _reset_refused(request, services, token, turn)
    async with services.db.connection() as conn:
        if not await members.reset_link_is_live(conn, token[:100], now=utcnow()):
            raise NotFound("this link was used, has expired, or does not exist")
        await forgive(conn, turn)
    return public_page(request, services, "reset.html", title="Set a password", token=token)


@router.post("/reset/{token}", dependencies=[open_to_all()])
async def reset(request: Request, token: str, services: ServicesDep) -> Response:
    form = await public_form(request)
    turn = await _count_link(request, services, "reset_link")
    if not turn.within:
        return _reset_refused(request, services, token, turn)
    password = form_text(form, "password")
    error = "The two passwords differ." if password != form_text(form, "repeat") else None
    if error is None:
        try:
            async with services.db.connection() as conn:
                member_id, organization_id, two_factor = await members.reset_password(
                    conn,
                    token[:100],
                    password=password,
                    cost=services.settings.password_hash_cost,
                    now=utcnow(),
                    origin=origin_of(request, services, "dashboard"),
                )
                await forgive(conn, turn)
        except InvalidInput as exc:
            error = f"{str(exc).capitalize()}."
    if error:
        return public_page(
            request,
            services,
            "reset.html",
            title="Set a password",
            status_code=422,
            token=token,
            error=error,
        )
    if two_factor:
        return see_other("/app/sign-in?reset=1")
    return await _signed_in(request, services, member_id, organization_id)
