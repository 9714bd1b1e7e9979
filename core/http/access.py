"""Who may call each route, and what it leaves in the audit trail: declared on the route.

Every `/v1` route and dashboard page names its `Rule` in its decorator
(`dependencies=[needs("configure", "form.updated")]`): the permission it needs and, for a
change or a read of visitors' data, the audit action it records. The rule's dependency
checks the actor's role (`core.owner.roles.require`, the one check). A change records its
action in its own transaction: the route takes a `ChangeDep` (`core.owner.changes.Change`)
and hands it to the change's use case, which makes the change inside it, so the change and
its audit row commit together or not at all. An action that changes nothing stored (a read
of values, a test send) is recorded by `AuditedRoute` once the route has answered with
success, before the answer is sent.
`check_rules` refuses to build an app with a route that declares no rule, or a change that
takes no `ChangeDep`.
"""

import json
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.params import Depends as DependsParam
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import BaseRoute

from core.http.served import Served, served_routes
from core.intake.visitor import client_address
from core.owner import audit
from core.owner.changes import Acting, Change, Origin
from core.owner.roles import Actor, Permission, require
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.platform.vocabulary import AuditVia

_RULE = "postbag_rule"
_USER_AGENT_CHARS = 500


@dataclass(frozen=True, slots=True)
class Access:
    """Who a request acts for, in which organization, and from where."""

    scope: OrgScope
    actor: Actor
    origin: Origin

    def acting(self) -> Acting:
        """The actor as a change records it."""
        return Acting(self.scope, self.actor, self.origin)


@dataclass(frozen=True, slots=True)
class Rule:
    """A route's declared rule: the permission it needs (None: a sign-in page, open to
    anyone) and the audit action it records on success, with the path or query parameter
    naming its subject (default: the id of what a 201 or 202 made, else the last path
    parameter, else the organization)."""

    permission: Permission | None
    action: str | None = None
    subject: str | None = None
    # Recorded only when the route answers this status (a replay's dry run answers 200).
    status: int | None = None


# The origin of an in-process call: `/mcp` sets it while its tools call `/v1`.
_inner_origin: ContextVar[Origin | None] = ContextVar("postbag_origin", default=None)


def origin_of(request: Request, services: Services, via: AuditVia) -> Origin:
    """The request's origin, or the outer request's for an in-process call from `/mcp`."""
    inner = _inner_origin.get()
    if inner is not None:
        return inner
    peer = request.client.host if request.client else None
    address = client_address(
        peer, request.headers.get("x-forwarded-for"), services.settings.trusted_proxies
    )
    agent = request.headers.get("user-agent")
    return Origin(via, address, agent[:_USER_AGENT_CHARS] if agent else None)


@contextmanager
def calls_from(origin: Origin) -> Iterator[None]:
    """In-process `/v1` calls made inside this block are recorded as coming from `origin`."""
    token = _inner_origin.set(origin)
    try:
        yield
    finally:
        _inner_origin.reset(token)


def declare(rule: Rule, access: Callable[..., Awaitable[Access | None]]) -> DependsParam:
    """The dependency that holds `rule` for a route: `access` finds who acts (None: the
    route checks its caller itself, as ingest does an ingest key), the role is checked."""

    # No `from __future__ import annotations` here: FastAPI reads this annotation, which
    # names the closure's `access`, as an object.
    async def check(request: Request, found: Annotated[Access | None, Depends(access)]) -> None:
        if found is not None and rule.permission is not None:
            require(found.actor, rule.permission)
            request.state.access = found
        request.state.rule = rule

    setattr(check, _RULE, rule)
    declared: DependsParam = Depends(check)
    return declared


def open_to_all() -> DependsParam:
    """The rule of a page anyone may open, signed in or not (sign-in, sign-out)."""

    async def nobody() -> None:
        return None

    return declare(Rule(None), nobody)


async def change_of(request: Request) -> Change:
    """The change a route makes, recorded as its rule's action (its subject: the rule's
    named parameter, else the last path parameter; a create names what it made)."""
    rule: Rule | None = getattr(request.state, "rule", None)
    found: Access | None = getattr(request.state, "access", None)
    if rule is None or rule.action is None or found is None:
        raise RuntimeError(f"{request.url.path}: a change needs a rule with an action")
    subject = None
    if rule.subject is not None:
        subject = request.path_params.get(rule.subject) or request.query_params.get(rule.subject)
    if subject is None and request.path_params:
        subject = str(list(request.path_params.values())[-1])
    services: Services = request.app.state.services
    change = Change(services.db, found.acting(), rule.action, subject=subject)
    request.state.change = change
    return change


ChangeDep = Annotated[Change, Depends(change_of)]


def _dependants(route: APIRoute) -> Iterator[Any]:
    stack = [route.dependant]
    while stack:
        dependant = stack.pop()
        yield dependant
        stack.extend(dependant.dependencies)


def rule_of(route: BaseRoute) -> Rule | None:
    """The rule a route declares, if any (only an `APIRoute` declares one)."""
    if not isinstance(route, APIRoute):
        return None
    for dependant in _dependants(route):
        rule: Rule | None = getattr(dependant.call, _RULE, None)
        if rule is not None:
            return rule
    return None


def makes_change(route: APIRoute) -> bool:
    """Whether the route makes its change in a `Change` (takes a `ChangeDep`)."""
    return any(dependant.call is change_of for dependant in _dependants(route))


def checked_routes(app: FastAPI) -> list[Served]:
    """The app's routes that must declare a rule: all of `/v1` and the dashboard's."""
    return [
        one
        for one in served_routes(app.routes)
        if isinstance(one.route, APIRoute)
        and (one.path.startswith("/v1/") or one.path == "/app" or one.path.startswith("/app/"))
    ]


def check_rules(app: FastAPI) -> None:
    """Refuse an app with a `/v1` route or a page that declares no rule, that would not
    record its audit action, or whose change would not record it in its own transaction."""
    for served in checked_routes(app):
        where = f"{sorted(served.methods)} {served.path}"
        rule = rule_of(served.route)
        if rule is None:
            raise RuntimeError(f"{where} declares no permission (core/http/access.py)")
        if not isinstance(served.route, AuditedRoute):
            raise RuntimeError(f"{where} is not an AuditedRoute (core/http/access.py)")
        if (
            rule.action is not None
            and rule.action not in audit.UNCHANGING
            and not makes_change(served.route)
        ):
            raise RuntimeError(
                f"{where} records {rule.action} but makes no Change (core/owner/changes.py)"
            )


def audit_as(request: Request, *, action: str | None = None, subject: str | None = None) -> None:
    """Record this read under another action (a page that shows values only to a role
    that may read them) or subject; a change sets its own on its `Change`."""
    if action is not None:
        request.state.audit_action = action
    if subject is not None:
        request.state.audit_subject = subject


def _subject(request: Request, rule: Rule, response: Response, access: Access) -> str:
    named = getattr(request.state, "audit_subject", None)
    if named is None and rule.subject is not None:
        named = request.path_params.get(rule.subject) or request.query_params.get(rule.subject)
    body = getattr(response, "body", b"")
    if named is None and response.status_code in (201, 202) and body:
        answer = json.loads(body)
        named = answer.get("id") if isinstance(answer, dict) else None
    if named is None and request.path_params:
        named = str(list(request.path_params.values())[-1])
    return str(named) if named is not None else access.scope.organization_id


async def record_answer(request: Request, response: Response) -> None:
    """Append the route's audit action for a successful answer, unless a `Change` of the
    route's recorded it with the change."""
    if getattr(request.state, "change", None) is not None:
        return
    rule: Rule | None = getattr(request.state, "rule", None)
    found: Access | None = getattr(request.state, "access", None)
    named: str | None = getattr(request.state, "audit_action", None)
    action = named or (rule.action if rule is not None else None)
    if rule is None or action is None or found is None or response.status_code >= 400:
        return
    if rule.status is not None and response.status_code != rule.status:
        return
    entry = found.acting().entry(action, _subject(request, rule, response, found))
    services: Services = request.app.state.services
    async with services.db.scoped(found.scope) as conn:
        if action in audit.READ_ONCE:
            await audit.record_read(conn, found.scope, entry)
        else:
            await audit.record(conn, found.scope, entry)


# A browser that made a change reads from the primary for this long after it (the page
# the change redirects to shows it even while a read replica lags behind).
WROTE_COOKIE = "postbag_wrote"
FRESH_SECONDS = 10


def mark_written(request: Request, response: Response) -> None:
    """After a change committed, tell the browser to read its next pages from the primary
    (`reads_fresh`) for FRESH_SECONDS."""
    change: Change | None = getattr(request.state, "change", None)
    if change is not None and change.recorded:
        response.set_cookie(
            WROTE_COOKIE,
            "1",
            max_age=FRESH_SECONDS,
            path="/",
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )


def reads_fresh(request: Request) -> bool:
    """Whether this browser changed something in the last FRESH_SECONDS, so its reads go to
    the primary rather than the read replica (read-your-writes)."""
    return WROTE_COOKIE in request.cookies


class AuditedRoute(APIRoute):
    """A route that records its rule's audit action after a successful answer (before the
    answer's body is sent: a streamed export is recorded as it starts), unless its change
    recorded it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def audited(request: Request) -> Response:
            response = await handler(request)
            await record_answer(request, response)
            mark_written(request, response)
            return response

        return audited
