"""The registry of scheduled passes, and running one pass with its heartbeat.

Each tick is a `core` function taking the services, `now` and a time budget; its handler,
the local runner's cron loop and `postbag tick NAME` all run it through `run_pass`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from core.outbox.worker import deliver_pass
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services
from core.platform.vocabulary import TickName
from core.ticks.digests import digest_pass
from core.ticks.retention import retention_pass

TickRun = Callable[[Services, datetime, float], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Tick:
    """A scheduled pass: what it is called, how often the runner fires it, what it runs."""

    name: TickName
    every_seconds: float
    run: TickRun


TICKS: Mapping[str, Tick] = MappingProxyType(
    {
        tick.name: tick
        for tick in (
            Tick("deliver", 15.0, deliver_pass),
            Tick("digest", 60.0, digest_pass),
            Tick("retention", 60.0, retention_pass),
        )
    }
)

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


async def run_pass(
    services: Services, tick: Tick, *, now: datetime, budget: float
) -> Mapping[str, Any]:
    """Run one bounded pass of `tick`, then record this worker's heartbeat."""
    result = await tick.run(services, now, budget)
    async with services.db.connection() as conn:
        await conn.execute(
            queries["record_heartbeat"],
            {
                "worker_id": WORKER_ID,
                "tick": tick.name,
                "now": now,
                "last_pass": json.dumps(result),
            },
        )
    level = logging.DEBUG if did_nothing(result) else logging.INFO
    log.log(level, "tick pass", extra={"tick": tick.name, "detail": dict(result)})
    return result


# Entries of a pass's result that state its settings rather than count its work.
_SETTINGS_ENTRIES = frozenset({"batch_size"})


def did_nothing(result: Mapping[str, Any]) -> bool:
    """Whether a pass found no work: every count of its result is zero (logged at debug)."""
    return not any(value for key, value in result.items() if key not in _SETTINGS_ENTRIES)
