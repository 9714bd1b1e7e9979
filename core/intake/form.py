"""The form a submit sees, with its routes and counters: read once per request, or kept
from an earlier submit and confirmed by the insert itself.

`resolve_form` reads the form (one round trip). `form_for_submit` keeps what it read, on
the process's services by form, for the forms whose submit path does nothing outside the database
before the insert (no Turnstile or spam secret, no file fields): their next submits skip the
read. Such a form (`Form.kept`) carries the revision it was read at, and the insert stores
nothing unless the form is still at that revision and the month's count still puts the
submission on the side of the quota the submit assumed (`insert_submission`); otherwise
the submit reads the form afresh and runs again. A kept form's client count is not read:
the insert counts the client under its lock either way, and with no Turnstile call to
spare a flood, the rate limit decides the same status there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.intake.visitor import client_hash
from core.platform.clock import month_of
from core.platform.errors import NotFound
from core.platform.ids import is_id
from core.platform.kept import Kept
from core.platform.queries import queries
from core.platform.services import Registry, Services
from core.schemas.versions import Version
from core.spam.config import SpamConfig, spam_config


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
    # The form's autoresponse settings (core/owner/form_settings.py `AutoresponseSettings`).
    autoresponse: Mapping[str, Any] | None
    spam: SpamConfig
    # The secrets of the form's external spam checks (`core.spam.external`).
    spam_secrets: Mapping[str, str]
    plan: str
    # The schema the checks use: the owner's latest (`manual`), or without one the latest
    # suggestion (`suggested`, which only `observe` reports drift against).
    schema_version: int | None
    schema: Mapping[str, Any] | None
    schema_source: str | None
    month_submissions: int
    recent_from_client: int
    routes: list[dict[str, Any]]
    client_hash: bytes
    revision: int
    # Kept from an earlier submit: the insert confirms `revision` (see the module's doc).
    kept: bool = False

    @property
    def current_schemas(self) -> dict[str | None, Version]:
        """The form's current version as `core.schemas.versions.checked_version` reads it:
        the default (a form's versions name no event type)."""
        if self.schema is None or self.schema_version is None or self.schema_source is None:
            return {}
        return {None: Version(self.schema_version, self.schema, self.schema_source)}

    @property
    def keepable(self) -> bool:
        """Whether later submits may use this form as read now: it takes submissions, and
        nothing its submit path does before the insert reaches outside the database."""
        return (
            self.accepting
            and not self.turnstile_secret
            and not self.spam_secrets
            and not self.file_fields
        )


# Forms kept by the process's services (tests have several), at most KEPT_FORMS.
KEPT_FORMS = 1024
_KEPT: Registry[Kept[Form]] = Registry("kept forms", lambda: Kept(KEPT_FORMS))


async def form_for_submit(services: Services, form_id: str, *, client: str, now: datetime) -> Form:
    """The form a `POST /s/{form}` uses: the one kept from an earlier submit when there is
    one (the insert confirms it), else read now (and kept when it may be)."""
    kept = services.state(_KEPT).get(form_id)
    if kept is not None:
        hashed = client_hash(client, services.settings.require_secret_key())
        return dataclasses.replace(kept, client_hash=hashed)
    return await fresh_form(services, form_id, client=client, now=now)


def forget_form(services: Services, form_id: str) -> None:
    """Drop the form kept for later submits (a submit failed while using it)."""
    services.state(_KEPT).forget(form_id)


async def fresh_form(services: Services, form_id: str, *, client: str, now: datetime) -> Form:
    """The form read now, which replaces (or drops) the one kept for later submits."""
    services.state(_KEPT).forget(form_id)
    form = await resolve_form(services, form_id, client=client, now=now)
    if form.keepable:
        kept = dataclasses.replace(form, recent_from_client=0, kept=True)
        services.state(_KEPT).keep(form_id, kept)
    return form


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
        autoresponse=row["autoresponse"],
        spam=spam_config(row["spam"]),
        spam_secrets=row["spam_secrets"],
        plan=row["plan"],
        schema_version=row["schema_version"],
        schema=row["schema"],
        schema_source=row["schema_source"],
        month_submissions=row["month_submissions"],
        recent_from_client=row["recent_from_client"],
        routes=row["routes"],
        client_hash=hashed,
        revision=row["revision"],
    )
