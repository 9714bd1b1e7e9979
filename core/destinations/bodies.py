"""The bodies a delivery sends (docs/webhooks.md), built when the outbox claims it from the
rows the claim reads: a submission's `form.submitted` from the submission's row, a stream
event's `stream.event` from the event's. A delivery keeps no copy of either: the values are
written once, on their submission or event."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.platform.clock import iso_ms

EVENT_NAME = "stream.event"


def event_body(row: Mapping[str, Any]) -> dict[str, Any]:
    """`{"event", "stream", "receipt", "id", "type", "occurred_at", "received_at", "data"}`
    from the `event_*` columns the claim reads with the delivery."""
    occurred = row["event_occurred_at"]
    return {
        "event": EVENT_NAME,
        "stream": row["event_stream_id"],
        "receipt": row["event_id"],
        "id": row["event_client_id"],
        "type": row["event_type"],
        "occurred_at": iso_ms(occurred) if occurred is not None else None,
        "received_at": iso_ms(row["event_received_at"]),
        "data": row["event_data"],
    }


def _payload_attachments(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["field"], []).append(
            {"id": row["id"], "name": row["name"], "type": row["content_type"], "size": row["size"]}
        )
    return grouped


def submitted_body(
    *,
    form_id: str,
    snapshot: Mapping[str, Any],
    submission_id: str,
    values: Mapping[str, Any],
    attachments: list[dict[str, Any]],
    meta: Mapping[str, Any],
    test: bool,
    submitted_at: datetime,
) -> dict[str, Any]:
    """The `form.submitted` body: `labels` holds the snapshot's label of each submitted field
    that has one, in the visitor's order; `consent` is the snapshot's."""
    files = _payload_attachments(attachments)
    labels: Mapping[str, Any] = snapshot.get("labels") or {}
    return {
        "event": "form.submitted",
        "receipt": submission_id,
        "form": form_id,
        "submitted_at": iso_ms(submitted_at),
        "test": test,
        "values": values,
        "labels": {name: labels[name] for name in [*values, *files] if name in labels},
        "consent": snapshot.get("consent"),
        "attachments": files,
        "meta": meta,
    }
