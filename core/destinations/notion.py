"""The Notion type: one page per submission in a database the owner shared with their
integration (docs/integrations.md#notion).

The secret is the integration's token (`ntn_…`, or `secret_…` from before 2024). A send
reads the database (`GET /v1/databases/{id}`) for its properties, then creates a page
(`POST /v1/pages`). Each submitted field (and `Receipt`, `Submitted at`) named like a
property (or whose label is), however its case is spelled, fills it by the property's
type: title, rich text, email, URL, phone number, number, date, checkbox or select. Every
other field, and one a property cannot take (a number property given words, a date that is
no ISO date, a select option with a comma), is a line of the page's content, `label: value`.
The title is the receipt when no field fills it. A digest is one page: its subject as the
title, its text as the content. Every request sends `Notion-Version`.

Notion allows about 3 requests a second per integration: a send is two, so the type's rate is
1.5 sends a second; a 429's `Retry-After` is honoured, a 409 (a conflict Notion asks to retry)
is retried, 401 ends the delivery `credentials_rejected`, 403 `permission_denied`, 404 (the
database is not shared with the integration) `http_404`.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import date, datetime
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import Field, field_validator

from core import __version__
from core.destinations import http, tables
from core.destinations.base import AdapterConfig, BaseAdapter, DeliveryContext, Result
from core.destinations.tables import Deadline, Row, key, match, number, refusal, rows, text
from core.platform.fields import truthy

NOTION_VERSION = "2022-06-28"
# Notion's limits: characters in one text object, text objects in one rich text, blocks in
# one request, characters in a select option's name.
TEXT_CHARS = 2000
RICH_TEXTS = 100
BLOCKS = 100
OPTION_CHARS = 100
DATABASE_BYTES = 1024 * 1024

_STRINGS = {"email": "email", "url": "url", "phone_number": "phone_number"}
# The property types a page is given (the others are computed, or relate pages).
WRITABLE = frozenset({"title", "rich_text", "number", "date", "checkbox", "select", *_STRINGS})


class NotionConfig(AdapterConfig):
    """`{"database_id": "0123456789abcdef0123456789abcdef"}`."""

    database_id: str = Field(
        title="Database id",
        description="the 32 hexadecimal digits in the database's link (dashes allowed)",
        min_length=32,
        max_length=36,
    )

    @field_validator("database_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        plain = value.replace("-", "").lower()
        if len(plain) != 32 or any(char not in "0123456789abcdef" for char in plain):
            raise ValueError("must be 32 hexadecimal digits (dashes allowed)")
        return plain


def rich(value: str) -> list[dict[str, Any]]:
    """`value` as Notion's rich text: pieces of at most TEXT_CHARS, at most RICH_TEXTS."""
    pieces = [value[at : at + TEXT_CHARS] for at in range(0, len(value), TEXT_CHARS)]
    return [{"type": "text", "text": {"content": piece}} for piece in pieces[:RICH_TEXTS]]


def _iso_date(value: str) -> bool:
    for parse in (date.fromisoformat, datetime.fromisoformat):
        try:
            parse(value)
        except ValueError:
            continue
        return True
    return False


def property_value(kind: str, value: Any) -> dict[str, Any] | None:
    """`value` as a property of type `kind` takes it, or None when it cannot."""
    shown = text(value)
    if kind in ("title", "rich_text"):
        return {kind: rich(shown)}
    if kind in _STRINGS:
        return {kind: shown} if len(shown) <= TEXT_CHARS else None
    if kind == "number":
        found = number(value)
        return None if found is None else {"number": found}
    if kind == "checkbox":
        return {"checkbox": truthy(value)}
    if kind == "select":
        fits = len(shown) <= OPTION_CHARS and "," not in shown
        return {"select": {"name": shown}} if fits else None
    if kind == "date" and _iso_date(shown.strip()):
        return {"date": {"start": shown.strip()}}
    return None


def _line(label: str, value: str) -> dict[str, Any]:
    head = {"type": "text", "text": {"content": f"{label}: "[:TEXT_CHARS]}}
    head["annotations"] = {"bold": True}
    return {
        "object": "block",
        "type": "paragraph",
        "paragraph": {"rich_text": [head, *rich(value)[: RICH_TEXTS - 1]]},
    }


def _paragraph(value: str) -> dict[str, Any]:
    return {"object": "block", "type": "paragraph", "paragraph": {"rich_text": rich(value)}}


def page(row: Row, properties: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The page's properties and content blocks for `row` in a database of `properties`."""
    kinds = {
        str(name): str(spec.get("type"))
        for name, spec in properties.items()
        if isinstance(spec, dict) and spec.get("type") in WRITABLE
    }
    columns = {key(name): name for name in kinds}
    filled: dict[str, Any] = {}
    lines: list[tuple[str, str]] = []
    for name, value in row.columns().items():
        column = match(columns, name, row.labels)
        if column is not None and column not in filled:
            if value in (None, "", []):
                continue
            converted = property_value(kinds[column], value)
            if converted is not None:
                filled[column] = converted
                continue
        label = row.labels.get(name)
        lines.append((label if isinstance(label, str) and label else name, text(value) or "—"))
    title = next((name for name, kind in kinds.items() if kind == "title"), None)
    if title is not None and title not in filled:
        filled[title] = {"title": rich(row.receipt)}
    blocks = [_line(label, value) for label, value in lines]
    if len(blocks) > BLOCKS:
        blocks[BLOCKS - 1 :] = [_paragraph(f"… {len(blocks) - BLOCKS + 1} more fields not shown")]
    return filled, blocks


def digest_page(
    payload: Mapping[str, Any], properties: Mapping[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A digest's page: its subject as the title, its text's lines as paragraphs."""
    title = next(
        (n for n, s in properties.items() if isinstance(s, dict) and s.get("type") == "title"),
        None,
    )
    filled = {} if title is None else {str(title): {"title": rich(str(payload.get("subject")))}}
    lines = str(payload.get("text", "")).splitlines()
    blocks = [_paragraph(line) for line in lines if line.strip()][:BLOCKS]
    return filled, blocks


class NotionAdapter(BaseAdapter):
    type: ClassVar[str] = "notion"
    label: ClassVar[str] = "Notion"
    Config: ClassVar[builtins.type[AdapterConfig]] = NotionConfig
    max_attempts: ClassVar[int] = 8
    secret_required: ClassVar[bool] = True
    secret_hint: ClassVar[str] = "the integration's token (ntn_…)"
    # About 3 requests a second per integration, two requests a send.
    rate_per_second: ClassVar[float | None] = 1.5
    templates: ClassVar[bool] = False

    def validate_secret(self, secret: str) -> None:
        if not tables.token_shaped(secret, prefixes=("ntn_", "secret_")):
            raise ValueError("must be a Notion integration token (ntn_… or secret_…)")

    async def deliver(
        self, target: Mapping[str, Any], payload: Mapping[str, Any], ctx: DeliveryContext
    ) -> Result:
        if not ctx.secret:
            return Result(ok=False, retryable=False, error_class="secret_missing")
        deadline = Deadline(ctx.timeout)
        api = str(ctx.settings.notion_url).rstrip("/")
        database = str(target.get("database_id", ""))
        headers = {
            "Authorization": f"Bearer {ctx.secret}",
            "Notion-Version": NOTION_VERSION,
            "Content-Type": "application/json",
            "User-Agent": f"Postbag/{__version__}",
        }
        read = await http.request(
            ctx.http,
            "GET",
            f"{api}/v1/databases/{quote(database, safe='')}",
            headers=headers,
            timeout=deadline.left(),
            read_limit=DATABASE_BYTES,
        )
        if not read.result.ok:
            return _answer(read.result)
        answer = read.json()
        found = answer.get("properties") if isinstance(answer, dict) else None
        properties: Mapping[str, Any] = found if isinstance(found, dict) else {}
        if payload.get("event") == "form.digest":
            filled, blocks = digest_page(payload, properties)
        else:
            filled, blocks = page(rows(payload, ctx.template)[0], properties)
        body = {"parent": {"database_id": database}, "properties": filled, "children": blocks}
        created = await http.request(
            ctx.http,
            "POST",
            f"{api}/v1/pages",
            content=json.dumps(body, ensure_ascii=False).encode(),
            headers=headers,
            timeout=deadline.left(),
        )
        return _answer(created.result)


def _answer(result: Result) -> Result:
    """Notion's answer as a result: its 409 is a conflict it asks to retry."""
    if result.http_status == 409:
        return replace(result, retryable=True)
    return refusal(result)


adapter = NotionAdapter()
