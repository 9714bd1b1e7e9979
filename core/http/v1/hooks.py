"""`/v1/hooks` and the sample calls: REST hooks for Zapier, Make, n8n and Pipedream
(docs/hooks.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from core.destinations.base import ValidationContext
from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems, read_one
from core.owner import hooks
from core.owner.hooks import HookFields
from core.platform.ids import id_pattern
from core.platform.vocabulary import HookEvent
from core.submissions import samples
from core.submissions.samples import DEFAULT_SAMPLES, MAX_SAMPLES

router = APIRouter(tags=["hooks"], responses=problems(401, 503), route_class=AuditedRoute)


class Hook(BaseModel):
    """A live subscription as read (never its secret)."""

    id: str
    event: HookEvent
    target_url: str
    form: str | None = Field(description="the form of a `submission.created` hook")
    stream: str | None = Field(description="the stream of a `stream.event` hook")
    destination: str = Field(
        description="the webhook destination it delivers through (its deliveries and health)"
    )
    created_at: datetime


class CreatedHook(Hook):
    """A new subscription; `secret` is shown here only once."""

    secret: str | None = Field(
        description=(
            "the signing secret (`whsec_…`): verify `webhook-signature` (Standard Webhooks) "
            "or `X-Postbag-Signature` with it"
        )
    )


class Samples(BaseModel):
    """Sample bodies, newest first, exactly as a hook receives them."""

    data: list[dict[str, Any]]
    placeholder: bool = Field(
        description=(
            "true when nothing has arrived yet: `data` holds one body built from the current "
            "schema (receipt `sub_sample` or `evt_sample`)"
        )
    )


def _hook(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "event": row["event"],
        "target_url": row["target_url"],
        "form": row["form_id"],
        "stream": row["stream_id"],
        "destination": row["destination_id"],
        "created_at": row["created_at"],
    }


SampleLimit = Annotated[
    int, Query(ge=1, le=MAX_SAMPLES, description="how many of the newest items")
]


@router.post(
    "/hooks",
    dependencies=[needs("configure", "hook.created")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def create_hook(
    change: ChangeDep, body: HookFields, services: ServicesDep, now: NowDep
) -> CreatedHook:
    """Subscribe `target_url` to `event`: a webhook destination (counted against the plan)
    and its route, made together; the secret is answered once. A target answering `410
    Gone` to a delivery unsubscribes the hook."""
    ctx = ValidationContext(allow_private_targets=services.settings.allow_private_targets)
    created = await hooks.create_hook(change, fields=body, ctx=ctx, now=now)
    return CreatedHook(**_hook(created.hook), secret=created.secret)


@router.get("/hooks", dependencies=[needs("configure")], responses=problems(422))
async def list_hooks(
    scope: ScopeDep,
    services: ServicesDep,
    page: PageDep,
    event: HookEvent | None = None,
    form: Annotated[str | None, Query(pattern=id_pattern("frm"))] = None,
    stream: Annotated[str | None, Query(pattern=id_pattern("str"))] = None,
) -> Page[Hook]:
    """The live hooks, oldest first; of one `event`, `form` or `stream` when given."""
    async with services.db.scoped(scope) as conn:
        rows = await hooks.list_hooks(
            conn,
            scope,
            event=event,
            form_id=form,
            stream_id=stream,
            after=page.after_id(),
            limit=page.limit + 1,
        )
    data, cursor = page.page(rows, "id")
    return Page[Hook](data=[Hook(**_hook(row)) for row in data], next_cursor=cursor)


@router.get("/hooks/{hook_id}", dependencies=[needs("configure")], responses=problems(404, 422))
async def get_hook(hook_id: str, scope: ScopeDep, services: ServicesDep) -> Hook:
    """One live hook (a hook that was unsubscribed, or whose target answered 410, is 404)."""
    return Hook(**_hook(await read_one(services, scope, hooks.get_hook, hook_id=hook_id)))


@router.delete(
    "/hooks/{hook_id}",
    dependencies=[needs("configure", "hook.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_hook(change: ChangeDep, hook_id: str, now: NowDep) -> None:
    """Unsubscribe: the hook, its destination and its route go; deliveries still queued to
    it end `skipped`."""
    await hooks.delete_hook(change, hook_id=hook_id, now=now)


@router.get(
    "/forms/{form_id}/sample",
    dependencies=[needs("read_values", "form.sampled", subject="form_id")],
    responses=problems(404, 422),
)
async def form_sample(
    form_id: str,
    scope: ScopeDep,
    services: ServicesDep,
    now: NowDep,
    limit: SampleLimit = DEFAULT_SAMPLES,
) -> Samples:
    """The `form.submitted` bodies of the form's newest accepted submissions, exactly as a
    `submission.created` hook receives them; a placeholder from the form's schema when none
    has arrived."""
    async with services.db.scoped(scope) as conn:
        data, placeholder = await samples.form_samples(
            conn, scope, form_id=form_id, limit=limit, now=now
        )
    return Samples(data=data, placeholder=placeholder)


@router.get(
    "/streams/{stream_id}/sample",
    dependencies=[needs("read_values", "stream.sampled", subject="stream_id")],
    responses=problems(404, 422),
)
async def stream_sample(
    stream_id: str,
    scope: ScopeDep,
    services: ServicesDep,
    now: NowDep,
    limit: SampleLimit = DEFAULT_SAMPLES,
) -> Samples:
    """The `stream.event` bodies of the stream's newest accepted events, exactly as a
    `stream.event` hook receives them; a placeholder from its schema when none has
    arrived."""
    async with services.db.scoped(scope) as conn:
        data, placeholder = await samples.stream_samples(
            conn, scope, stream_id=stream_id, limit=limit, now=now
        )
    return Samples(data=data, placeholder=placeholder)
