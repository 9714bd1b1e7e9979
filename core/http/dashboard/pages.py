"""Page rendering, the session cookie and CSRF checks shared by every dashboard page."""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from core.http.access import Access, Rule, declare, origin_of
from core.http.deps import ServicesDep
from core.owner.dashboard_sessions import DashboardSession, load_session
from core.owner.roles import Permission, may
from core.owner.sso import recheck_session
from core.platform.clock import utcnow
from core.platform.services import Services

SESSION_COOKIE = "pb_session"
SIGN_IN_COOKIE = "pb_sign_in"

# The navigation: each page's address, label and the permission it needs (a link the
# member's role cannot open is not shown).
NAV: list[tuple[str, str, Permission]] = [
    ("/app", "Inbox", "read"),
    ("/app/forms", "Forms", "read"),
    ("/app/destinations", "Destinations", "read"),
    ("/app/streams", "Streams", "read"),
    ("/app/alerts", "Alerts", "read"),
    ("/app/events", "Events", "read"),
    ("/app/audit", "Audit", "read_audit"),
    ("/app/keys", "Keys", "configure"),
    ("/app/members", "Members", "manage_members"),
    ("/app/organization", "Organization", "manage_members"),
]

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


class SignInRequired(Exception):
    """The visitor has no live session; they are sent to the sign-in page."""


class TwoFactorSetupRequired(Exception):
    """The organization requires two-factor sign-in and the member has none: every page
    but its setup sends them there (docs/sso.md#policies)."""


# What a member sent to set up two-factor sign-in may still reach.
TWO_FACTOR_SETUP = frozenset(
    {"/app/two-factor", "/app/two-factor/start", "/app/two-factor/confirm", "/app/sign-out"}
)


class CsrfRejected(Exception):
    """A state-changing form came without the session's CSRF token; nothing changes."""


def secure_cookies(services: Services) -> bool:
    """Cookies are `Secure` unless Postbag is served over plain http (local development)."""
    return not services.settings.public_url.startswith("http:")


def set_cookie(response: Response, services: Services, name: str, value: str) -> None:
    response.set_cookie(
        name, value, httponly=True, samesite="lax", secure=secure_cookies(services), path="/app"
    )


async def current_session(request: Request, services: ServicesDep) -> DashboardSession:
    """The signed-in session, or SignInRequired (also when the single sign-on provider,
    asked again, says no); TwoFactorSetupRequired while the policy's setup is missing."""
    now = utcnow()
    async with services.db.connection() as conn:
        session = await load_session(conn, request.cookies.get(SESSION_COOKIE), now=now)
    if session is None:
        raise SignInRequired
    if session.sso_due and not await recheck_session(services, session.id, now=now):
        raise SignInRequired
    if session.two_factor_missing and request.url.path not in TWO_FACTOR_SETUP:
        raise TwoFactorSetupRequired
    request.state.session = session
    return session


SessionDep = Annotated[DashboardSession, Depends(current_session)]


async def current_access(request: Request, services: ServicesDep, session: SessionDep) -> Access:
    """Who a page acts for: the session's organization and actor."""
    return Access(session.scope, session.actor, origin_of(request, services, "dashboard"))


def page_needs(
    permission: Permission, action: str | None = None, *, subject: str | None = None
) -> DependsParam:
    """A page's rule: the permission the session's role needs, and the audit action it
    records on success (see `core.http.access.Rule`)."""
    return declare(Rule(permission, action, subject), current_access)


async def checked_form(request: Request, session: SessionDep) -> FormData:
    """The posted form, once its CSRF token matches the session's."""
    form = await request.form()
    token = form.get("csrf")
    if not isinstance(token, str) or not secrets.compare_digest(token, session.csrf_token):
        raise CsrfRejected
    return form


CheckedForm = Annotated[FormData, Depends(checked_form)]


def form_text(form: FormData, name: str) -> str:
    """A posted form's text field `name`: empty when it is missing or a file."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def render(
    request: Request,
    template: str,
    *,
    title: str,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render a page in the dashboard layout."""
    session: DashboardSession | None = getattr(request.state, "session", None)
    return templates.TemplateResponse(
        request,
        template,
        {
            "title": title,
            "session": session,
            # What the member's role may do: a template shows and enables only that, and
            # says why a form is greyed out (`why`).
            "can": (lambda permission: may(session.role, permission)) if session else None,
            "why": (lambda permission, doing: why_not(session, permission, doing))
            if session
            else None,
            "nav": NAV,
            "active": context.pop("active", None),
            "open_alerts": context.pop("open_alerts", 0),
            **context,
        },
        status_code=status_code,
    )


def error_page(
    request: Request,
    status_code: int,
    title: str,
    message: str,
    problems: list[dict[str, str]] | None = None,
) -> HTMLResponse:
    """An error in the dashboard's style, with the fields at fault and what to do next."""
    signed_in = getattr(request.state, "session", None) is not None
    return render(
        request,
        "error.html",
        title=title,
        status_code=status_code,
        message=message,
        problems=problems or [],
        next_href="/app" if signed_in else "/app/sign-in",
        next_label="Back to the inbox" if signed_in else "Sign in",
    )


# Who holds each permission, in words, for a greyed-out form's reason.
_HOLDERS: dict[Permission, str] = {
    "read": "members",
    "read_values": "operators, admins and owners",
    "operate": "operators, admins and owners",
    "configure": "admins and owners",
    "manage_members": "owners",
    "read_audit": "admins and owners",
}


def why_not(session: DashboardSession, permission: Permission, doing: str) -> str:
    """Why the member cannot `doing` (`Only admins and owners change routes; your role is
    viewer.`), or "" when their role may."""
    if may(session.role, permission):
        return ""
    return f"Only {_HOLDERS[permission]} {doing}; your role is {session.role}."


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def format_time(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


templates.env.filters["time"] = format_time
