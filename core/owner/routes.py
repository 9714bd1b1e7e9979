"""Routes: which of a form's submissions go to which destination, now or as a digest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from core.destinations import webhook
from core.destinations.base import ValidationContext
from core.destinations.registry import ADAPTERS
from core.destinations.templates import template_errors
from core.owner import destinations
from core.owner.changes import Change
from core.platform.db import Conn
from core.platform.errors import InvalidInput, InvalidTemplate, NotFound, RouteExists, invalid_input
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import DigestPeriod, RouteMode, SubmissionStatus


class Template(BaseModel):
    """Message subject and text with `{{field}}` placeholders only (types that send text)."""

    model_config = ConfigDict(extra="forbid")

    subject: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=10_000)] | None = None


class RouteFields(BaseModel):
    """A route as created (`period` is required in `digest` mode and refused otherwise)."""

    model_config = ConfigDict(extra="forbid")

    destination_id: str
    enabled: bool = True
    include_statuses: list[SubmissionStatus] = Field(
        default_factory=lambda: list[SubmissionStatus](["accepted"]), min_length=1
    )
    mode: RouteMode = "immediate"
    period: DigestPeriod | None = None
    template: Template | None = None


class RoutePatch(BaseModel):
    """A change to a route; fields left out keep their value (the destination is fixed)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool | None = None
    include_statuses: list[SubmissionStatus] | None = None
    mode: RouteMode | None = None
    period: DigestPeriod | None = None
    template: Template | None = None


class _RouteSettings(BaseModel):
    """Every setting of a route, checked as a whole (creation and after a PATCH)."""

    enabled: bool
    include_statuses: list[SubmissionStatus] = Field(min_length=1)
    mode: RouteMode
    period: DigestPeriod | None
    template: Template | None


def _check(settings: dict[str, Any], destination_type: str) -> _RouteSettings:
    try:
        route = _RouteSettings.model_validate(settings)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    if (route.mode == "digest") != (route.period is not None):
        raise InvalidInput(
            "period goes with digest mode only",
            [{"field": "period", "message": "required in digest mode, refused in immediate mode"}],
        )
    if route.template is not None:
        if not ADAPTERS[destination_type].templates:
            raise InvalidTemplate(
                f"{destination_type} destinations send JSON; templates apply to text messages",
                [{"field": "template", "message": f"not used by {destination_type} destinations"}],
            )
        for name in ("subject", "text"):
            problems = template_errors(getattr(route.template, name) or "")
            if problems:
                raise InvalidTemplate(
                    problems[0], [{"field": f"template.{name}", "message": problems[0]}]
                )
    route.include_statuses = list(dict.fromkeys(route.include_statuses))
    return route


def _columns(route: _RouteSettings) -> dict[str, Any]:
    return {
        "enabled": route.enabled,
        "include_statuses": route.include_statuses,
        "mode": route.mode,
        "period": route.period,
        "template": None if route.template is None else Jsonb(route.template.model_dump()),
    }


@scoped
async def add_route(
    conn: Conn, scope: OrgScope, *, form_id: str, fields: RouteFields
) -> dict[str, Any]:
    """Route a live form to a live destination; one live route per pair."""
    org = scope.organization_id
    cur = await conn.execute(queries["live_form_exists"], {"id": form_id, "organization_id": org})
    if await cur.fetchone() is None:
        raise NotFound(f"no form {form_id}")
    cur = await conn.execute(
        queries["live_destination_type"], {"id": fields.destination_id, "organization_id": org}
    )
    destination = await cur.fetchone()
    if destination is None:
        raise NotFound(f"no destination {fields.destination_id}")
    route = _check(fields.model_dump(exclude={"destination_id"}), destination["type"])
    try:
        # A savepoint keeps the caller's transaction usable after the refusal.
        async with conn.transaction():
            cur = await conn.execute(
                queries["insert_route"],
                {
                    **_columns(route),
                    "id": new_id("rte"),
                    "organization_id": org,
                    "form_id": form_id,
                    "destination_id": fields.destination_id,
                },
            )
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "routes_form_destination_key":
            raise RouteExists(
                f"form {form_id} already has a route to {fields.destination_id}"
            ) from None
        raise
    row = await cur.fetchone()
    assert row is not None
    return row


@scoped
async def list_routes(
    conn: Conn, scope: OrgScope, *, form_id: str, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` live routes of a live form with ids after `after`, by id."""
    org = scope.organization_id
    cur = await conn.execute(queries["get_form"], {"id": form_id, "organization_id": org})
    if await cur.fetchone() is None:
        raise NotFound(f"no form {form_id}")
    cur = await conn.execute(
        queries["list_form_routes"],
        {"organization_id": org, "form_id": form_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


@scoped
async def patch_route(
    conn: Conn, scope: OrgScope, *, route_id: str, patch: RoutePatch
) -> dict[str, Any]:
    """Change what `patch` sets; the result must satisfy every rule of a new route."""
    params = {"id": route_id, "organization_id": scope.organization_id}
    await conn.execute(queries["lock_route_form"], params)
    current = await (await conn.execute(queries["lock_route"], params)).fetchone()
    if current is None:
        raise NotFound(f"no route {route_id}")
    merged = {name: current[name] for name in ("enabled", "include_statuses", "mode", "period")}
    merged["template"] = current["template"]
    merged.update(patch.model_dump(include=patch.model_fields_set))
    if patch.mode == "immediate" and "period" not in patch.model_fields_set:
        merged["period"] = None  # leaving digest mode drops its period
    route = _check(merged, current["destination_type"])
    row = await (
        await conn.execute(queries["update_route"], {**_columns(route), **params})
    ).fetchone()
    assert row is not None
    return row


@scoped
async def remove_route(conn: Conn, scope: OrgScope, *, route_id: str) -> None:
    """Remove a route softly; deliveries already queued through it are kept."""
    params = {"id": route_id, "organization_id": scope.organization_id}
    await conn.execute(queries["lock_route_form"], params)
    if await (await conn.execute(queries["delete_route"], params)).fetchone() is None:
        raise NotFound(f"no route {route_id}")


async def create_route(change: Change, *, form_id: str, fields: RouteFields) -> dict[str, Any]:
    """Route a form to a destination (`add_route`) as the change."""
    async with change as conn:
        row = await add_route(conn, change.scope, form_id=form_id, fields=fields)
        change.subject = row["id"]
    return row


async def update_route(change: Change, *, route_id: str, patch: RoutePatch) -> dict[str, Any]:
    """Change a route (`patch_route`) as the change."""
    async with change as conn:
        return await patch_route(conn, change.scope, route_id=route_id, patch=patch)


async def delete_route(change: Change, *, route_id: str) -> None:
    """Delete a route (`remove_route`) as the change."""
    async with change as conn:
        await remove_route(conn, change.scope, route_id=route_id)


@dataclass(frozen=True, slots=True)
class RoutedWebhook:
    """A webhook destination routed from a form, and what of it `route_to_webhook` made."""

    destination_id: str
    secret: str
    created: bool
    # The route it added, when the destination was already there.
    created_route: str | None


async def _webhook_to(conn: Conn, scope: OrgScope, url: str) -> str | None:
    """The organization's webhook destination to `url`, if any."""
    found = await destinations.list_destinations(conn, scope, after=None, limit=500)
    kind = webhook.adapter.type
    same = [d for d in found if d["type"] == kind and d["config"].get("url") == url]
    return str(same[0]["id"]) if same else None


async def _routed(conn: Conn, scope: OrgScope, form_id: str, destination_id: str) -> bool:
    linked = await list_routes(conn, scope, form_id=form_id, after=None, limit=500)
    return any(r["destination_id"] == destination_id for r in linked)


async def _secret_of(conn: Conn, scope: OrgScope, destination_id: str) -> str:
    current = await destinations.current_secret(conn, scope, destination_id=destination_id)
    assert current is not None  # a webhook destination always has a secret
    return current[1]


async def route_to_webhook(
    change: Change, *, form_id: str, url: str, name: str, ctx: ValidationContext
) -> RoutedWebhook:
    """Route `form_id` to the organization's webhook destination to `url`, made (as `name`)
    when there is none (`postbag listen --create-destination`), as one change recorded as
    `route.created` (after a `destination.created` row when the destination is new); when
    both are there, nothing changes or is recorded."""
    scope = change.scope
    async with change.db.scoped(scope) as conn:
        there = await _webhook_to(conn, scope, url)
        if there is not None and await _routed(conn, scope, form_id, there):
            return RoutedWebhook(there, await _secret_of(conn, scope, there), False, None)
    async with change as conn:
        destination_id = await _webhook_to(conn, scope, url)
        created = destination_id is None
        if destination_id is None:
            fields = destinations.DestinationFields.model_validate(
                {"type": webhook.adapter.type, "name": name, "config": {"url": url}}
            )
            made = await destinations.add_destination(conn, scope, fields=fields, ctx=ctx)
            destination_id = str(made.destination["id"])
        route_id = None
        if not await _routed(conn, scope, form_id, destination_id):
            route = await add_route(
                conn, scope, form_id=form_id, fields=RouteFields(destination_id=destination_id)
            )
            route_id = str(route["id"])
        if created:
            # The destination's row first, then the change's own: its route.
            await change.acting.record(conn, "destination.created", destination_id)
        change.action, change.subject = "route.created", route_id
        secret = await _secret_of(conn, scope, destination_id)
    return RoutedWebhook(destination_id, secret, created, None if created else route_id)
