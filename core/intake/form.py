"""The form a submit sees: resolved once per request, with its routes and counters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.intake.visitor import client_hash
from core.platform.clock import month_of
from core.platform.errors import NotFound
from core.platform.ids import is_id
from core.platform.queries import queries
from core.platform.services import Services


@dataclass(frozen=True, slots=True)
class Form:
    """A live form as the submit path sees it (read as the owner: the path is public)."""

    id: str
    organization_id: str
    name: str
    accepting: bool
    allowed_origins: tuple[str, ...]
    honeypot_field: str
    redirect_url: str | None
    retention_days: int | None
    rate_limit_max: int
    rate_limit_per_seconds: int
    schema_mode: str
    labels: Mapping[str, Any]
    file_fields: Mapping[str, Any]
    turnstile_secret: str | None
    consent_field: str | None
    ack_email: Mapping[str, Any] | None
    plan: str
    schema_version: int | None
    schema: Mapping[str, Any] | None
    month_submissions: int
    recent_from_client: int
    routes: list[dict[str, Any]]
    client_hash: bytes


async def resolve_form(services: Services, form_id: str, *, client: str, now: datetime) -> Form:
    """The live form `form_id` (NotFound for unknown or deleted forms)."""
    hashed = client_hash(client, services.settings.require_secret_key())
    if not is_id(form_id, "frm"):
        raise NotFound("no such form")
    row = await services.db.fetch_one(
        queries["resolve_form"],
        {"form_id": form_id, "client_hash": hashed, "now": now, "month": month_of(now)},
    )
    if row is None:
        raise NotFound("no such form")
    return Form(
        id=row["id"],
        organization_id=row["organization_id"],
        name=row["name"],
        accepting=row["accepting"],
        allowed_origins=tuple(row["allowed_origins"]),
        honeypot_field=row["honeypot_field"],
        redirect_url=row["redirect_url"],
        retention_days=row["retention_days"],
        rate_limit_max=row["rate_limit_max"],
        rate_limit_per_seconds=row["rate_limit_per_seconds"],
        schema_mode=row["schema_mode"],
        labels=row["labels"] or {},
        file_fields=row["file_fields"] or {},
        turnstile_secret=row["turnstile_secret"],
        consent_field=row["consent_field"],
        ack_email=row["ack_email"],
        plan=row["plan"],
        schema_version=row["schema_version"],
        schema=row["schema"],
        month_submissions=row["month_submissions"],
        recent_from_client=row["recent_from_client"],
        routes=row["routes"],
        client_hash=hashed,
    )
