"""The registry of scheduled passes, and running one pass with its heartbeat.

Each tick is a `core` function taking the services, `now` and a time budget; its handler,
`postbag worker` (and the local runner) and `postbag tick NAME` all run it through
`run_pass`, except the worker's deliver pass, which it can stop, and which records the same
heartbeat through `record_heartbeat`. The retention tick runs the maintenance passes listed
in `core/ticks/retention.py` (`PASSES`).
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
from core.ticks import retention
from core.ticks.digests import digest_pass

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
            Tick("retention", retention.EVERY.total_seconds(), retention.retention_pass),
        )
    }
)


def worker_name(role: str | None = None) -> str:
    """This process's heartbeat name: `host:pid`, prefixed by its role (`worker@host:pid`)."""
    where = f"{socket.gethostname()}:{os.getpid()}"
    return where if role is None else f"{role}@{where}"


async def record_heartbeat(
    services: Services,
    tick: Tick,
    *,
    now: datetime,
    result: Mapping[str, Any],
    worker_id: str | None = None,
) -> None:
    """Record that the worker `worker_id` (default: this process) finished a pass of `tick`."""
    async with services.db.connection() as conn:
        await conn.execute(
            queries["record_heartbeat"],
            {
                "worker_id": worker_id or worker_name(),
                "tick": tick.name,
                "now": now,
                "last_pass": json.dumps(result),
            },
        )
    level = logging.DEBUG if did_nothing(result) else logging.INFO
    log.log(level, "tick pass", extra={"tick": tick.name, "detail": dict(result)})


async def run_pass(
    services: Services,
    tick: Tick,
    *,
    now: datetime,
    budget: float,
    worker_id: str | None = None,
) -> Mapping[str, Any]:
    """Run one bounded pass of `tick`, then record this worker's heartbeat."""
    result = await tick.run(services, now, budget)
    await record_heartbeat(services, tick, now=now, result=result, worker_id=worker_id)
    return result


# Entries of a pass's result that state its settings rather than count its work.
_SETTINGS_ENTRIES = frozenset({"batch_size"})


def did_nothing(result: Mapping[str, Any]) -> bool:
    """Whether a pass found no work: every count of its result is zero (logged at debug)."""
    return not any(value for key, value in result.items() if key not in _SETTINGS_ENTRIES)
