"""The spam verdict on one submission (docs/spam.md): the one call the submit path makes,
after the rate limit and before Turnstile and the schema. The first check that applies
decides: the content rules, then nothing (the submission goes on to the later checks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.spam.rules import rule_hit
from core.spam.settings import SpamSettings


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a submission is spam."""

    reason: str


async def spam_verdict(settings: SpamSettings, values: Mapping[str, Any]) -> Verdict | None:
    """The verdict on `values` under a form's spam settings, or None when nothing applies.
    Never raises for anything the values hold."""
    reason = rule_hit(settings, values)
    if reason is not None:
        return Verdict(reason)
    return None
