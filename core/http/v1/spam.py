"""`/v1/forms/{id}/spam` and `/v1/spam/model`: what the spam checks caught, and the
organization's learned filter (docs/spam.md)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import problems
from core.owner import spam_report

router = APIRouter(tags=["spam"], responses=problems(401, 503), route_class=AuditedRoute)


class ReasonCount(BaseModel):
    """How many of the form's submissions got this status and reason."""

    status: str
    reason: str | None
    count: int


class ModelState(BaseModel):
    """The organization's learned filter: what it was trained on, and whether it judges."""

    spam_trained: int = Field(description="submissions taught as spam (marks, rule hits)")
    ham_trained: int = Field(description="submissions taught as not spam (releases)")
    tokens: int = Field(description="tokens the model keeps (keyed hashes, never words)")
    max_tokens: int
    min_trained: int = Field(description="it judges once trained on this many of each")
    ready: bool
    updated_at: datetime | None


class FormSpam(BaseModel):
    """A form's submissions of the last 30 days per status and reason, its spam settings'
    learned threshold, and the organization's learned filter."""

    form_id: str
    since: datetime
    counts: list[ReasonCount]
    learned: bool
    learned_threshold: float
    model: ModelState


@router.get("/forms/{form_id}/spam", dependencies=[needs("read")], responses=problems(404, 422))
async def form_spam(form_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep) -> FormSpam:
    """What the form's checks decided over the last 30 days, and the learned filter's state."""
    async with services.db.scoped(scope) as conn:
        report = await spam_report.spam_report(conn, scope, form_id=form_id, now=now)
    return FormSpam.model_validate(report)


@router.delete(
    "/spam/model",
    dependencies=[needs("configure", "spam_filter.reset")],
    status_code=204,
    response_class=Response,
)
async def reset_spam_model(change: ChangeDep) -> None:
    """Forget everything the organization's learned filter was taught; it judges again
    once trained anew."""
    await spam_report.reset_spam_model(change)
