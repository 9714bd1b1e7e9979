"""How the client commands print: aligned tables and `key: value` lines (or JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

WIDEST_CELL = 60


def cell(value: Any) -> str:
    """One value as a table cell: `-` for none or empty, yes/no, lists of words joined by
    commas, compact JSON for other structures."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list) and all(isinstance(item, str | int) for item in value):
        text = ", ".join(str(item) for item in value)
    elif isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= WIDEST_CELL else text[: WIDEST_CELL - 1] + "…"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows under upper-case headings, columns padded to their widest cell."""
    cells = [[cell(row.get(column)) for column in columns] for row in rows]
    widths = [
        max([len(column), *(len(line[i]) for line in cells)]) for i, column in enumerate(columns)
    ]
    lines = [[column.upper() for column in columns], *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def details(found: Mapping[str, Any], keys: Sequence[str]) -> str:
    """`key: value` lines for the given keys, aligned."""
    width = max(len(key) for key in keys)
    return "\n".join(f"{key.ljust(width)}  {cell(found.get(key))}" for key in keys)


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
