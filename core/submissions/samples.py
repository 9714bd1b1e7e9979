"""Sample data for REST hooks (docs/hooks.md#sample-data): a form's or a stream's newest
items in exactly the body a hook receives, or one placeholder built from the current
schema when there are none (what Zapier's `performList` and n8n's test step show).

The bodies are the outbox's (`core/destinations/bodies.py`) put in the webhook's order
(`core/destinations/webhook.py`), from the columns the outbox's claim reads: a sample and a
delivery of the same item are the same JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.destinations.bodies import event_body, submitted_body
from core.destinations.order import field_order
from core.destinations.webhook import in_field_order
from core.platform.clock import iso_ms
from core.platform.db import Conn
from core.platform.errors import NotFound
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

DEFAULT_SAMPLES, MAX_SAMPLES = 3, 25
# How deep a placeholder follows nested objects and arrays of a schema.
_DEPTH = 4
_STRING_FORMATS = {
    "email": "visitor@example.com",
    "uri": "https://example.com/",
    "date": "2026-01-31",
    "time": "09:30:00Z",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
}
# Without a schema or labels: the fields a destination's test send shows.
_FALLBACK_VALUES = {"email": "visitor@example.com", "message": "A sample from Postbag."}


def _placeholder(name: str, schema: Any, now: datetime, depth: int = 0) -> Any:
    """A value `schema` accepts, named after `name` where it is text."""
    if not isinstance(schema, Mapping):
        return f"Example {name}"
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        minimum = schema.get("minimum")
        return minimum if isinstance(minimum, int | float) and not isinstance(minimum, bool) else 1
    if kind == "array":
        items = schema.get("items")
        return [] if depth >= _DEPTH else [_placeholder(name, items, now, depth + 1)]
    if kind == "object" or "properties" in schema:
        if depth >= _DEPTH:
            return {}
        return {
            str(key): _placeholder(str(key), sub, now, depth + 1)
            for key, sub in (schema.get("properties") or {}).items()
        }
    fmt = schema.get("format")
    if fmt == "date-time":
        return iso_ms(now)
    return _STRING_FORMATS.get(str(fmt), f"Example {name}")


def placeholder_values(
    schema: Mapping[str, Any] | None, labels: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """Values shaped like the form's: its schema's properties, else its labelled fields,
    else an email and a message."""
    properties = (schema or {}).get("properties")
    if isinstance(properties, Mapping) and properties:
        return {str(name): _placeholder(str(name), sub, now) for name, sub in properties.items()}
    if labels:
        return {str(name): f"Example {label}" for name, label in labels.items()}
    return dict(_FALLBACK_VALUES)


def _form_body(row: Mapping[str, Any]) -> dict[str, Any]:
    snapshot = row["form_snapshot"] or {}
    values = row["values"] or {}
    body = submitted_body(
        form_id=row["form_id"],
        snapshot=snapshot,
        submission_id=row["submission_id"],
        values=values,
        attachments=row["attachments"] or [],
        meta=row["meta"] or {},
        test=bool(row["test"]),
        submitted_at=row["received_at"],
    )
    order = field_order(values, row["field_order"], snapshot.get("labels") or {})
    return in_field_order(body, {"field_order": order})


@scoped
async def form_samples(
    conn: Conn, scope: OrgScope, *, form_id: str, limit: int, now: datetime
) -> tuple[list[dict[str, Any]], bool]:
    """The `form.submitted` bodies of a live form's newest `limit` accepted submissions
    that hold their values, newest first; or one placeholder (`test: true`, receipt
    `sub_sample`) when it has none. The flag says which."""
    params = {"id": form_id, "organization_id": scope.organization_id}
    form = await (await conn.execute(queries["form_for_sample"], params)).fetchone()
    if form is None:
        raise NotFound(f"no form {form_id}")
    cur = await conn.execute(
        queries["latest_form_submissions"],
        {"form_id": form_id, "organization_id": scope.organization_id, "limit": limit, "now": now},
    )
    rows = await cur.fetchall()
    if rows:
        return [_form_body(row) for row in rows], False
    labels = form["labels"] or {}
    values = placeholder_values(form["schema"], labels, now)
    body = submitted_body(
        form_id=form_id,
        snapshot={"labels": labels, "consent": True if form["consent_field"] else None},
        submission_id="sub_sample",
        values=values,
        attachments=[],
        meta={},
        test=True,
        submitted_at=now,
    )
    return [in_field_order(body, {"field_order": list(values)})], True


@scoped
async def stream_samples(
    conn: Conn, scope: OrgScope, *, stream_id: str, limit: int, now: datetime
) -> tuple[list[dict[str, Any]], bool]:
    """The `stream.event` bodies of a live stream's newest `limit` accepted events that
    hold their data, newest first; or one placeholder (receipt `evt_sample`) when it has
    none. The flag says which."""
    params = {"id": stream_id, "organization_id": scope.organization_id}
    stream = await (await conn.execute(queries["stream_for_sample"], params)).fetchone()
    if stream is None:
        raise NotFound(f"no stream {stream_id}")
    cur = await conn.execute(
        queries["latest_stream_events"],
        {
            "stream_id": stream_id,
            "organization_id": scope.organization_id,
            "limit": limit,
            "now": now,
        },
    )
    rows = await cur.fetchall()
    if rows:
        return [event_body(row) for row in rows], False
    schema = stream["schema"]
    data = _placeholder("value", schema, now) if schema else {"example": True}
    placeholder = {
        "event_stream_id": stream_id,
        "event_id": "evt_sample",
        "event_client_id": "sample",
        "event_type": stream["event_type"] or "example",
        "event_occurred_at": now,
        "event_received_at": now,
        "event_data": data,
    }
    return [event_body(placeholder)], True
