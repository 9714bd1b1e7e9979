"""The digest tick function: one bounded pass closing digest periods per scheduled event."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping
from typing import Any, Protocol

from core.services import Services, utcnow
from core.settings import load_settings
from core.ticks import TICKS, run_pass

# Time kept back from the invocation for the heartbeat.
SAFETY_MARGIN_MS = 5_000


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


services = Services.from_settings(load_settings(), pool_max=2)
tick = TICKS["digest"]


def _event_loop() -> asyncio.AbstractEventLoop:
    """The sandbox's loop, reused by warm invocations (the pool is bound to it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_event_loop()


def handler(_event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    budget = max(context.get_remaining_time_in_millis() - SAFETY_MARGIN_MS, 1_000) / 1000
    return dict(
        _event_loop().run_until_complete(run_pass(services, tick, now=utcnow(), budget=budget))
    )
