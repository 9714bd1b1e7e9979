"""Logs: one JSON object per line, with the ids of what the line is about; for a person at a
terminal (the CLI on a TTY), one readable line per record instead."""

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


class ReadableFormatter(JsonFormatter):
    """`12:30:05 info    tick pass  tick=deliver claimed=2`: the JSON line's fields, for eyes."""

    def format(self, record: logging.LogRecord) -> str:
        line = json.loads(super().format(record))
        clock = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        head = f"{clock} {line.pop('level'):<7} {line.pop('message')}"
        error = line.pop("error", None)
        for key in ("time", "logger"):
            line.pop(key)
        if record.name != log.name:
            line["from"] = record.name
        fields = " ".join(f"{key}={_value(value)}" for key, value in line.items())
        text = f"{head}  {fields}" if fields else head
        return f"{text}\n{error}" if error else text


def _value(value: Any) -> str:
    return value if isinstance(value, str) and value and " " not in value else json.dumps(value)


def configure_logging(level: str = "INFO", *, readable: bool = False) -> None:
    """Send Postbag's and uvicorn's logs to stderr, as JSON lines or (`readable`, for a
    terminal) one readable line per record (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ReadableFormatter() if readable else JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
