"""REST hooks (docs/hooks.md): the subscriptions Zapier, Make, n8n and Pipedream make and
remove through `/v1/hooks`.

A hook is a webhook destination plus what feeds it, made and removed in one change: a
form's route (`submission.created`), a stream's route (`stream.event`), or, for the
lifecycle events (`delivery.dead`, `destination.paused`), the deliveries `queue_lifecycle`
adds when such an event is written. So a hook is signed, retried, throttled, paused, counted
against the plan and held to the SSRF rules exactly as a webhook destination is. A target
that answers `410 Gone` unsubscribes its hook (`unsubscribe_gone`, the worker's change).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.destinations import webhook
from core.destinations.base import ValidationContext
from core.owner.changes import Acting, Change, Origin
from core.owner.destinations import DestinationFields, add_destination, remove_destination
from core.owner.roles import Actor
from core.owner.routes import RouteFields, add_route
from core.platform.clock import iso_ms
from core.platform.db import Conn, Database
from core.platform.errors import InvalidConfig, InvalidInput, NotFound
from core.platform.ids import id_pattern, new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import HookEndReason, HookEvent

# What each event needs besides the target: the form, the stream, or neither.
_SOURCE: dict[str, str | None] = {
    "submission.created": "form",
    "stream.event": "stream",
    "delivery.dead": None,
    "destination.paused": None,
}

TargetUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048)]


class HookFields(BaseModel):
    """A subscription as its subscriber asks for it."""

    model_config = ConfigDict(extra="forbid")

    target_url: TargetUrl = Field(
        description=(
            "where the signed JSON POSTs go: https:// (a public address) unless the "
            "installation allows private targets"
        ),
        examples=["https://hooks.zapier.com/hooks/standard/123/abc/"],
    )
    event: HookEvent = Field(
        description=(
            "`submission.created` (a form's accepted submissions; needs `form`), "
            "`stream.event` (a stream's accepted events; needs `stream`), `delivery.dead` or "
            "`destination.paused` (the organization's; neither `form` nor `stream`)"
        )
    )
    form: str | None = Field(default=None, pattern=id_pattern("frm"))
    stream: str | None = Field(default=None, pattern=id_pattern("str"))


@dataclass(frozen=True, slots=True)
class CreatedHook:
    """A new hook, and its generated signing secret (shown once)."""

    hook: dict[str, Any]
    secret: str | None


# The worker, ending a hook whose target said `410 Gone`: no person or key acts.
_WORKER = Actor("system", "worker", "delivery worker", "owner")
_WORKER_ORIGIN = Origin("worker", None, None)


def _check_source(fields: HookFields) -> None:
    needed = _SOURCE[fields.event]
    errors = [
        {"field": name, "message": f"required for {fields.event}"}
        for name in ("form", "stream")
        if name == needed and getattr(fields, name) is None
    ] + [
        {"field": name, "message": f"not taken by {fields.event}"}
        for name in ("form", "stream")
        if name != needed and getattr(fields, name) is not None
    ]
    if errors:
        raise InvalidInput(f"{fields.event}: {errors[0]['field']} {errors[0]['message']}", errors)


@scoped
async def get_hook(conn: Conn, scope: OrgScope, *, hook_id: str) -> dict[str, Any]:
    """One live hook with its target URL (never its secret)."""
    params = {"id": hook_id, "organization_id": scope.organization_id}
    row = await (await conn.execute(queries["get_hook"], params)).fetchone()
    if row is None:
        raise NotFound(f"no hook {hook_id}")
    return row


@scoped
async def list_hooks(
    conn: Conn,
    scope: OrgScope,
    *,
    event: str | None,
    form_id: str | None,
    stream_id: str | None,
    after: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to `limit` live hooks with ids after `after`, by id, of one event, form or stream
    when given (how a connector finds whether its subscription still exists)."""
    cur = await conn.execute(
        queries["list_hooks"],
        {
            "organization_id": scope.organization_id,
            "event": event,
            "form_id": form_id,
            "stream_id": stream_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()


@scoped
async def add_hook(
    conn: Conn, scope: OrgScope, *, fields: HookFields, ctx: ValidationContext, now: datetime
) -> CreatedHook:
    """A webhook destination to `target_url` (within the plan's count, its URL held to the
    SSRF rules) with a generated secret, the route that feeds it, and the hook over them."""
    _check_source(fields)
    destination = DestinationFields(
        type=webhook.adapter.type,
        name=f"REST hook: {fields.event}",
        config={"url": fields.target_url},
    )
    try:
        created = await add_destination(conn, scope, fields=destination, ctx=ctx)
    except InvalidConfig as exc:
        errors = [{"field": "target_url", "message": e["message"]} for e in exc.errors]
        raise InvalidInput(f"target_url: {errors[0]['message']}", errors) from None
    destination_id = created.destination["id"]
    route_id = stream_route_id = None
    if fields.form is not None:
        route = await add_route(
            conn, scope, form_id=fields.form, fields=RouteFields(destination_id=destination_id)
        )
        route_id = route["id"]
    if fields.stream is not None:
        cur = await conn.execute(
            queries["insert_stream_route"],
            {
                "id": new_id("srt"),
                "organization_id": scope.organization_id,
                "stream_id": fields.stream,
                "destination_id": destination_id,
                "enabled": True,
                "event_types": None,
                "include_statuses": ["accepted"],
            },
        )
        stream_route = await cur.fetchone()
        if stream_route is None:
            raise NotFound(f"no stream {fields.stream}")
        stream_route_id = stream_route["id"]
    hook_id = new_id("hok")
    await conn.execute(
        queries["insert_hook"],
        {
            "id": hook_id,
            "organization_id": scope.organization_id,
            "event": fields.event,
            "destination_id": destination_id,
            "form_id": fields.form,
            "route_id": route_id,
            "stream_id": fields.stream,
            "stream_route_id": stream_route_id,
            "now": now,
        },
    )
    hook = await get_hook(conn, scope, hook_id=hook_id)
    return CreatedHook(hook=hook, secret=created.generated_secret)


@scoped
async def end_hook(
    conn: Conn,
    scope: OrgScope,
    *,
    hook_id: str | None = None,
    destination_id: str | None = None,
    reason: HookEndReason,
    now: datetime,
) -> dict[str, Any]:
    """End a live hook (by its id or its destination's) with its destination and routes;
    deliveries still queued to it end `skipped` (`destination_removed`)."""
    params = {
        "id": hook_id,
        "destination_id": destination_id,
        "organization_id": scope.organization_id,
        "reason": reason,
        "now": now,
    }
    row = await (await conn.execute(queries["end_hook"], params)).fetchone()
    if row is None:
        raise NotFound(f"no hook {hook_id or destination_id}")
    if row["stream_route_id"] is not None:
        await conn.execute(
            queries["delete_hook_stream_route"],
            {"id": row["stream_route_id"], "organization_id": scope.organization_id, "now": now},
        )
    await remove_destination(conn, scope, destination_id=row["destination_id"])
    return row


async def create_hook(
    change: Change, *, fields: HookFields, ctx: ValidationContext, now: datetime
) -> CreatedHook:
    """Subscribe (`add_hook`) as the change."""
    async with change as conn:
        created = await add_hook(conn, change.scope, fields=fields, ctx=ctx, now=now)
        change.subject = created.hook["id"]
    return created


async def delete_hook(change: Change, *, hook_id: str, now: datetime) -> None:
    """Unsubscribe (`end_hook`, reason `unsubscribed`) as the change."""
    async with change as conn:
        await end_hook(conn, change.scope, hook_id=hook_id, reason="unsubscribed", now=now)


async def unsubscribe_gone(
    db: Database, *, organization_id: str, destination_id: str, now: datetime
) -> str | None:
    """The target of `destination_id` answered `410 Gone`: end its hook, if it is one
    (reason `gone`), with a `hook.unsubscribed` event and an audit row by the worker.
    Returns the hook's id, or None when the destination is no live hook's."""
    scope = OrgScope(organization_id)
    change = Change(db, Acting(scope, _WORKER, _WORKER_ORIGIN), "hook.unsubscribed")
    try:
        async with change as conn:
            row = await end_hook(conn, scope, destination_id=destination_id, reason="gone", now=now)
            change.subject = row["id"]
            await conn.execute(
                queries["insert_hook_event"],
                {
                    "organization_id": organization_id,
                    "type": "hook.unsubscribed",
                    "subject_id": row["id"],
                    "data": Jsonb(
                        {
                            "hook": row["id"],
                            "event": row["event"],
                            "destination": destination_id,
                            "reason": "gone",
                        }
                    ),
                    "now": now,
                },
            )
    except NotFound:
        return None
    return str(row["id"])


@scoped
async def queue_lifecycle(
    conn: Conn, scope: OrgScope, *, event: str, data: dict[str, Any], now: datetime
) -> int:
    """Queue `event`'s body (`{"event", "occurred_at", …data}`) to every live hook of the
    organization subscribed to it; returns how many."""
    hooks = await (
        await conn.execute(
            queries["lifecycle_hooks"], {"organization_id": scope.organization_id, "event": event}
        )
    ).fetchall()
    payload = Jsonb({"event": event, "occurred_at": iso_ms(now), **data})
    for hook in hooks:
        await conn.execute(
            queries["insert_lifecycle_delivery"],
            {
                "id": new_id("dlv"),
                "organization_id": scope.organization_id,
                "destination_id": hook["destination_id"],
                "channel": hook["channel"],
                "max_attempts": hook["max_attempts"],
                "payload": payload,
                "target": Jsonb(hook["target"]),
                "now": now,
            },
        )
    return len(hooks)
