"""Rows the worker reads, inserted with plain SQL as the submit path would write them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.platform.db import Conn
from core.platform.ids import new_id

WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TELEGRAM_TOKEN = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789"
SUBMITTED_AT = "2026-10-13T09:30:00.000Z"


@dataclass(frozen=True, slots=True)
class Tenant:
    org: str
    form: str


async def make_tenant(conn: Conn, *, plan: str = "self_hosted", name: str = "Acme") -> Tenant:
    org, form = new_id("org"), new_id("frm")
    await conn.execute(
        "INSERT INTO organizations (id, name, plan) VALUES (%(org)s, %(name)s, %(plan)s)",
        {"org": org, "name": name, "plan": plan},
    )
    await conn.execute(
        "INSERT INTO forms (id, organization_id, name) VALUES (%(form)s, %(org)s, 'Contact')",
        {"form": form, "org": org},
    )
    return Tenant(org, form)


async def make_destination(
    conn: Conn,
    tenant: Tenant,
    *,
    type: str = "webhook",
    config: dict[str, Any] | None = None,
    secret: str | None = WHSEC,
) -> tuple[str, str]:
    """A destination with secret version 1 (when given) and a route from the tenant's form."""
    dst, rte = new_id("dst"), new_id("rte")
    await conn.execute(
        "INSERT INTO destinations (id, organization_id, type, name, config)"
        " VALUES (%(dst)s, %(org)s, %(type)s, 'Dest', %(config)s)",
        {"dst": dst, "org": tenant.org, "type": type, "config": json.dumps(config or {})},
    )
    if secret is not None:
        await conn.execute(
            "INSERT INTO destination_secrets (organization_id, destination_id, version, secret)"
            " VALUES (%(org)s, %(dst)s, 1, %(secret)s)",
            {"org": tenant.org, "dst": dst, "secret": secret},
        )
    await conn.execute(
        "INSERT INTO routes (id, organization_id, form_id, destination_id)"
        " VALUES (%(rte)s, %(org)s, %(form)s, %(dst)s)",
        {"rte": rte, "org": tenant.org, "form": tenant.form, "dst": dst},
    )
    return dst, rte


def payload(sub: str, form: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "form.submitted",
        "receipt": sub,
        "form": form,
        "submitted_at": SUBMITTED_AT,
        "test": False,
        "values": values,
        "attachments": {},
        "meta": {"origin": "https://example.com", "referrer": None, "locale": "en"},
    }


async def make_delivery(
    conn: Conn,
    tenant: Tenant,
    dst: str,
    rte: str,
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
    """A submission and its delivery; returns (submission id, delivery id)."""
    sub, dlv = new_id("sub"), new_id("dlv")
    values = values if values is not None else {"email": "a@example.com", "subscribe": True}
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,'
        " flags) VALUES (%(sub)s, %(org)s, %(form)s, 'accepted', %(values)s, '\\x00', %(flags)s)",
        {
            "sub": sub,
            "org": tenant.org,
            "form": tenant.form,
            "values": json.dumps(values),
            "flags": flags or [],
        },
    )
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
        " channel, max_attempts, payload, target, template, secret_version, next_attempt_at)"
        " VALUES (%(dlv)s, %(org)s, %(sub)s, %(rte)s, %(dst)s, %(channel)s, %(max)s,"
        " %(payload)s, %(target)s, %(template)s, %(version)s,"
        " coalesce(%(due)s, now() - interval '1 second'))",
        {
            "dlv": dlv,
            "org": tenant.org,
            "sub": sub,
            "rte": rte,
            "dst": dst,
            "channel": channel,
            "max": max_attempts,
            "payload": json.dumps(payload(sub, tenant.form, values)),
            "target": json.dumps(target),
            "template": json.dumps(template) if template is not None else None,
            "version": secret_version,
            "due": next_attempt_at,
        },
    )
    return sub, dlv


async def make_many(
    conn: Conn, tenant: Tenant, dst: str, rte: str, *, count: int, url: str, due: datetime
) -> None:
    """`count` due webhook deliveries in two statements (races, storms, fairness)."""
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,'
        " received_at)"
        " SELECT 'sub_' || %(form)s || '_' || i, %(org)s, %(form)s, 'accepted',"
        " jsonb_build_object('n', i), '\\x00', %(due)s FROM generate_series(1, %(count)s) i",
        {"org": tenant.org, "form": tenant.form, "count": count, "due": due},
    )
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
        " channel, max_attempts, payload, target, secret_version, next_attempt_at)"
        " SELECT 'dlv_' || %(rte)s || '_' || i, %(org)s, 'sub_' || %(form)s || '_' || i,"
        " %(rte)s, %(dst)s, 'webhook', 10,"
        " jsonb_build_object('event', 'form.submitted', 'receipt', 'sub_' || %(form)s || '_' || i,"
        "   'form', %(form)s, 'values', jsonb_build_object('n', i)),"
        " jsonb_build_object('url', %(url)s::text), 1, %(due)s"
        " FROM generate_series(1, %(count)s) i",
        {
            "org": tenant.org,
            "form": tenant.form,
            "rte": rte,
            "dst": dst,
            "count": count,
            "url": url,
            "due": due,
        },
    )


async def api_key(conn: Conn, tenant: Tenant) -> str:
    """A live API key of the tenant's organization."""
    from core.owner.organizations import create_api_key
    from core.platform.scope import OrgScope

    return (await create_api_key(conn, OrgScope(tenant.org), name="test")).secret
