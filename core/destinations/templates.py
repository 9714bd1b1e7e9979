"""Route and acknowledgement templates: `{{field}}` placeholders and nothing else."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.\-\[\]]+)\s*\}\}")
# Anything that looks like template logic: `{{ x | y }}`, `{% … %}`, `{# … #}`.
_OTHER_SYNTAX = re.compile(r"\{\{|\}\}|\{%|%\}|\{#|#\}")


def template_errors(text: str) -> list[str]:
    """Why `text` is not a valid template (empty when it is)."""
    remainder = _PLACEHOLDER.sub("", text)
    if _OTHER_SYNTAX.search(remainder):
        return ["only {{field}} placeholders are allowed (no filters, tags or expressions)"]
    return []


def format_value(value: Any, limit: int | None = None) -> str:
    """A value as plain text: booleans `Yes`/`No`, empty `—`, lists joined by commas; at
    most `limit` characters, a list's items formatted only while there is room."""
    if value is True:
        text = "Yes"
    elif value is False:
        text = "No"
    elif value is None or value == "" or value == []:
        text = "—"
    elif isinstance(value, list):
        parts: list[str] = []
        size = 0
        for item in value:
            if limit is not None and size >= limit:
                break
            separator = 2 if parts else 0
            room = None if limit is None else max(limit - size - separator, 0)
            part = format_value(item, room)
            parts.append(part)
            size += separator + len(part)
        text = ", ".join(parts)
    else:
        text = str(value)
    return text if limit is None else text[:limit]


def placeholders(text: str) -> list[str]:
    """The names `text`'s `{{…}}` placeholders name, in order."""
    return [match.group(1) for match in _PLACEHOLDER.finditer(text)]


def render(text: str, values: Mapping[str, Any], limit: int) -> str:
    """Replace each `{{field}}` with the field's value as plain text (`—` when missing),
    stopping once the output holds `limit` characters: a template that names a long value
    2,000 times costs its output, never 2,000 copies of the value."""
    return render_with(
        text, lambda name, room: format_value(values.get(name), room), lambda part: part, limit
    )


def render_with(
    text: str,
    value: Callable[[str, int], str],
    literal: Callable[[str], str],
    limit: int,
) -> str:
    """`render` with the placeholders' text from `value(name, room)` and the template's own
    text passed through `literal` (an escape), within the same `limit` of output."""
    out: list[str] = []
    room = limit
    at = 0
    for match in _PLACEHOLDER.finditer(text):
        part = literal(text[at : match.start()])[:room]
        out.append(part)
        room -= len(part)
        if room <= 0:
            break
        filled = value(match.group(1), room)[:room]
        out.append(filled)
        room -= len(filled)
        if room <= 0:
            break
        at = match.end()
    else:
        out.append(literal(text[at:])[:room])
    return "".join(out)
