"""Inference: a suggested schema version appended for each `observe` form whose observed
shape changed. A form is read again only once new submissions arrived; inference runs in a
thread (docs/scheduled.md#schema-inference-housekeeping)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from core.owner.schema_versions import versions_full
from core.platform.db import Conn
from core.platform.logs import log
from core.platform.queries import queries
from core.schemas.inference import infer_schema
from core.ticks.maintenance import PassContext, RetentionOptions


async def run(ctx: PassContext) -> Counter[str]:
    appended = 0
    after: str | None = None
    async with ctx.services.db.connection() as conn:
        while time.monotonic() < ctx.deadline:
            cur = await conn.execute(
                queries["observed_forms"], {"limit": ctx.options.forms_per_pass, "after": after}
            )
            forms = await cur.fetchall()
            for form in forms:
                appended += await _infer_one(conn, form, now=ctx.now, options=ctx.options)
            if len(forms) < ctx.options.forms_per_pass:
                break
            after = forms[-1]["id"]
    return Counter(schemas_inferred=appended)


def _shape(schema: Mapping[str, Any] | None) -> Any:
    """What decides whether a schema changed: its properties and required fields."""
    if not schema:
        return None
    return json.dumps(
        {"properties": schema.get("properties"), "required": sorted(schema.get("required") or [])},
        sort_keys=True,
    )


async def _infer_one(
    conn: Conn, form: Mapping[str, Any], *, now: datetime, options: RetentionOptions
) -> int:
    rows = await (
        await conn.execute(
            queries["observed_values"],
            {
                "form_id": form["id"],
                "since": form["version_at"],
                "limit": options.inference_sample,
            },
        )
    ).fetchall()
    samples = [row["values"] for row in rows if isinstance(row["values"], dict)]
    await conn.execute(
        queries["mark_inference_scanned"],
        {
            "form_id": form["id"],
            "organization_id": form["organization_id"],
            # The newest submission read (they come newest first), not `now`: one received
            # just before `now` but committed after this read is read next pass.
            "through": rows[0]["received_at"] if rows else now,
        },
    )
    if not samples:
        return 0
    if versions_full(form["plan"], form["version"] or 0):
        return 0  # the plan's versions per form are used up: the form keeps its latest
    schema = await asyncio.to_thread(infer_schema, samples)
    if _shape(schema) == _shape(form["schema"]):
        return 0
    added = await (
        await conn.execute(
            queries["append_suggested_schema"],
            {
                "organization_id": form["organization_id"],
                "form_id": form["id"],
                "version": (form["version"] or 0) + 1,
                "schema": Jsonb(schema),
                "now": now,
            },
        )
    ).fetchone()
    if added is None:
        return 0  # another pass appended this version first
    log.info(
        "schema suggested",
        extra={
            "org_id": form["organization_id"],
            "form_id": form["id"],
            "detail": {"version": added["version"]},
        },
    )
    return 1
