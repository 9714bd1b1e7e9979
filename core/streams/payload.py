"""The webhook body of a stream event, built from the event row when its delivery is sent
(a delivery keeps no copy of the event)."""

from __future__ import annotations

from collections.abc import Mapping
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
