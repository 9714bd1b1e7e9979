"""The plan table: the one place that says what each plan allows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

PlanName = Literal["free", "pro", "team", "self_hosted"]
PLAN_NAMES: tuple[str, ...] = get_args(PlanName)


@dataclass(frozen=True, slots=True)
class Plan:
    """Limits of one plan; `None` means unlimited."""

    name: str
    max_forms: int | None
    max_destinations: int | None
    monthly_submissions: int | None
    retention_days: int | None


PLANS: dict[str, Plan] = {
    "free": Plan(
        "free", max_forms=3, max_destinations=3, monthly_submissions=100, retention_days=90
    ),
    "pro": Plan(
        "pro", max_forms=50, max_destinations=50, monthly_submissions=10_000, retention_days=365
    ),
    "team": Plan(
        "team", max_forms=500, max_destinations=500, monthly_submissions=100_000, retention_days=730
    ),
    "self_hosted": Plan(
        "self_hosted",
        max_forms=None,
        max_destinations=None,
        monthly_submissions=None,
        retention_days=None,
    ),
}
