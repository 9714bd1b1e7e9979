"""What one pass of the outbox worker is given and shares: the options of a `Deliverer` and
the state its producer and executor work on (core/outbox/worker.py runs the pass)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import aiohttp

from core.destinations.ssrf import Resolver
from core.outbox.breaker import Breaker
from core.outbox.completer import Completer
from core.platform.services import Services
from core.platform.settings import Settings


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How much a pass takes on at once."""

    batch: int = 200
    concurrency: int = 32
    # Sends in flight per destination at most; a destination answering slower than
    # `slow_send` seconds gets fewer (core/outbox/limits.py).
    per_destination: int = 8
    slow_send: float = 1.0
    lease: timedelta = timedelta(minutes=5)
    timeout: float = 10.0
    # Time kept back at the end of the budget to write the last outcomes.
    margin: float = 2.0
    # Whether sends still in flight when the budget ends are stopped and their claims given
    # back (the ticks: a Lambda invocation ends at its deadline), or awaited (a soft budget
    # that only stops new claims).
    strict_budget: bool = False
    # After a stop signal, how long sends already under way may take to finish before they
    # are stopped and given back.
    drain: float = 10.0


@dataclass
class PassState:
    """What the producer and the executor of one pass share."""

    # The pass's time: the `now` it was given, moved on by the monotonic clock.
    now: Callable[[], datetime]
    services: Services
    options: WorkerOptions
    resolver: Resolver
    rng: random.Random
    http: aiohttp.ClientSession
    stats: Counter[str]
    completer: Completer
    breaker: Breaker
    # Sends in flight, all destinations and overlapping passes together.
    sends: asyncio.Semaphore
    # The process's claims not yet ended, overlapping passes together (the claim window).
    claimed: set[asyncio.Task[None]]
    # Set to stop the pass early (a worker shutting down): no new claims or sends.
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # Claims whose send has begun (the others can be given back without a duplicate).
    started: set[str] = field(default_factory=set)
    # Sends in flight per destination.
    gates: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    # The settings each organization's email goes out with (its own sender, or the
    # installation's), read once per organization and pass (core/outbox/executor.py).
    email_settings: dict[str, Settings] = field(default_factory=dict)
