"""`POST /v1/streams/{id}/events` and `/batch`: ingest, with an ingest key (`pbs_…`) of
that stream or an organization key. Bodies are read here, not by FastAPI: an event is
parsed on its own, so one malformed event in a batch never refuses the others. So are the
key, the stream's id and the `Idempotency-Key` header (documented in `openapi_extra`), and
so is the route's rule (`IngestRoute`): FastAPI's handling of a request around its
endpoint (dependencies, parameters, the answer) was a sixth of a single event's time in the
server."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response

from core.http.access import AuditedRoute, Rule, declare, rule_of
from core.http.deps import throttled_client
from core.http.v1.auth import access_of_key
from core.http.v1.shared import problems
from core.outbox.wakeup import wake_deliveries
from core.owner.roles import require
from core.owner.throttle import bad_api_key
from core.platform.clock import utcnow
from core.platform.errors import (
    InputLimit,
    InvalidInput,
    MalformedBody,
    NotFound,
    PayloadTooLarge,
    Unauthenticated,
)
from core.platform.ids import is_id
from core.platform.services import Services
from core.platform.values import load_json
from core.streams.ingest import (
    MAX_BATCH_EVENTS,
    MAX_EVENT_BYTES,
    MAX_IDEMPOTENCY_KEY,
    Caller,
    EventIn,
    Ingested,
    Outcome,
    idempotency_key,
    ingest,
    single_answer,
)
from core.streams.streams import INGEST_KEY_PREFIX


def _bearer_key(request: Request) -> str | None:
    """The key of `Authorization: Bearer …` (as FastAPI's HTTPBearer reads it), if any."""
    scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


async def _checked_in_route() -> None:
    """Ingest checks its caller itself (`ingest_caller`), off FastAPI's dependencies."""
    return None


# Posting events with an API key is an operator's work; an ingest key may only do this.
INGESTS = declare(Rule("operate"), _checked_in_route)


class IngestRoute(AuditedRoute):
    """An ingest route, handled by its endpoint alone: the endpoint reads the request
    itself and holds `INGESTS`'s rule in `ingest_caller`, so FastAPI has nothing to solve
    or check for it. The rule records no audit action (refused here otherwise), so there
    is nothing to record after the answer either."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        super().__init__(path, endpoint, **options)
        rule = rule_of(self)
        if rule is None or rule.action is not None:
            raise RuntimeError(f"{path}: an ingest route holds INGESTS' rule, which audits nothing")

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return handler


# The app serves these routes as its own (`core.http.api_app`), so the router declares its
# prefix and every problem a `/v1` route may answer.
router = APIRouter(
    prefix="/v1",
    tags=["streams"],
    responses=problems(400, 401, 403, 404, 405, 413, 429, 503),
    route_class=IngestRoute,
)


async def ingest_caller(request: Request) -> tuple[Caller, str]:
    """Who posts, and to which stream: an API key's organization, its role held to
    `INGESTS`'s rule here, or an ingest key, checked by the ingest with the stream's
    settings (see `_ingest`)."""
    stream_id: str = request.path_params["stream_id"]
    key = _bearer_key(request)
    if key is not None and key.startswith(INGEST_KEY_PREFIX) and len(key) <= 200:
        caller = Caller(ingest_key=key)
    else:
        access = await access_of_key(request, _services(request), key)
        require(access.actor, "operate")
        request.state.access = access
        caller = Caller(scope=access.scope)
    if not is_id(stream_id, "str"):
        raise NotFound("no such object: stream_id is not a str_… id")
    return caller, stream_id


def _services(request: Request) -> Services:
    # Read here rather than through a dependency: FastAPI runs a sync dependency (the
    # services, the clock) on its thread pool, a thread hop per call on the volume path.
    services: Services = request.app.state.services
    return services


class EventAnswer(BaseModel):
    """What became of one event."""

    event: str | None = Field(description="the stored event's receipt (`evt_…`)")
    id: str | None = Field(description="the client's event id, as posted")
    status: str = Field(description="`accepted`, `quarantined` or `duplicate`")
    errors: list[dict[str, str]] | None = Field(
        default=None, description="the schema's violations (`path`, `keyword`), if any"
    )


class BatchResult(EventAnswer):
    """What became of the event at `index` of a batch (`rejected`: never stored)."""

    index: int


class BatchAnswer(BaseModel):
    """One result per posted event, in order."""

    results: list[BatchResult]


class BatchIn(BaseModel):
    """A batch of events (documented shape; each event is checked on its own)."""

    events: list[EventIn] = Field(max_length=MAX_BATCH_EVENTS)


def _answer(outcome: Outcome) -> dict[str, Any]:
    answer: dict[str, Any] = {"event": outcome.event, "id": outcome.id, "status": outcome.status}
    if outcome.errors:
        answer["errors"] = outcome.errors
    return answer


def _respond(status: int, body: dict[str, Any], ingested: Ingested, request: Request) -> Response:
    services = _services(request)
    background = BackgroundTask(wake_deliveries, services) if ingested.deliveries else None
    return JSONResponse(body, status_code=status, background=background)


async def _ingest(
    request: Request,
    caller: Caller,
    stream_id: str,
    events: list[Any],
    *,
    key: str | None = None,
    storable: bool = False,
) -> Ingested:
    """Run the ingest; a bad ingest key counts toward the client's bad-key throttle."""
    services = _services(request)
    try:
        return await ingest(
            services, caller, stream_id, events, key=key, storable=storable, now=utcnow()
        )
    except Unauthenticated:
        async with services.db.connection() as conn:
            await bad_api_key(conn, throttled_client(request, services), now=utcnow())
        raise


_STREAM_ID = {
    "name": "stream_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "title": "Stream Id"},
}
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "stands for the event's `id` when it has none",
    "schema": {"type": "string", "maxLength": MAX_IDEMPOTENCY_KEY, "title": "Idempotency-Key"},
}


def _documented(model: type[BaseModel], *parameters: dict[str, Any]) -> dict[str, Any]:
    """The body, parameters and key of an ingest route, which reads them itself."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        },
        "parameters": list(parameters),
        # The scheme of every /v1 route; here an ingest key of the stream (`pbs_…`) or an
        # API key (`pb_…`).
        "security": [{"HTTPBearer": []}],
    }


@router.post(
    "/streams/{stream_id}/events",
    status_code=202,
    response_model=EventAnswer,
    responses=problems(402, 409, 422),
    openapi_extra=_documented(EventIn, _STREAM_ID, _IDEMPOTENCY_KEY),
    dependencies=[INGESTS],
)
async def post_event(request: Request) -> Response:
    """Post one event (at most 64 KiB): `202` with its receipt; a repeat of a stored id
    answers `duplicate`, the same id with another payload `409 idempotency_conflict`."""
    caller, stream_id = await ingest_caller(request)
    idempotency = request.headers.get("idempotency-key")
    raw = await request.body()
    if len(raw) > MAX_EVENT_BYTES:
        raise PayloadTooLarge(f"an event is at most {MAX_EVENT_BYTES // 1024} KiB")
    # load_json checks that the event can be stored: the ingest need not check it again.
    event = load_json(raw)
    key = idempotency_key(idempotency)
    ingested = await _ingest(request, caller, stream_id, [event], key=key, storable=True)
    outcome = single_answer(ingested.outcomes[0])
    return _respond(202, _answer(outcome), ingested, request)


def _events_of(raw: bytes) -> list[Any]:
    """The events of a batch body, each checked later on its own."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise InputLimit("nested too deeply", [{"field": "body", "message": "too deep"}]) from None
    except (UnicodeDecodeError, ValueError):
        raise MalformedBody("the body is not valid JSON") from None
    events = body.get("events") if isinstance(body, dict) else None
    if not isinstance(events, list) or set(body) != {"events"}:
        raise InvalidInput(
            'the body is {"events": [...]}', [{"field": "events", "message": "a list"}]
        )
    if not 1 <= len(events) <= MAX_BATCH_EVENTS:
        raise InvalidInput(
            f"a batch holds 1 to {MAX_BATCH_EVENTS} events",
            [{"field": "events", "message": f"1 to {MAX_BATCH_EVENTS} events"}],
        )
    return events


@router.post(
    "/streams/{stream_id}/batch",
    response_model=BatchAnswer,
    responses=problems(402, 422),
    openapi_extra=_documented(BatchIn, _STREAM_ID),
    dependencies=[INGESTS],
)
async def post_batch(request: Request) -> Response:
    """Post up to 500 events (at most 1 MiB) in one transaction: one result per event,
    `accepted`, `duplicate`, `quarantined` or `rejected` (malformed, never stored)."""
    caller, stream_id = await ingest_caller(request)
    events = _events_of(await request.body())
    ingested = await _ingest(request, caller, stream_id, events)
    results = [{"index": o.index, **_answer(o)} for o in ingested.outcomes]
    return _respond(200, {"results": results}, ingested, request)
