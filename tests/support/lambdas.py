"""Calling a real handler module the way the Lambda runtime does."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from core.destinations.http import close_shared_client

EVENTS = Path(__file__).resolve().parents[1] / "events"


@dataclass
class FakeContext:
    """The parts of the Lambda context object the handlers read."""

    function_name: str = "postbag-test"
    aws_request_id: str = "req-1"
    remaining_ms: int = 30_000
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:000000000000:function:postbag-test"
    memory_limit_in_mb: int = 512
    log_group_name: str = "/aws/lambda/postbag-test"
    log_stream_name: str = "stream"
    extra: dict[str, Any] = field(default_factory=dict)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def invoke(
    name: str,
    events: list[dict[str, Any]],
    context: FakeContext,
    monkeypatch: pytest.MonkeyPatch,
    *,
    between: Callable[[int], None] | None = None,
    **env: str,
) -> list[Any]:
    """Cold-start `handlers.<name>` under `env` and call its handler once per event.

    Like the Lambda runtime, one thread imports the module and runs every invocation, so
    the event loop and the pool built at import are reused across warm invocations.
    `between(i)` runs after the i-th invocation (e.g. to restart the database).
    """
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    results: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        sys.modules.pop(f"handlers.{name}", None)
        module: ModuleType | None = None
        try:
            module = importlib.import_module(f"handlers.{name}")
            for index, event in enumerate(events):
                results.append(module.handler(event, context))
                if between is not None:
                    between(index)
        except BaseException as exc:
            failure.append(exc)
        finally:
            if module is not None:
                loop.run_until_complete(module.services.db.close())
            # The sandbox's HTTP client (a test send, an invitation, a wake-up): a frozen
            # sandbox keeps it, a closed loop must not leave it to the garbage collector.
            loop.run_until_complete(close_shared_client())
            loop.close()
            asyncio.set_event_loop(None)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    if failure:
        raise failure[0]
    return results
