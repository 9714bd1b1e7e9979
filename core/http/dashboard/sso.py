"""Single sign-on in the dashboard (docs/sso.md): "Sign in with SSO" (an email, its domain's
organization, off to its provider and back), and the owners' organization page setting the
provider and the sign-in policy with the same `core` calls as `/v1/organization/sso` and
`/v1/organization/policy`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep, open_to_all, origin_of
from core.http.dashboard.pages import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    CheckedForm,
    SessionDep,
    form_text,
    page_needs,
    see_other,
    set_cookie,
)
from core.http.dashboard.public_forms import public_form
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep, throttled_client
from core.owner import sso
from core.owner.dashboard_sessions import open_session
from core.owner.roles import ROLES
from core.owner.throttle import count_sign_in
from core.platform.clock import utcnow
from core.platform.errors import SsoRefused, TooManyAttempts, invalid_input

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# The state of a sign-in under way, bound to the browser that started it.
SSO_COOKIE = "pb_sso"


@router.post("/sso", dependencies=[open_to_all()])
async def start(request: Request, services: ServicesDep) -> Response:
    """The sign-in page's "Sign in with SSO": off to the provider of the email's domain.
    Each start counts as a sign-in attempt of the client (never given back: a completed
    sign-in is the provider's to throttle)."""
    form = await public_form(request)
    async with services.db.connection() as conn:
        turn = await count_sign_in(conn, throttled_client(request, services), now=utcnow())
    if not turn.within:
        raise TooManyAttempts("too many sign-in attempts from your address", turn.retry_after)
    started = await sso.start_sign_in(
        services,
        form_text(form, "email"),
        redirect_uri=sso.redirect_uri(services),
        now=utcnow(),
    )
    response = see_other(started.url)
    set_cookie(response, services, SSO_COOKIE, started.state)
    return response


@router.get(sso.CALLBACK_PATH.removeprefix("/app"), dependencies=[open_to_all()])
async def callback(request: Request, services: ServicesDep) -> Response:
    """The provider's answer: the member signed in, in the organization that signed them."""
    params = request.query_params
    if "error" in params:
        raise SsoRefused(f"the provider refused the sign-in ({params['error'][:100]})")
    signed = await sso.finish_sign_in(
        services,
        state=params.get("state", "")[:200],
        cookie_state=request.cookies.get(SSO_COOKIE, ""),
        code=params.get("code", ""),
        redirect_uri=sso.redirect_uri(services),
        origin=origin_of(request, services, "dashboard"),
        now=utcnow(),
    )
    async with services.db.connection() as conn:
        # The session stays in the organization whose provider signed the person in.
        session_id = await open_session(
            conn,
            member_id=signed.member_id,
            organization_id=signed.organization_id,
            user_agent=request.headers.get("user-agent", ""),
            now=utcnow(),
            sso_organization_id=signed.organization_id,
            sso_refresh_token=signed.refresh_token,
        )
    response = see_other("/app")
    set_cookie(response, services, SESSION_COOKIE, session_id)
    response.delete_cookie(SSO_COOKIE, path="/app")
    response.delete_cookie(SIGN_IN_COOKIE, path="/app")
    return response


@router.get("/organization", dependencies=[page_needs("manage_members")])
async def organization_page(
    request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        settings = await sso.get_sso(conn, session.scope)
        policy = await sso.get_policy(conn, session.scope)
    return await page(
        request,
        services,
        session,
        "organization.html",
        title="Organization",
        active="/app/organization",
        sso=settings,
        policy=policy,
        roles=ROLES,
        redirect_uri=sso.redirect_uri(services),
    )


def _lines(form: FormData, name: str) -> list[str]:
    return [part for part in form_text(form, name).replace(",", " ").split() if part]


@router.post("/organization/sso", dependencies=[page_needs("manage_members", "sso.updated")])
async def save_sso(change: ChangeDep, services: ServicesDep, form: CheckedForm) -> Response:
    try:
        settings = sso.SsoSettings.model_validate(
            {
                "issuer": form_text(form, "issuer"),
                "client_id": form_text(form, "client_id"),
                "client_secret": form_text(form, "client_secret") or None,
                "allowed_domains": _lines(form, "allowed_domains"),
                "default_role": form_text(form, "default_role") or "viewer",
                "scopes": form_text(form, "scopes") or sso.DEFAULT_SCOPES,
            }
        )
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await sso.configure_sso(
        change, settings, allow_private=services.settings.allow_private_targets, now=utcnow()
    )
    return see_other("/app/organization")


@router.post(
    "/organization/policy",
    dependencies=[page_needs("manage_members", "organization.policy_updated")],
)
async def save_policy(change: ChangeDep, form: CheckedForm) -> Response:
    def number(name: str) -> int | None:
        value = form_text(form, name).strip()
        return int(value) if value.isdigit() else None

    try:
        policy = sso.SsoPolicy(
            sso_required=form.get("sso_required") == "on",
            two_factor_required=form.get("two_factor_required") == "on",
            session_idle_minutes=number("session_idle_minutes"),
            session_absolute_hours=number("session_absolute_hours"),
            break_glass=_lines(form, "break_glass"),
        )
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await sso.set_policy(change, policy)
    return see_other("/app/organization")
