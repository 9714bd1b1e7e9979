"""Test data for one tenant: organizations and keys through core, the rest as plain SQL rows.

Rows below the organization are inserted as the owner, the way the submit path and the
management API would have written them, so a test can set any column a state needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.destinations.base import ValidationContext
from core.destinations.chat import redact_url
from core.destinations.registry import ADAPTERS
from core.owner.credentials import hash_password, new_token, token_hash
from core.owner.hooks import HookFields, add_hook
from core.owner.organizations import create_api_key, create_organization
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.scope import OrgScope
from core.platform.vocabulary import Role

WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TELEGRAM_TOKEN = "123456789:AAH-telegram-bot-token-0123456789"
SUBMITTED_AT = "2026-10-13T09:30:00.000Z"
_DEFAULT_WEBHOOK_URL = "https://hooks.example.com/postbag?token=abc"


@dataclass(frozen=True, slots=True)
class Tenant:
    """An organization and one live API key for it."""

    scope: OrgScope
    key: str

    @property
    def org(self) -> str:
        return self.scope.organization_id

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def make_tenant(conn: Conn, name: str = "Acme", plan: str = "free") -> Tenant:
    """An organization and a live API key for it with the owner role (as `postbag
    create-org` makes), made by core."""
    async with conn.transaction():
        scope = await create_organization(conn, name=name, plan=plan)
        key = await create_api_key(conn, scope, name="test", role="owner")
    return Tenant(scope, key.secret)


async def _insert(conn: Conn, table: str, row: dict[str, Any]) -> None:
    names = ", ".join(f'"{name}"' for name in row)
    placeholders = ", ".join(f"%({name})s" for name in row)
    await conn.execute(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", row)


def _as_json(row: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if key in row and row[key] is not None and not isinstance(row[key], str):
            row[key] = json.dumps(row[key])


async def make_form(conn: Conn, tenant: Tenant, **columns: Any) -> str:
    """A form named Contact with default settings, overridden by `columns`."""
    row: dict[str, Any] = {
        "id": columns.pop("id", None) or new_id("frm"),
        "organization_id": tenant.org,
        "name": "Contact",
        **columns,
    }
    _as_json(row, "labels", "file_fields", "ack_email", "autoresponse")
    await _insert(conn, "forms", row)
    return str(row["id"])


async def add_schema(
    conn: Conn, tenant: Tenant, form: str, schema: dict[str, Any], *, source: str = "manual"
) -> int:
    """The form's next schema version, written with SQL (past the checks a save makes, as
    an older row could be); returns its number."""
    cur = await conn.execute(
        "INSERT INTO form_schemas (organization_id, form_id, version, schema, source) "
        "SELECT %(org)s, %(form)s, coalesce(max(version), 0) + 1, %(schema)s, %(source)s "
        "FROM form_schemas WHERE form_id = %(form)s RETURNING version",
        {"org": tenant.org, "form": form, "schema": json.dumps(schema), "source": source},
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["version"])


async def make_destination(
    conn: Conn,
    tenant: Tenant,
    *,
    type: str = "webhook",
    config: dict[str, Any] | None = None,
    secrets: tuple[str, ...] = (WEBHOOK_SECRET,),
    enabled: bool = True,
    deleted_at: datetime | None = None,
) -> str:
    """A destination named Hook (a webhook by default) with its secret versions 1..n."""
    destination = new_id("dst")
    row: dict[str, Any] = {
        "id": destination,
        "organization_id": tenant.org,
        "type": type,
        "name": "Hook",
        "config": json.dumps({"url": _DEFAULT_WEBHOOK_URL} if config is None else config),
        "enabled": enabled,
        "deleted_at": deleted_at,
    }
    if not enabled:
        # Turned off here is paused by its owner (0028; a schema before it has no reason).
        row.update(paused_reason="owner", paused_at=datetime.now(UTC))
    await _insert(conn, "destinations", row)
    for version, secret in enumerate(secrets, start=1):
        await _insert(
            conn,
            "destination_secrets",
            {
                "organization_id": tenant.org,
                "destination_id": destination,
                "version": version,
                "secret": secret,
            },
        )
    return destination


async def make_hook(conn: Conn, tenant: Tenant, url: str, event: str, **source: str) -> str:
    """A REST hook of `event` to `url` (loopback allowed), made by core; returns its id."""
    fields = HookFields.model_validate({"target_url": url, "event": event, **source})
    ctx = ValidationContext(allow_private_targets=True)
    async with conn.transaction():
        created = await add_hook(conn, tenant.scope, fields=fields, ctx=ctx, now=utcnow())
    return str(created.hook["id"])


async def make_route(
    conn: Conn, tenant: Tenant, form: str, destination: str, **columns: Any
) -> str:
    """A route from `form` to `destination`, immediate and enabled unless `columns` say."""
    row: dict[str, Any] = {
        "id": new_id("rte"),
        "organization_id": tenant.org,
        "form_id": form,
        "destination_id": destination,
        **columns,
    }
    _as_json(row, "template")
    await _insert(conn, "routes", row)
    return str(row["id"])


async def make_route_to(
    conn: Conn,
    tenant: Tenant,
    form: str,
    *,
    type: str = "webhook",
    config: dict[str, Any] | None = None,
    secrets: tuple[str, ...] = (WEBHOOK_SECRET,),
) -> tuple[str, str]:
    """A new destination and a route to it from `form`; returns (destination, route)."""
    destination = await make_destination(conn, tenant, type=type, config=config, secrets=secrets)
    return destination, await make_route(conn, tenant, form, destination)


async def setup_form(
    conn: Conn, *, name: str = "Acme", plan: str = "free", routes: int = 1, **form_columns: Any
) -> tuple[Tenant, str]:
    """A new tenant with one form and `routes` webhook routes from it; returns (tenant, form)."""
    tenant = await make_tenant(conn, name=name, plan=plan)
    form = await make_form(conn, tenant, **form_columns)
    for _ in range(routes):
        await make_route_to(conn, tenant, form)
    return tenant, form


async def make_submission(
    conn: Conn, tenant: Tenant, form: str, values: dict[str, Any] | None, **columns: Any
) -> str:
    """A submission of `form`, accepted unless `columns` say, with these values (or none)."""
    row: dict[str, Any] = {
        "id": columns.pop("id", None) or new_id("sub"),
        "organization_id": tenant.org,
        "form_id": form,
        "status": "accepted",
        "values": None if values is None else json.dumps(values),
        "payload_hash": b"\x00",
        **columns,
    }
    await _insert(conn, "submissions", row)
    return str(row["id"])


async def make_delivery(
    conn: Conn,
    tenant: Tenant,
    form: str,
    destination: str,
    route: str,
    *,
    target: dict[str, Any],
    channel: str = "webhook",
    values: dict[str, Any] | None = None,
    template: dict[str, Any] | None = None,
    max_attempts: int = 10,
    next_attempt_at: datetime | None = None,
    flags: list[str] | None = None,
    secret_version: int | None = 1,
) -> tuple[str, str]:
    """A submission and its delivery, due a second ago unless `next_attempt_at`.

    Returns (submission, delivery).
    """
    values = values if values is not None else {"email": "a@example.com", "subscribe": True}
    template = template or {}
    # As the submit path writes them: the form's name and labels and the visitor's field
    # order once on the submission, the route's subject and text on the delivery.
    submission = await make_submission(
        conn,
        tenant,
        form,
        values,
        flags=flags or [],
        received_at=datetime.fromisoformat(SUBMITTED_AT),
        meta=json.dumps({"origin": "https://example.com", "referrer": None, "locale": "en"}),
        field_order=template.get("field_order", list(values)),
        form_snapshot=json.dumps(
            {
                "form_name": template.get("form_name"),
                "labels": template.get("labels") or {},
                "consent": None,
            }
        ),
    )
    delivery = new_id("dlv")
    routed = {key: template[key] for key in ("subject", "text") if key in template}
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
        " channel, max_attempts, target, template, secret_version, next_attempt_at)"
        " VALUES (%(dlv)s, %(org)s, %(sub)s, %(rte)s, %(dst)s, %(channel)s, %(max)s,"
        " %(target)s, %(template)s, %(version)s,"
        " coalesce(%(due)s, now() - interval '1 second'))",
        {
            "dlv": delivery,
            "org": tenant.org,
            "sub": submission,
            "rte": route,
            "dst": destination,
            "channel": channel,
            "max": max_attempts,
            "target": json.dumps(target),
            "template": json.dumps(routed) if routed else None,
            "version": secret_version,
            "due": next_attempt_at,
        },
    )
    return submission, delivery


async def add_attempt(
    conn: Conn,
    tenant: Tenant,
    delivery: str,
    *,
    attempt: int,
    at: datetime,
    duration_ms: int,
    outcome: str,
) -> None:
    """One recorded attempt of `delivery`, as the worker would have written it."""
    await conn.execute(
        "INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,"
        " started_at, duration_ms, outcome) VALUES (%(org)s, %(dlv)s, %(n)s,"
        " gen_random_uuid(), %(at)s, %(ms)s, %(outcome)s)",
        {
            "org": tenant.org,
            "dlv": delivery,
            "n": attempt,
            "at": at,
            "ms": duration_ms,
            "outcome": outcome,
        },
    )


async def make_deliveries(
    conn: Conn,
    tenant: Tenant,
    form: str,
    destination: str,
    route: str,
    *,
    count: int,
    url: str,
    due: datetime,
) -> None:
    """`count` due webhook deliveries in two statements (races, storms, fairness)."""
    params = {
        "org": tenant.org,
        "form": form,
        "rte": route,
        "dst": destination,
        "count": count,
        "url": url,
        "due": due,
    }
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,'
        " received_at)"
        " SELECT 'sub_' || %(form)s || '_' || i, %(org)s, %(form)s, 'accepted',"
        " jsonb_build_object('n', i), '\\x00', %(due)s FROM generate_series(1, %(count)s) i",
        params,
    )
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
        " channel, max_attempts, target, secret_version, next_attempt_at)"
        " SELECT 'dlv_' || %(rte)s || '_' || i, %(org)s, 'sub_' || %(form)s || '_' || i,"
        " %(rte)s, %(dst)s, 'webhook', 10, jsonb_build_object('url', %(url)s::text), 1, %(due)s"
        " FROM generate_series(1, %(count)s) i",
        params,
    )


async def make_chat_delivery(
    conn: Conn,
    kind: str,
    url: str,
    values: dict[str, Any],
    *,
    labels: dict[str, str] | None = None,
    template: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """A delivery to a chat type (`kind`) as the submit path writes it: the redacted URL as
    its target, the real one as secret version 1; returns (submission, delivery)."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    target = {"url": redact_url(url)}
    dst, rte = await make_route_to(conn, tenant, form, type=kind, config=target, secrets=(url,))
    return await make_delivery(
        conn,
        tenant,
        form,
        dst,
        rte,
        channel=kind,
        target=target,
        values=values,
        template=template
        or {"labels": labels or {}, "field_order": list(values), "form_name": "Contact"},
        max_attempts=ADAPTERS[kind].max_attempts,
    )


async def make_member(
    conn: Conn,
    tenant: Tenant,
    *,
    role: Role = "owner",
    email: str | None = None,
    password: str | None = None,
    totp_secret: str | None = None,
) -> str:
    """A member of the tenant's organization with `role` (made, or joining when `email` is
    a member's already); a password hashed at the test-only cost."""
    email = email or f"{role}-{new_id('mem')[-8:]}@example.test"
    hashed = None if password is None else await hash_password(password, "test_only")
    await conn.execute(
        "INSERT INTO members (id, email, password_hash, totp_secret) "
        "VALUES (%(id)s, %(email)s, %(hash)s, %(totp)s) ON CONFLICT DO NOTHING",
        {"id": new_id("mem"), "email": email, "hash": hashed, "totp": totp_secret},
    )
    cur = await conn.execute("SELECT id FROM members WHERE lower(email) = lower(%s)", [email])
    row = await cur.fetchone()
    assert row is not None
    await _insert(
        conn, "memberships", {"organization_id": tenant.org, "member_id": row["id"], "role": role}
    )
    return str(row["id"])


async def sign_in_link(conn: Conn, member_id: str) -> str:
    """The path of a one-time sign-in link for the member (as `postbag dev` prints)."""
    token = new_token()
    await _insert(
        conn,
        "member_links",
        {
            "token_hash": token_hash(token),
            "member_id": member_id,
            "kind": "sign_in",
            "expires_at": datetime.now(UTC) + timedelta(hours=1),
        },
    )
    return f"/app/link/{token}"
