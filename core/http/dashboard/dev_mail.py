"""`/app/dev/mail`: the development mailbox (`POSTBAG_EMAIL_PROVIDER=dev`, `postbag dev`'s
default). Every email the process would have sent, newest first, with its links, readable
without signing in (an invited teammate has no account yet), by a client on this machine
only: its reset and invitation links would let anyone else in. The router is mounted only
when the provider is `dev`, which production settings refuse: elsewhere the page is a 404."""

from __future__ import annotations

from ipaddress import ip_address

from fastapi import APIRouter, Request
from starlette.exceptions import HTTPException
from starlette.responses import Response

from core.destinations import mailbox
from core.http.access import AuditedRoute, open_to_all
from core.http.dashboard.pages import render

router = APIRouter(prefix="/app/dev", include_in_schema=False, route_class=AuditedRoute)


@router.get("/mail", dependencies=[open_to_all()])
async def dev_mail(request: Request) -> Response:
    if not _loopback(request):
        raise HTTPException(404)
    response = render(
        request, "dev_mail.html", title="Development mailbox", messages=mailbox.caught()
    )
    # The messages hold one-time links: no Referer carries them off this page.
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def _loopback(request: Request) -> bool:
    """Whether the client connected from this machine (`postbag dev` believes no
    forwarding header unless told to: the peer's own address)."""
    try:
        return request.client is not None and ip_address(request.client.host).is_loopback
    except ValueError:
        return False
