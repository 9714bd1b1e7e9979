"""The API keys page (admins and owners): the organization's live keys by prefix and name,
a new key with a role (shown once, on the page that made it), a key revoked. The same
`core` calls as `/v1/keys`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.owner import organizations
from core.owner.members import checked_role
from core.owner.organizations import NewKey
from core.owner.roles import ROLES, outranks
from core.platform.errors import InvalidInput

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# The page lists this many live keys (the plans allow fewer).
SHOWN = 500
NAME_CHARS = 200


async def _keys_page(
    request: Request, services: ServicesDep, session: SessionDep, *, new: NewKey | None
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        keys = await organizations.list_api_keys(conn, session.scope, after=None, limit=SHOWN)
    return await page(
        request,
        services,
        session,
        "keys.html",
        title="API keys",
        active="/app/keys",
        keys=keys,
        roles=[(role, outranks(session.role, role)) for role in ROLES],
        new=new,
    )


@router.get("/keys", dependencies=[page_needs("configure")])
async def keys_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    return await _keys_page(request, services, session, new=None)


@router.post("/keys", dependencies=[page_needs("configure", "key.created")])
async def key_create(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
) -> Response:
    name = str(posted.get("name") or "").strip()
    if not name or len(name) > NAME_CHARS:
        raise InvalidInput(
            "a key needs a name", [{"field": "name", "message": f"1 to {NAME_CHARS} characters"}]
        )
    role = checked_role(str(posted.get("role") or ""))
    new = await organizations.create_key(change, name=name, role=role)
    # Shown on this answer only: the key is never in an address, a log or a later page.
    response = await _keys_page(request, services, session, new=new)
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/keys/{key_id}/revoke", dependencies=[page_needs("configure", "key.revoked")])
async def key_revoke(change: ChangeDep, _posted: CheckedForm, key_id: str) -> Response:
    await organizations.revoke_key(change, key_id)
    return see_other("/app/keys")
