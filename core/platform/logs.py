"""Logs: one JSON object per line, with the ids of what the line is about; for a person at a
terminal (the CLI on a TTY), one readable line per record instead."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from types import TracebackType
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

    def formatException(
        self,
        ei: tuple[type[BaseException], BaseException, TracebackType | None]
        | tuple[None, None, None],
    ) -> str:
        """The traceback, with the message of an error that may quote data left out."""
        if ei[1] is None:
            return ""
        return _traceback(ei[1])


def _quotes_data(exc: BaseException) -> bool:
    """Whether an error's message may carry submitted bytes: a database error quotes the
    value it refused (and a row's values in its detail), a codec error the character."""
    if isinstance(exc, UnicodeError):
        return True
    return any(c.__module__.startswith("psycopg") for c in type(exc).__mro__)


def _traceback(exc: BaseException) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = "".join(traceback.format_tb(current.__traceback__))
        kind = f"{type(current).__module__}.{type(current).__qualname__}"
        if _quotes_data(current):
            sqlstate = getattr(current, "sqlstate", None)
            summary = f"{kind} (SQLSTATE {sqlstate}; message withheld)" if sqlstate else kind
        else:
            summary = f"{kind}: {current}"
        parts.append(f"Traceback (most recent call last):\n{frames}{summary}")
        current = current.__cause__ or current.__context__
    return "\n\nraised while handling:\n".join(parts)


class ReadableFormatter(JsonFormatter):
    """`12:30:05 info    tick pass  tick=deliver claimed=2`: the JSON line's fields, for eyes."""

    def format(self, record: logging.LogRecord) -> str:
        line = json.loads(super().format(record))
        clock = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        text = str(line.pop("message"))
        head = f"{clock} {line.pop('level'):<7} {text if text.isprintable() else json.dumps(text)}"
        error = line.pop("error", None)
        for key in ("time", "logger"):
            line.pop(key)
        if record.name != log.name:
            line["from"] = record.name
        fields = " ".join(f"{key}={_value(value)}" for key, value in line.items())
        shown = f"{head}  {fields}" if fields else head
        return f"{shown}\n{error}" if error else shown


def _value(value: Any) -> str:
    """A field as the terminal shows it: a plain word as is, anything else as JSON, so a
    visitor's newline or ANSI escape is printed escaped, never acted on by the terminal."""
    plain = isinstance(value, str) and value.isprintable() and value and " " not in value
    return str(value) if plain else json.dumps(value)


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
