"""Schema inference for `observe` forms: a JSON Schema suggested from the submissions seen.

Linear in the size of its samples: a string longer than FORMAT_MAX_CHARS is never given a
format (no format here allows one), so the format patterns see short strings only."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

# A field present in at least this share of submissions is required.
REQUIRED_SHARE = 0.95
# The longest string a format is looked for in (an email address is at most 254).
FORMAT_MAX_CHARS = 320

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


_FORMATS = (("email", _EMAIL.match), ("uri", _URI.match), ("date", _is_date))


def _string_format(values: list[str]) -> str | None:
    if any(len(value) > FORMAT_MAX_CHARS for value in values):
        return None
    for name, matches in _FORMATS:
        if values and all(matches(value) for value in values):
            return name
    return None


def infer_schema(submissions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON Schema that the given submission values fit (field names, types, formats)."""
    seen: dict[str, list[Any]] = {}
    for values in submissions:
        for field, value in values.items():
            seen.setdefault(field, []).append(value)
    properties: dict[str, Any] = {}
    for field in sorted(seen):
        field_values = seen[field]
        types = sorted({_json_type(value) for value in field_values})
        if "integer" in types and "number" in types:
            types.remove("integer")
        prop: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if types == ["string"]:
            fmt = _string_format(field_values)
            if fmt:
                prop["format"] = fmt
        properties[field] = prop
    total = len(submissions)
    required = [
        field for field in sorted(seen) if total and len(seen[field]) / total >= REQUIRED_SHARE
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
    }
