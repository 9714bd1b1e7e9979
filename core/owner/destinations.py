"""Destinations: adapter-validated config, and write-only secrets kept as immutable versions.

A secret is only ever appended (`destination_secrets`, one row per version); every attempt
of a delivery, queued before the rotation or after, signs with the newest one, as it goes
to the config as it is then (docs/delivery.md#where-an-attempt-goes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from psycopg.types.json import Jsonb
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic.json_schema import SkipJsonSchema

from core.destinations.base import Adapter, ValidationContext
from core.destinations.rates import MAX_RATE, MIN_RATE, RECOVER, TYPE_RATES
from core.destinations.registry import ADAPTERS
from core.owner.changes import Change
from core.owner.usage import reserve
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.errors import InvalidConfig, InvalidInput, InvalidSecret, NotFound
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

DestinationName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Secret = Annotated[str, StringConstraints(min_length=1, max_length=4096)]

_SECRET_DESCRIPTION = "write-only; " + "; ".join(
    f"{a.type}: {a.secret_hint}" for a in ADAPTERS.values() if a.secret_hint
)
_CONFIG_DESCRIPTION = "; ".join(
    f"{a.type} `{{{', '.join(a.Config.model_fields)}}}`"
    + (f" (`{a.secret_field}` is the write-only secret)" if a.secret_field else "")
    for a in ADAPTERS.values()
)


def _known_type(value: str) -> str:
    if value not in ADAPTERS:
        raise ValueError(f"must be one of {', '.join(ADAPTERS)}")
    return value


DestinationType = Annotated[
    str, AfterValidator(_known_type), Field(json_schema_extra={"enum": list(ADAPTERS)})
]


def _config_by_type(schema: dict[str, Any]) -> None:
    """In the JSON Schema (and so the OpenAPI document), `config` is the `Config` of the
    adapter `type` names: one `if type … then config …` per type."""
    schema["allOf"] = [
        {
            "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
            "then": {"properties": {"config": adapter.Config.model_json_schema()}},
        }
        for name, adapter in ADAPTERS.items()
    ]


class PauseAfter(BaseModel):
    """When a destination pauses itself: the storm breaker has held it `failing` (no attempt
    sent) for `hours`, with at least `attempts` attempts in them, all failed
    (docs/delivery.md#destinations-that-pause-themselves)."""

    model_config = ConfigDict(extra="forbid")

    hours: int = Field(default=24, ge=1, le=720, description="the window, in hours (1-720)")
    attempts: int = Field(
        default=10, ge=1, le=10_000, description="the fewest failed attempts in the window"
    )


_DEFAULT_RATES = ", ".join(
    f"{a.type} {a.rate_per_second:g}" for a in ADAPTERS.values() if a.rate_per_second
)


class RateLimit(BaseModel):
    """The most sends a second to a destination, all workers together."""

    model_config = ConfigDict(extra="forbid")

    per_second: float = Field(
        ge=MIN_RATE,
        le=MAX_RATE,
        strict=True,
        allow_inf_nan=False,
        description=(
            f"sends a second, {MIN_RATE:g} to {MAX_RATE:g}; fractions allowed (0.5: one every 2 s)"
        ),
        examples=[1, 0.5],
    )


_RATE_DESCRIPTION = (
    "the most sends a second, all workers together; omitted (or null in a PATCH): the "
    f"type's default ({_DEFAULT_RATES} a second; none for the others)"
)


class DestinationFields(BaseModel):
    """A destination as created."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_config_by_type)

    type: DestinationType
    name: DestinationName
    config: dict[str, Any] = Field(
        description=_CONFIG_DESCRIPTION,
        examples=[{"url": "https://example.com/hooks/postbag"}],
    )
    secret: Secret | None = Field(
        default=None, description=_SECRET_DESCRIPTION, json_schema_extra={"writeOnly": True}
    )
    enabled: bool = True
    pause_after: PauseAfter = Field(default_factory=PauseAfter)
    rate_limit: RateLimit | None = Field(default=None, description=_RATE_DESCRIPTION)


class DestinationPatch(BaseModel):
    """A change to a destination; a new `secret` becomes a new secret version. A field left
    out keeps its value; none but `rate_limit` takes `null` (the schema says so, the update
    refuses it): a null `rate_limit` goes back to the type's default."""

    model_config = ConfigDict(extra="forbid")

    name: DestinationName | SkipJsonSchema[None] = None
    config: dict[str, Any] | SkipJsonSchema[None] = None
    secret: Secret | SkipJsonSchema[None] = Field(
        default=None, description=_SECRET_DESCRIPTION, json_schema_extra={"writeOnly": True}
    )
    enabled: bool | SkipJsonSchema[None] = Field(
        default=None,
        description=(
            "false pauses it (reason `owner`; a destination already paused keeps its reason); "
            "true resumes a paused one, whatever the reason: what waited is sent"
        ),
    )
    pause_after: PauseAfter | SkipJsonSchema[None] = None
    rate_limit: RateLimit | None = Field(default=None, description=_RATE_DESCRIPTION)

    def rotates_secret(self) -> bool:
        """Whether the change sets a new secret (`secret`, or a type's secret config field)."""
        fields = {a.secret_field for a in ADAPTERS.values() if a.secret_field}
        return self.secret is not None or bool(fields & set(self.config or {}))


@dataclass(frozen=True, slots=True)
class CreatedDestination:
    """A new destination, and its signing secret when Postbag generated it (shown once)."""

    destination: dict[str, Any]
    generated_secret: str | None


@dataclass(frozen=True, slots=True)
class _CheckedConfig:
    """A validated config as stored, and the secret it carries (a type whose config field
    is its secret)."""

    stored: dict[str, Any]
    secret: str | None


def _validated_config(
    adapter: Adapter, config: dict[str, Any], ctx: ValidationContext
) -> _CheckedConfig:
    try:
        model = adapter.validate(config, ctx)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(["config", *(str(p) for p in err["loc"])]), "message": err["msg"]}
            for err in exc.errors()
        ]
        raise InvalidConfig(f"config is invalid for a {adapter.type} destination", errors) from None
    secret = None if adapter.secret_field is None else str(getattr(model, adapter.secret_field))
    return _CheckedConfig(stored=adapter.stored(model), secret=secret)


def _refuse_separate_secret(adapter: Adapter) -> None:
    """A type whose secret is a config field takes no separate `secret`."""
    if adapter.secret_field is not None:
        raise InvalidSecret(
            f"a {adapter.type} destination's secret is its config.{adapter.secret_field}",
            [{"field": "secret", "message": f"give config.{adapter.secret_field} instead"}],
        )


def _check_secret(adapter: Adapter, secret: str) -> None:
    try:
        adapter.validate_secret(secret)
    except ValueError as exc:
        # The adapter's message describes the rule, never the value.
        raise InvalidSecret(f"secret: {exc}", [{"field": "secret", "message": str(exc)}]) from None


async def _append_secret(conn: Conn, scope: OrgScope, destination_id: str, secret: str) -> int:
    cur = await conn.execute(
        queries["insert_destination_secret"],
        {
            "organization_id": scope.organization_id,
            "destination_id": destination_id,
            "secret": secret,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["version"])


@scoped
async def get_destination(conn: Conn, scope: OrgScope, *, destination_id: str) -> dict[str, Any]:
    """One live destination with its current secret version (never the secret)."""
    cur = await conn.execute(
        queries["get_destination"],
        {
            "id": destination_id,
            "organization_id": scope.organization_id,
            "recover": RECOVER,
            "type_rates": TYPE_RATES,
        },
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no destination {destination_id}")
    return row


@scoped
async def add_destination(
    conn: Conn, scope: OrgScope, *, fields: DestinationFields, ctx: ValidationContext
) -> CreatedDestination:
    """Create a destination within the plan's count, with secret version 1 when it has one."""
    adapter = ADAPTERS[fields.type]
    config = _validated_config(adapter, fields.config, ctx)
    secret, generated = fields.secret, None
    if secret is not None:
        _refuse_separate_secret(adapter)
        _check_secret(adapter, secret)
    elif config.secret is not None:
        secret = config.secret
    elif (new := adapter.new_secret()) is not None:
        secret = generated = new
    elif adapter.secret_required:
        raise InvalidSecret(
            f"a {fields.type} destination needs a secret",
            [{"field": "secret", "message": "required for this type"}],
        )
    await reserve(conn, scope, kind="destinations")
    destination_id = new_id("dst")
    await conn.execute(
        queries["insert_destination"],
        {
            "id": destination_id,
            "organization_id": scope.organization_id,
            "type": fields.type,
            "name": fields.name,
            "config": Jsonb(config.stored),
            "enabled": fields.enabled,
            "pause_after_hours": fields.pause_after.hours,
            "pause_after_attempts": fields.pause_after.attempts,
            "rate_per_second": None if fields.rate_limit is None else fields.rate_limit.per_second,
        },
    )
    if secret is not None:
        await _append_secret(conn, scope, destination_id, secret)
    row = await get_destination(conn, scope, destination_id=destination_id)
    return CreatedDestination(destination=row, generated_secret=generated)


@scoped
async def list_destinations(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` live destinations with ids after `after`, by id."""
    cur = await conn.execute(
        queries["list_destinations"],
        {
            "organization_id": scope.organization_id,
            "after": after,
            "limit": limit,
            "recover": RECOVER,
            "type_rates": TYPE_RATES,
        },
    )
    return await cur.fetchall()


@scoped
async def patch_destination(
    conn: Conn,
    scope: OrgScope,
    *,
    destination_id: str,
    patch: DestinationPatch,
    ctx: ValidationContext,
) -> dict[str, Any]:
    """Change what `patch` sets; a secret in it is appended as the next version. Resuming a
    paused destination (`enabled: true`) queues at once what waited for it, and the row
    answered then says which pause ended (`resumed`: its reason and time)."""
    params = {"id": destination_id, "organization_id": scope.organization_id}
    current = await (await conn.execute(queries["lock_destination"], params)).fetchone()
    if current is None:
        raise NotFound(f"no destination {destination_id}")
    for name in sorted(patch.model_fields_set - {"rate_limit"}):
        if getattr(patch, name) is None:
            raise InvalidInput(
                f"{name} cannot be null",
                [{"field": name, "message": "leave it out to keep the current value"}],
            )
    adapter = ADAPTERS[current["type"]]
    config = None if patch.config is None else _validated_config(adapter, patch.config, ctx)
    if patch.secret is not None:
        _refuse_separate_secret(adapter)
        _check_secret(adapter, patch.secret)
        await _append_secret(conn, scope, destination_id, patch.secret)
    if config is not None and config.secret is not None:
        # A new value of the field that is the secret is a rotation: the next version.
        await _append_secret(conn, scope, destination_id, config.secret)
    await conn.execute(
        queries["update_destination"],
        {
            **params,
            "name": patch.name,
            "config": None if config is None else Jsonb(config.stored),
            "pause_after_hours": None if patch.pause_after is None else patch.pause_after.hours,
            "pause_after_attempts": None
            if patch.pause_after is None
            else patch.pause_after.attempts,
            "set_rate": "rate_limit" in patch.model_fields_set,
            "rate_per_second": None if patch.rate_limit is None else patch.rate_limit.per_second,
        },
    )
    now = utcnow()
    resumed = None
    if patch.enabled is False:
        await conn.execute(queries["pause_destination"], {**params, "now": now})
    elif patch.enabled is True:
        cur = await conn.execute(queries["resume_destination"], {**params, "now": now})
        resumed = await cur.fetchone()
        if resumed is not None:
            await conn.execute(queries["release_waiting"], {**params, "now": now})
            await conn.execute(queries["resolve_pause_alert"], {**params, "now": now})
    row = await get_destination(conn, scope, destination_id=destination_id)
    return {**row, "resumed": resumed}


@scoped
async def remove_destination(conn: Conn, scope: OrgScope, *, destination_id: str) -> None:
    """Remove a destination softly, with the routes to it (forms' and streams'); queued
    deliveries end `skipped`; the organization's notices no longer go to it."""
    params = {"id": destination_id, "organization_id": scope.organization_id}
    routed = {"destination_id": destination_id, "organization_id": scope.organization_id}
    # The forms first, as a route's creation takes its form before its destination; then
    # the streams, as their routes' removal moves each one's revision; then the
    # organization, as the notices' fold takes it before the destination.
    await conn.execute(queries["lock_destination_forms"], routed)
    await conn.execute(queries["lock_destination_streams"], routed)
    await conn.execute(queries["forget_notice_destination"], params)
    if await (await conn.execute(queries["delete_destination"], params)).fetchone() is None:
        raise NotFound(f"no destination {destination_id}")
    await conn.execute(queries["delete_destination_routes"], routed)
    await conn.execute(queries["delete_destination_stream_routes"], routed)


async def create_destination(
    change: Change, *, fields: DestinationFields, ctx: ValidationContext
) -> CreatedDestination:
    """Create a destination (`add_destination`) as the change."""
    async with change as conn:
        created = await add_destination(conn, change.scope, fields=fields, ctx=ctx)
        change.subject = created.destination["id"]
    return created


async def update_destination(
    change: Change,
    *,
    destination_id: str,
    patch: DestinationPatch,
    ctx: ValidationContext,
    wake: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """Change a destination (`patch_destination`) as the change, recorded as
    `destination.secret_rotated` when it sets a new secret; a resume calls `wake` (the
    deliverers) once committed."""
    if patch.rotates_secret():
        change.action = "destination.secret_rotated"
    async with change as conn:
        row = await patch_destination(
            conn, change.scope, destination_id=destination_id, patch=patch, ctx=ctx
        )
        if row["resumed"] is not None:
            change.after_commit(wake)
    return row


async def delete_destination(change: Change, *, destination_id: str) -> None:
    """Delete a destination and the routes to it (`remove_destination`) as the change."""
    async with change as conn:
        await remove_destination(conn, change.scope, destination_id=destination_id)


@scoped
async def current_secret(
    conn: Conn, scope: OrgScope, *, destination_id: str
) -> tuple[int, str] | None:
    """The newest `(version, secret)` of a destination (what every attempt uses), if any."""
    cur = await conn.execute(
        queries["current_destination_secret"],
        {"destination_id": destination_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    return None if row is None else (int(row["version"]), str(row["secret"]))


@scoped
async def secret_version(conn: Conn, scope: OrgScope, *, destination_id: str, version: int) -> str:
    """The secret of one version."""
    cur = await conn.execute(
        queries["destination_secret_version"],
        {
            "destination_id": destination_id,
            "organization_id": scope.organization_id,
            "version": version,
        },
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no secret version {version} for destination {destination_id}")
    return str(row["secret"])


@scoped
async def success_rates(conn: Conn, scope: OrgScope, *, now: datetime) -> dict[str, float | None]:
    """Each destination's share of sent deliveries among those finished in the last 7 days."""
    cur = await conn.execute(
        queries["destination_success_rates"],
        {"organization_id": scope.organization_id, "now": now},
    )
    return {
        row["destination_id"]: (row["sent"] / row["finished"] if row["finished"] else None)
        for row in await cur.fetchall()
    }
