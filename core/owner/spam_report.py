"""What a form's spam checks decided over the last 30 days, with the organization's learned
filter: `GET /v1/forms/{id}/spam` and the dashboard's form page (docs/spam.md#see-and-tune);
the owner's reset of that filter."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from core.owner.changes import Change
from core.owner.forms import get_form
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.spam.model import model_state, reset_model
from core.spam.settings import spam_settings

REPORT_DAYS = 30


@scoped
async def spam_report(
    conn: Conn, scope: OrgScope, *, form_id: str, now: datetime
) -> dict[str, Any]:
    """The form's submissions of the last REPORT_DAYS days per status and reason, its
    learned-filter settings and the organization's model (NotFound for no such form)."""
    form = await get_form(conn, scope, form_id=form_id)
    since = now - timedelta(days=REPORT_DAYS)
    cur = await conn.execute(
        queries["spam_counts"],
        {"form_id": form_id, "organization_id": scope.organization_id, "since": since},
    )
    settings = spam_settings(form["spam"])
    return {
        "form_id": form_id,
        "since": since,
        "counts": await cur.fetchall(),
        "learned": settings.learned,
        "learned_threshold": settings.learned_threshold,
        "model": await model_state(conn, scope.organization_id),
    }


async def reset_spam_model(change: Change) -> None:
    """Forget everything the organization's learned filter was taught (`reset_model`) as
    the change."""
    async with change as conn:
        await reset_model(conn, change.scope.organization_id)
