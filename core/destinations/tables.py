"""What the table-like vendor types (Google Sheets, Airtable, Notion) share: a delivery's
payload as rows, a field found among a table's columns by its name or label, a field's value
as one cell, the shape of a vendor's token, what a vendor's refusal means, and the time one
delivery's several requests share (docs/integrations.md#google-sheets-airtable-and-notion).

A row is one submission (each submission a digest lists; a stream event's `data`): its
receipt, its arrival time and its fields in the visitor's order, a file field reading as its
files' names. The vendor hosts are fixed public hosts, the operator's settings
(`POSTBAG_GOOGLE_SHEETS_URL`…), never a tenant's: a tenant's config fills path segments
only, each checked against the vendor's id pattern or quoted, so the SSRF guard has no
target of theirs to check.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from core.destinations.base import Result
from core.destinations.text import capped

# The characters of a vendor's token: printable ASCII without a space (no NUL, no line
# break, nothing an `Authorization` header or a form field would refuse or split).
_TOKEN = re.compile(r"[\x21-\x7e]+")

# The columns every row fills besides its fields, by the name a table's column has.
RECEIPT = "Receipt"
SUBMITTED_AT = "Submitted at"


@dataclass(frozen=True, slots=True)
class Row:
    """One submission as a table stores it."""

    receipt: str
    submitted_at: str
    # Field name → value, in the visitor's order.
    fields: dict[str, Any]
    labels: Mapping[str, Any]

    def columns(self) -> dict[str, Any]:
        """The receipt and arrival time under their column names, then the fields (a field
        named like a fixed column gives way to it)."""
        fixed = {SUBMITTED_AT: self.submitted_at, RECEIPT: self.receipt}
        return fixed | {name: value for name, value in self.fields.items() if name not in fixed}


def rows(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> list[Row]:
    """The rows `payload` holds: one for a submission or a stream event, one per listed
    submission of a digest (erased ones without fields)."""
    event = payload.get("event")
    if event == "form.digest":
        return [
            Row(
                str(item.get("receipt", "")),
                str(item.get("submitted_at", "")),
                dict(item.get("values") or {}),
                {},
            )
            for item in payload.get("submissions") or []
        ]
    if event == "stream.event":
        data = payload.get("data")
        fields = dict(data) if isinstance(data, dict) else {"data": data}
        return [Row(str(payload["receipt"]), str(payload.get("received_at", "")), fields, {})]
    values: Mapping[str, Any] = payload.get("values") or {}
    files = {
        name: ", ".join(str(item.get("name", "")) for item in items)
        for name, items in (payload.get("attachments") or {}).items()
    }
    order = [str(name) for name in (template or {}).get("field_order") or []]
    merged = {**values, **files}
    fields = {name: merged[name] for name in order if name in merged} | merged
    labels = payload.get("labels") or (template or {}).get("labels") or {}
    return [Row(str(payload["receipt"]), str(payload.get("submitted_at", "")), fields, labels)]


def text(value: Any) -> str:
    """A value as one cell's text: empty for none, lists joined by commas, objects as JSON."""
    if value is None:
        return ""
    if value is True or value is False:
        return "Yes" if value else "No"
    if isinstance(value, list):
        return ", ".join(text(item) for item in capped(value))
    if isinstance(value, dict):
        return json.dumps(capped(value), ensure_ascii=False, separators=(",", ":"))
    return str(value)


def number(value: Any) -> int | float | None:
    """A value as a number (a JSON number, or text that reads as one), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return None
        if parsed != parsed or parsed in (float("inf"), float("-inf")):
            return None
        return int(parsed) if parsed.is_integer() and "." not in value else parsed
    return None


def key(name: str) -> str:
    """How a column's name is compared with a field's: trimmed, case folded."""
    return " ".join(name.split()).casefold()


def match(columns: Mapping[str, Any], name: str, labels: Mapping[str, Any]) -> str | None:
    """The name of the column among `columns` (keyed by `key`) that field `name` goes to: the
    one named like the field, else like its label."""
    for candidate in (name, labels.get(name)):
        if isinstance(candidate, str) and key(candidate) in columns:
            found: str = columns[key(candidate)]
            return found
    return None


def token_shaped(
    value: object, *, prefixes: tuple[str, ...] = ("",), lengths: tuple[int, int] = (20, 200)
) -> bool:
    """Whether `value` has a vendor token's shape: text starting with one of `prefixes`, of
    `lengths` (fewest, most) characters, every one printable ASCII and none a space. Checked
    when a destination's secret is set, so a malformed one is refused then (`422
    invalid_secret`), not met by a send."""
    low, high = lengths
    return (
        isinstance(value, str)
        and value.startswith(prefixes)
        and low <= len(value) <= high
        and _TOKEN.fullmatch(value) is not None
    )


def refusal(result: Result) -> Result:
    """A vendor's answer with the reason its status means for every such API: 401 the
    credential was revoked or is wrong, 403 it may not reach the table."""
    if result.http_status == 401:
        return replace(result, reason="credentials_rejected")
    if result.http_status == 403:
        return replace(result, reason="permission_denied")
    return result


class Deadline:
    """The time one delivery's requests share (the send's timeout, not one per request)."""

    def __init__(self, seconds: float) -> None:
        self._end = asyncio.get_running_loop().time() + seconds

    def left(self) -> float:
        """Seconds left, at least a tenth (a request started late still gets an answer)."""
        return max(self._end - asyncio.get_running_loop().time(), 0.1)
