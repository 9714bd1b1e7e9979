"""JSON logs: one object per line, with the ids of what the line is about."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

CONTEXT_FIELDS = ("org_id", "form_id", "submission_id", "delivery_id", "destination_id", "tick")

log = logging.getLogger("postbag")


class JsonFormatter(logging.Formatter):
    """Render a record as one JSON object, carrying the context ids given in `extra`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = value
        detail = getattr(record, "detail", None)
        if isinstance(detail, dict):
            line.update({k: v for k, v in detail.items() if k not in line})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send Postbag's and uvicorn's logs to stderr as JSON lines (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
