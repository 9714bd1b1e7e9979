"""A form's schema on its page: the versions with their source, adopting a suggestion, and
the drift the form's submissions showed against it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, page_needs, see_other
from core.owner import form_schemas
from core.platform.db import Conn
from core.platform.scope import OrgScope

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)

# The form page shows this many of the latest versions; the API lists them all.
SHOWN_VERSIONS = 20


async def schema_section(
    conn: Conn, scope: OrgScope, *, form_id: str, now: datetime
) -> dict[str, Any]:
    """The latest SHOWN_VERSIONS versions, newest first, and the current one (the latest
    `manual` version) even when older, each with its JSON; how many versions are not shown;
    the drift summary."""
    shown = await form_schemas.recent_schemas(conn, scope, form_id=form_id, limit=SHOWN_VERSIONS)
    current = next((row for row in shown if row["source"] == "manual"), None)
    total = shown[0]["total"] if shown else 0
    return {
        "versions": [
            {**row, "text": json.dumps(row["schema"], indent=2, ensure_ascii=False)}
            for row in shown
        ],
        "current": current["version"] if current else None,
        "hidden": total - len(shown),
        "drift": await form_schemas.drift_summary(conn, scope, form_id=form_id, now=now),
    }


@router.post(
    "/forms/{form_id}/schemas/{version}/adopt",
    dependencies=[page_needs("configure", "schema.adopted", subject="form_id")],
)
async def schema_adopt(
    change: ChangeDep, _posted: CheckedForm, form_id: str, version: int
) -> Response:
    """Adopt a version, as `POST /v1/forms/{id}/schemas/{version}/adopt`: a `manual` copy."""
    await form_schemas.adopt_schema(change, form_id=form_id, version=version)
    return see_other(f"/app/forms/{form_id}#schema")
