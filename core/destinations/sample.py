"""A destination's test send: a submission-shaped sample through the type's adapter now,
nothing stored, answering the status and error class only (`POST /v1/destinations/{id}/test`,
the dashboard's Send test)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import aiohttp
from pydantic import ValidationError

from core.destinations.base import DeliveryContext, ValidationContext
from core.destinations.registry import ADAPTERS
from core.destinations.ssrf import Resolver, system_resolver
from core.platform.clock import iso_ms
from core.platform.db import Conn
from core.platform.errors import InvalidInput, NotFound
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.settings import Settings


def sample_payload(now: datetime) -> dict[str, Any]:
    """What a destination test sends: a submission-shaped body marked `test: true`."""
    return {
        "event": "form.submitted",
        "receipt": "sub_test",
        "form": "frm_test",
        "submitted_at": iso_ms(now),
        "test": True,
        "values": {"email": "visitor@example.com", "message": "A test from Postbag."},
        "attachments": {},
        "meta": {},
    }


@scoped
async def destination_for_test(conn: Conn, scope: OrgScope, destination_id: str) -> dict[str, Any]:
    """A live destination's type, config and current secret, for a test send."""
    params = {"id": destination_id, "organization_id": scope.organization_id}
    row = await (await conn.execute(queries["destination_for_test"], params)).fetchone()
    if row is None:
        raise NotFound(f"no destination {destination_id}")
    return dict(row)


async def send_sample(
    destination: dict[str, Any],
    *,
    settings: Settings,
    http: aiohttp.ClientSession,
    now: datetime,
    resolver: Resolver = system_resolver,
) -> dict[str, Any]:
    """Send a sample through the destination's adapter now (no transaction open); nothing
    is stored."""
    adapter = ADAPTERS[destination["type"]]
    try:
        config = adapter.validate(
            destination["config"],
            ValidationContext(allow_private_targets=settings.allow_private_targets),
        )
    except ValidationError as exc:
        raise InvalidInput(
            "the destination's config is invalid",
            [{"field": "config", "message": str(err["msg"])} for err in exc.errors()],
        ) from None
    ctx = DeliveryContext(
        delivery_id=new_id("dlv"),
        secret=destination["secret"],
        template=None,
        settings=settings,
        http=http,
        resolver=resolver,
    )
    started = time.monotonic()
    result = await adapter.test(config, sample_payload(now), ctx)
    # The status and the error class only: no byte of the receiver's answer comes back, so
    # a test cannot fetch a URL's body.
    return {
        "ok": result.ok,
        "retryable": result.retryable,
        "detail": result.summary,
        "http_status": result.http_status,
        "error_class": result.error_class,
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
