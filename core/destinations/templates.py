"""Route and acknowledgement templates: `{{field}}` placeholders and nothing else."""

from __future__ import annotations

import re
from collections.abc import Mapping
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


def format_value(value: Any) -> str:
    """A value as plain text: booleans `Yes`/`No`, empty `—`, lists joined by commas."""
    if value is True:
        return "Yes"
    if value is False:
        return "No"
    if value is None or value == "" or value == []:
        return "—"
    if isinstance(value, list):
        return ", ".join(format_value(item) for item in value)
    return str(value)


def render(text: str, values: Mapping[str, Any]) -> str:
    """Replace each `{{field}}` with the field's value as plain text (`—` when missing)."""
    return _PLACEHOLDER.sub(lambda match: format_value(values.get(match.group(1))), text)
