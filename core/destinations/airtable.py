"""The Airtable type: one record per submission in a table of the owner's base
(docs/integrations.md#airtable).

The secret is a personal access token (scopes `data.records:write` and `schema.bases:read`,
access to the base). A send reads the base's schema (`GET /v0/meta/bases/{base}/tables`),
finds the table by id or name, and fills each of its fields that is named like a submitted
field (or its label, or `Receipt`, `Submitted at`), however its case is spelled; then
creates the records (`POST /v0/{base}/{table}`, at most 10 a request: a digest's listed
submissions go in batches). When the table has a text field `Receipt`, the records are
upserted on it instead (`PATCH` with `performUpsert`): a send made again after a lost
answer, or a digest's batches sent again after one failed, update the records they made.
Values take the field's type (a number field a number, a checkbox yes or no, a multiple
select a list); `typecast` is off, so Airtable creates
nothing the owner did not make, no select option included: a value a field cannot take is
refused (422, the delivery ends `http_422`, Airtable's words in the attempt's excerpt). A
field the table does not have is not sent, and a computed field is never written.

Airtable allows 5 requests a second per base and asks for 30 seconds of quiet after a 429:
a send is two requests (the schema, the records), so the type's rate is 2.5 sends a second,
requests within one send are 0.2 s apart, and a 429 waits at least 30 s.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import Field

from core import __version__
from core.destinations import http
from core.destinations.base import AdapterConfig, BaseAdapter, DeliveryContext, Result
from core.destinations.tables import (
    RECEIPT,
    Deadline,
    Row,
    key,
    match,
    number,
    refusal,
    rows,
    text,
    token_shaped,
)
from core.platform.fields import truthy

# Records one create request takes.
BATCH = 10
# Airtable's 5 requests a second per base, as the pause between one send's requests.
PAUSE = 0.2
# Airtable: "wait 30 seconds before subsequent requests will succeed" after a 429.
WAIT_AFTER_429 = 30.0
# A base's schema may list hundreds of fields with their choices.
SCHEMA_BYTES = 1024 * 1024

_NUMBERS = frozenset({"number", "currency", "percent", "rating", "duration"})
_TEXTS = frozenset(
    {
        "singleLineText",
        "multilineText",
        "richText",
        "email",
        "url",
        "phoneNumber",
        "singleSelect",
        "date",
        "dateTime",
    }
)
# The field types an upsert may merge on that hold a receipt.
_MERGEABLE = frozenset({"singleLineText", "multilineText"})
# The field types a record may be given (the others are computed or link to other tables).
WRITABLE = _NUMBERS | _TEXTS | {"checkbox", "multipleSelects"}


class AirtableConfig(AdapterConfig):
    """`{"base_id": "appXXXXXXXXXXXXXX", "table": "Submissions"}`."""

    base_id: str = Field(
        title="Base id",
        description="the app… id in the base's URL: airtable.com/<base id>/…",
        pattern=r"^app[A-Za-z0-9]{14}$",
    )
    table: str = Field(
        title="Table",
        description="the table's name or its tbl… id",
        min_length=1,
        max_length=255,
        pattern=r"^[^\x00-\x1f\x7f]+$",
    )


def cell(kind: str, value: Any) -> Any:
    """`value` as a field of type `kind` takes it (as it came when it reads as no such value,
    for Airtable to refuse with its reason)."""
    if kind in _NUMBERS:
        found = number(value)
        return text(value) if found is None else found
    if kind == "checkbox":
        return truthy(value)
    if kind == "multipleSelects":
        items = value if isinstance(value, list) else [value]
        return [text(item) for item in items if item not in (None, "")]
    return text(value)


def record(row: Row, columns: Mapping[str, str], kinds: Mapping[str, str]) -> dict[str, Any]:
    """The `fields` of `row`'s record: each value under the table's field it matches."""
    fields: dict[str, Any] = {}
    for name, value in row.columns().items():
        column = match(columns, name, row.labels)
        if column is None or column in fields or value in (None, "", []):
            continue
        fields[column] = cell(kinds[column], value)
    return fields


class AirtableAdapter(BaseAdapter):
    type: ClassVar[str] = "airtable"
    label: ClassVar[str] = "Airtable"
    Config: ClassVar[builtins.type[AdapterConfig]] = AirtableConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True
    secret_hint: ClassVar[str] = "a personal access token (pat….…)"
    # 5 requests a second per base, two requests a send.
    rate_per_second: ClassVar[float | None] = 2.5
    templates: ClassVar[bool] = False

    def validate_secret(self, secret: str) -> None:
        if not token_shaped(secret, prefixes=("pat",)):
            raise ValueError("must be an Airtable personal access token (pat….…)")

    def digest(self, summary: Mapping[str, Any], *, form_name: str) -> dict[str, Any]:  # noqa: ARG002 - the interface's signature
        return dict(summary)

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        deadline = Deadline(ctx.timeout)
        api = str(ctx.settings.airtable_url).rstrip("/")
        base = quote(str(target.get("base_id", "")), safe="")
        headers = {
            "Authorization": f"Bearer {ctx.secret}",
            "Content-Type": "application/json",
            "User-Agent": f"Postbag/{__version__}",
        }
        schema = await http.request(
            ctx.http,
            "GET",
            f"{api}/v0/meta/bases/{base}/tables",
            headers=headers,
            timeout=deadline.left(),
            read_limit=SCHEMA_BYTES,
        )
        if not schema.result.ok:
            return _answer(schema.result)
        table = _table(schema.json(), str(target.get("table", "")))
        if table is None:
            return Result(ok=False, retryable=False, reason="table_not_found")
        fields = [
            f
            for f in table.get("fields") or []
            if isinstance(f, dict) and isinstance(f.get("name"), str) and f.get("type") in WRITABLE
        ]
        columns = {key(str(f["name"])): str(f["name"]) for f in fields}
        kinds = {str(f["name"]): str(f["type"]) for f in fields}
        records = [{"fields": record(row, columns, kinds)} for row in rows(payload, ctx.template)]
        url = f"{api}/v0/{base}/{quote(str(table['id']), safe='')}"
        receipts = match(columns, RECEIPT, {})
        merge = receipts if receipts is not None and kinds[receipts] in _MERGEABLE else None
        result = schema.result
        for start in range(0, len(records), BATCH):
            await asyncio.sleep(PAUSE)
            body: dict[str, Any] = {"records": records[start : start + BATCH], "typecast": False}
            if merge is not None:
                # An upsert on the receipt: a retry after a lost answer updates the record
                # it made instead of making a second.
                body["performUpsert"] = {"fieldsToMergeOn": [merge]}
            created = await http.request(
                ctx.http,
                "PATCH" if merge is not None else "POST",
                url,
                content=json.dumps(body, ensure_ascii=False).encode(),
                headers=headers,
                timeout=deadline.left(),
            )
            result = _answer(created.result)
            if not result.ok:
                break
        return result


def _table(schema: Any, wanted: str) -> dict[str, Any] | None:
    """The table named `wanted` (its id, or its name in any case) in a schema answer."""
    tables = schema.get("tables") if isinstance(schema, dict) else None
    for table in tables if isinstance(tables, list) else []:
        if isinstance(table, dict) and (
            table.get("id") == wanted or key(str(table.get("name", ""))) == key(wanted)
        ):
            return table
    return None


def _answer(result: Result) -> Result:
    """Airtable's answer as a result: a 429 waits at least 30 s."""
    if result.http_status == 429:
        return replace(result, retry_after=max(result.retry_after or 0.0, WAIT_AFTER_429))
    return refusal(result)


adapter = AirtableAdapter()
