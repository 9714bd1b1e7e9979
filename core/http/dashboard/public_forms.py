"""The forms posted before a session exists (signing in, an invitation, a password reset,
single sign-on): their page under a fresh CSRF token in a cookie of its own
(`SIGN_IN_COOKIE`), and the posted form once its token matches that cookie."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData
from starlette.responses import Response

from core.http.dashboard.pages import SIGN_IN_COOKIE, CsrfRejected, render, set_cookie
from core.platform.services import Services


def public_page(
    request: Request,
    services: Services,
    template: str,
    *,
    title: str,
    status_code: int = 200,
    **context: Any,
) -> Response:
    """A page with a form posted before signing in, under a fresh CSRF cookie; no
    Referer leaves it (its address may hold a one-time token)."""
    token = secrets.token_urlsafe(32)
    response = render(
        request, template, title=title, status_code=status_code, csrf=token, **context
    )
    set_cookie(response, services, SIGN_IN_COOKIE, token)
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def public_form(request: Request) -> FormData:
    """The posted form, once its CSRF token matches the page's cookie."""
    form = await request.form()
    token, cookie = form.get("csrf"), request.cookies.get(SIGN_IN_COOKIE)
    if not isinstance(token, str) or not cookie or not secrets.compare_digest(token, cookie):
        raise CsrfRejected
    return form
