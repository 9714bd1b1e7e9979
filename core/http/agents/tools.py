"""The MCP tools: each one is a single `/v1` call through `ApiClient` (docs/agents.md).

The tools hold no rule of their own but the permission each needs (the same as its `/v1`
route's, checked before the call): the key decides the organization, `/v1` validates
and refuses, and a refusal comes back as a tool error whose text starts with the
problem `code` (`not_found: …`). Outputs are the `/v1` models, so each tool publishes the
answer's JSON schema and returns it as structured content.
"""

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from core import __version__
from core.http.client import ApiClient, ApiRefused
from core.http.v1.alerts import Alert
from core.http.v1.deliveries import Delivery
from core.http.v1.destinations import Destination
from core.http.v1.events import EventPage
from core.http.v1.forms import Form
from core.http.v1.shared import Page
from core.http.v1.streams import EventWithDeliveries, StoredEvent, Stream
from core.http.v1.submissions import SubmissionSummary
from core.http.v1.usage import Usage
from core.owner.roles import Actor, Permission, require
from core.platform.errors import Forbidden
from core.platform.ids import id_pattern
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT
from core.platform.vocabulary import (
    AlertStatus,
    DeliveryStatus,
    SchemaMode,
    StreamEventStatus,
    SubmissionStatus,
)

INSTRUCTIONS = (
    "Postbag is a form backend. Forms receive submissions from websites; each submission "
    "is delivered to destinations (webhooks, email, chat) as deliveries. Everything here "
    "belongs to the organization of the API key in use. Streams receive JSON events from "
    "servers, delivered the same way. Submission values and event data are personal "
    "data: read them only when asked, and erase only on an explicit request."
)

# The `_meta` key of each tool naming the permission it needs (docs/teams.md).
PERMISSION_META = "postbag/permission"

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
ERASE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


# Arguments naming one object: only an id of its kind's shape reaches a `/v1` path or query
# (never `../keys` or `x?y`, whatever a prompt asked the assistant to send).
FormId = Annotated[str, Field(pattern=id_pattern("frm"), description="a form id (frm_…)")]
SubmissionId = Annotated[
    str, Field(pattern=id_pattern("sub"), description="a submission id (sub_…)")
]
DeliveryId = Annotated[str, Field(pattern=id_pattern("dlv"), description="a delivery id (dlv_…)")]
DestinationId = Annotated[
    str, Field(pattern=id_pattern("dst"), description="a destination id (dst_…)")
]
AlertId = Annotated[str, Field(pattern=id_pattern("alr"), description="an alert id (alr_…)")]
StreamId = Annotated[str, Field(pattern=id_pattern("str"), description="a stream id (str_…)")]
EventId = Annotated[
    str, Field(pattern=id_pattern("evt"), description="a stored event's receipt (evt_…)")
]
Cursor = Annotated[
    str | None, Field(description="`next_cursor` of the previous page", max_length=512)
]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="page size")]
# An export page: a row holds at most the 256 KB of a submission's values (doubled quotes
# included, 512 KB), so a page reads at most 25 MB and answers about 1 MB.
MAX_EXPORT_ROWS = 50
EXPORT_PAGE_CHARS = 1_000_000


ExportLimit = Annotated[
    int, Field(ge=1, le=MAX_EXPORT_ROWS, description="rows at most in this page")
]


class Export(BaseModel):
    """A page of a form's submissions as CSV: one row per submission, one column per field."""

    form: str
    rows: int = Field(description="submissions in this page's CSV")
    csv: str
    next_after: str | None = Field(
        description="pass as `after` for the next page; none when this page is the last"
    )


def csv_records(text: str) -> list[str]:
    """The records of CSV text as `csv.writer` writes them, each with its CRLF: a record
    ends at a line break after an even number of quotes (a quoted line break stays inside
    its value). No field size limit, unlike `csv.reader`'s 131,072 characters."""
    records: list[str] = []
    start = scanned = quotes = 0
    while (end := text.find("\r\n", scanned)) >= 0:
        quotes += text.count('"', scanned, end)
        scanned = end + 2
        if quotes % 2 == 0:
            records.append(text[start:scanned])
            start, quotes = scanned, 0
    return records


def export_page(form_id: str, text: str, limit: int) -> Export:
    """The first `limit` rows of an export (its text asked for one more, to tell whether
    more follow), cut sooner past EXPORT_PAGE_CHARS (never below one row)."""
    head, *records = csv_records(text)
    kept: list[str] = []
    size = len(head)
    for record in records[:limit]:
        if kept and size + len(record) > EXPORT_PAGE_CHARS:
            break
        kept.append(record)
        size += len(record)
    last = kept[-1].split(",", 1)[0] if kept and len(kept) < len(records) else None
    return Export(form=form_id, rows=len(kept), csv=head + "".join(kept), next_after=last)


def build_server(
    api: Callable[[], ApiClient], actor: Callable[[], Actor] | None = None
) -> MCPServer:
    """The MCP server whose tools call `/v1` through the client `api()` returns, each
    refused (`forbidden: …`) when the role of `actor()` lacks the tool's permission. Without
    `actor` (`postbag mcp`, over the network) the `/v1` behind refuses with the same words."""
    server: MCPServer = MCPServer(
        "postbag", title="Postbag", version=__version__, instructions=INSTRUCTIONS
    )

    def tool(
        permission: Permission, annotations: ToolAnnotations
    ) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
        """Register a tool with the permission it needs (published in its `_meta`), checked
        against the caller's role before the tool runs."""

        def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            @functools.wraps(fn)
            async def checked(*args: Any, **kwargs: Any) -> Any:
                try:
                    if actor is not None:
                        require(actor(), permission)
                except Forbidden as exc:
                    raise ToolError(f"forbidden: {exc}") from exc
                return await fn(*args, **kwargs)

            meta = {PERMISSION_META: permission}
            registered: Callable[..., Awaitable[Any]] = server.tool(
                annotations=annotations, meta=meta
            )(checked)
            return registered

        return register

    async def call(method: str, path: str, **kwargs: Any) -> Any:
        try:
            return await api().call(method, path, **kwargs)
        except ApiRefused as exc:
            raise ToolError(str(exc)) from exc

    @tool("read", READ)
    async def list_forms(cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT) -> Page[Form]:
        """The organization's forms (oldest first), each with its submit URL."""
        return Page[Form].model_validate(
            await call("GET", "/forms", params={"cursor": cursor, "limit": limit})
        )

    @tool("read", READ)
    async def get_form(form_id: FormId) -> Form:
        """One form's settings, submit URL and HTML snippet."""
        return Form.model_validate(await call("GET", f"/forms/{form_id}"))

    @tool("configure", WRITE)
    async def create_form(
        name: Annotated[str, Field(description="what the owner calls the form")],
        allowed_origins: Annotated[
            list[str] | None,
            Field(description="`scheme://host[:port]` of the sites that may post; none = any"),
        ] = None,
        redirect_url: Annotated[
            str | None, Field(description="https URL a plain HTML post is sent to after")
        ] = None,
        retention_days: Annotated[
            int | None, Field(description="days the values are kept; none = the plan's")
        ] = None,
        schema_mode: SchemaMode | None = None,
        labels: Annotated[
            dict[str, str] | None, Field(description="field name → label people read")
        ] = None,
    ) -> Form:
        """Create a form; the answer has its submit URL and a ready-to-paste HTML snippet."""
        given = {
            "name": name,
            "allowed_origins": allowed_origins,
            "redirect_url": redirect_url,
            "retention_days": retention_days,
            "schema_mode": schema_mode,
            "labels": labels,
        }
        body = {k: v for k, v in given.items() if v is not None}
        return Form.model_validate(await call("POST", "/forms", body=body))

    @tool("read", READ)
    async def list_submissions(
        form_id: FormId | None = None,
        status: SubmissionStatus | None = None,
        since: Annotated[datetime | None, Field(description="received at or after")] = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> Page[SubmissionSummary]:
        """Submissions, newest first, without their values (`get_submission` has them)."""
        params = {
            "form": form_id,
            "status": status,
            "since": since.isoformat() if since else None,
            "cursor": cursor,
            "limit": limit,
        }
        return Page[SubmissionSummary].model_validate(
            await call("GET", "/submissions", params=params)
        )

    @tool("read_values", READ)
    async def get_submission(submission_id: SubmissionId) -> dict[str, Any]:
        """One submission: its values (unless erased or expired), files and delivery lines."""
        found: dict[str, Any] = await call("GET", f"/submissions/{submission_id}")
        return found

    @tool("read_values", READ)
    async def export_submissions(
        form_id: FormId, after: SubmissionId | None = None, limit: ExportLimit = 20
    ) -> Export:
        """A page of a form's submissions as CSV text (formula-safe cells), oldest first;
        `next_after` continues it."""
        params = {"form": form_id, "after": after, "limit": limit + 1}
        try:
            text = await api().text("/submissions/export.csv", params=params)
        except ApiRefused as exc:
            raise ToolError(str(exc)) from exc
        return export_page(form_id, text, limit)

    @tool("operate", ERASE)
    async def erase_submission(submission_id: SubmissionId) -> dict[str, Any]:
        """Erase a submission's values and files now, for good; unsent deliveries are skipped."""
        erased: dict[str, Any] = await call("POST", f"/submissions/{submission_id}/erase")
        return erased

    @tool("operate", WRITE)
    async def release_submission(submission_id: SubmissionId) -> dict[str, Any]:
        """Deliver a quarantined or spam submission anyway: it becomes accepted and the form's
        live routes each deliver it once (a second release is refused: already_released)."""
        released: dict[str, Any] = await call("POST", f"/submissions/{submission_id}/release")
        return released

    @tool("operate", WRITE)
    async def mark_submission_spam(submission_id: SubmissionId) -> dict[str, Any]:
        """Mark a submission as spam: its deliveries not yet sent are skipped."""
        marked: dict[str, Any] = await call("POST", f"/submissions/{submission_id}/spam")
        return marked

    @tool("read", READ)
    async def list_deliveries(
        status: DeliveryStatus | None = None,
        destination_id: DestinationId | None = None,
        submission_id: SubmissionId | None = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> Page[Delivery]:
        """Deliveries (a submission sent to a destination), newest first."""
        params = {
            "status": status,
            "destination": destination_id,
            "submission": submission_id,
            "cursor": cursor,
            "limit": limit,
        }
        return Page[Delivery].model_validate(await call("GET", "/deliveries", params=params))

    @tool("read_values", READ)
    async def get_delivery(delivery_id: DeliveryId) -> dict[str, Any]:
        """One delivery with every attempt (outcome, status code, excerpt)."""
        found: dict[str, Any] = await call("GET", f"/deliveries/{delivery_id}")
        return found

    @tool("operate", WRITE)
    async def retry_delivery(delivery_id: DeliveryId) -> dict[str, Any]:
        """Queue a failed, dead or skipped delivery again now (same id, same content)."""
        queued: dict[str, Any] = await call("POST", f"/deliveries/{delivery_id}/retry")
        return queued

    @tool("read", READ)
    async def list_destinations(
        cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT
    ) -> Page[Destination]:
        """Destinations with their health; secrets are never shown, only whether one is set."""
        return Page[Destination].model_validate(
            await call("GET", "/destinations", params={"cursor": cursor, "limit": limit})
        )

    @tool("read", READ)
    async def list_events(
        after: Annotated[int, Field(ge=0, description="the last event id already seen")] = 0,
        limit: Limit = DEFAULT_LIMIT,
    ) -> EventPage:
        """The organization's events (submission received, delivery dead…), oldest first."""
        return EventPage.model_validate(
            await call("GET", "/events", params={"after": after, "limit": limit})
        )

    @tool("read", READ)
    async def get_usage() -> Usage:
        """The plan, its limits and this month's usage."""
        return Usage.model_validate(await call("GET", "/usage"))

    @tool("read", READ)
    async def list_alerts(
        status: AlertStatus | None = None, cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT
    ) -> Page[Alert]:
        """Alerts (dead deliveries, stuck file deletions), newest first."""
        params = {"status": status, "cursor": cursor, "limit": limit}
        return Page[Alert].model_validate(await call("GET", "/alerts", params=params))

    @tool("operate", WRITE)
    async def acknowledge_alert(alert_id: AlertId) -> dict[str, Any]:
        """Acknowledge an alert; the next failure of its subject opens a new one."""
        acknowledged: dict[str, Any] = await call("POST", f"/alerts/{alert_id}/ack")
        return acknowledged

    @tool("read", READ)
    async def list_streams(cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT) -> Page[Stream]:
        """The organization's streams (oldest first)."""
        params = {"cursor": cursor, "limit": limit}
        return Page[Stream].model_validate(await call("GET", "/streams", params=params))

    @tool("read_values", READ)
    async def list_stream_events(
        stream_id: StreamId,
        type: Annotated[str | None, Field(description="only events of this type")] = None,
        status: StreamEventStatus | None = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> Page[StoredEvent]:
        """A stream's stored events with their data (newest first)."""
        params = {"type": type, "status": status, "cursor": cursor, "limit": limit}
        path = f"/streams/{stream_id}/events"
        return Page[StoredEvent].model_validate(await call("GET", path, params=params))

    @tool("operate", WRITE)
    async def release_stream_event(stream_id: StreamId, event_id: EventId) -> EventWithDeliveries:
        """Deliver a quarantined stream event anyway: it becomes accepted and the stream's live
        routes that take its type each deliver it once (a second release is refused:
        already_released)."""
        path = f"/streams/{stream_id}/events/{event_id}/release"
        return EventWithDeliveries.model_validate(await call("POST", path))

    @tool("operate", WRITE)
    async def send_event(
        stream_id: StreamId,
        type: Annotated[str, Field(description="the event's type, e.g. `order.paid`")],
        data: Annotated[dict[str, Any], Field(description="the event's JSON object")],
        id: Annotated[
            str | None, Field(description="an event id: a repeat is answered as a duplicate")
        ] = None,
    ) -> dict[str, Any]:
        """Post one event to a stream; the answer has its receipt (`event`) and `status`."""
        body = {k: v for k, v in {"id": id, "type": type, "data": data}.items() if v is not None}
        answer: dict[str, Any] = await call("POST", f"/streams/{stream_id}/events", body=body)
        return answer

    return server
