"""`/v1/usage`: the plan, its limits, and what the organization uses this month."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import REPLICA_READ, problems, replica_lag_headers
from core.owner import usage

router = APIRouter(tags=["usage"], responses=problems(401, 503), route_class=AuditedRoute)


class Limits(BaseModel):
    """What the plan allows; null means unlimited."""

    forms: int | None
    destinations: int | None
    monthly_submissions: int | None
    retention_days: int | None
    spam_retention_days: int = Field(description="spam and quarantined submissions")
    api_keys: int | None = Field(description="live (not revoked) API keys")
    schema_versions_per_form: int | None
    monthly_attachment_bytes: int | None
    streams: int | None = Field(description="live streams")
    monthly_events: int | None = Field(description="stream events stored a month")
    monthly_review_bytes: int | None = Field(
        description="bytes of values of spam, quarantined and over-quota submissions a month"
    )


class Usage(BaseModel):
    """This calendar month's (UTC) usage against the plan."""

    plan: str
    month: str = Field(description="`YYYY-MM`, UTC")
    submissions: int = Field(description="counted submissions this month (`_test` never counts)")
    attachment_bytes: int = Field(description="attachment bytes stored this month")
    review_bytes: int = Field(
        description="bytes of values of spam, quarantined and over-quota submissions this month"
    )
    forms: int
    destinations: int
    api_keys: int
    streams: int
    events: int = Field(description="stream events stored this month (apart from submissions)")
    limits: Limits


@router.get("/usage", dependencies=[needs("read")], responses=REPLICA_READ)
async def get_usage(
    response: Response, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> Usage:
    """The plan, its limits, this month's counted submissions, live forms and destinations."""
    response.headers.update(replica_lag_headers(await services.db.replica_lag()))
    async with services.db.reading(scope) as conn:
        found = await usage.get_usage(conn, scope, now=now)
    plan = found.plan
    return Usage(
        plan=plan.name,
        month=found.month.strftime("%Y-%m"),
        submissions=found.submissions,
        attachment_bytes=found.attachment_bytes,
        review_bytes=found.review_bytes,
        forms=found.forms,
        destinations=found.destinations,
        api_keys=found.api_keys,
        streams=found.streams,
        events=found.events,
        limits=Limits(
            forms=plan.max_forms,
            destinations=plan.max_destinations,
            monthly_submissions=plan.monthly_submissions,
            retention_days=plan.retention_days,
            spam_retention_days=plan.spam_retention_days,
            api_keys=plan.max_api_keys,
            schema_versions_per_form=plan.max_schema_versions,
            monthly_attachment_bytes=plan.monthly_attachment_bytes,
            streams=plan.max_streams,
            monthly_events=plan.monthly_events,
            monthly_review_bytes=plan.monthly_review_bytes,
        ),
    )
