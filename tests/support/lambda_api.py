"""A local Lambda API double on loopback: the Invoke REST call, and a sandbox running a
real handler module for each asynchronous invocation it accepted.

boto3 reaches it through `AWS_ENDPOINT_URL_LAMBDA` (`lambda_env`). `POST
/2015-03-31/functions/{name}/invocations` with `X-Amz-Invocation-Type: Event` is answered
`202` at once, as Lambda does, and the event is queued for the sandbox, which runs the
invocations one at a time (a function with one instance).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from tests.support.lambdas import FakeContext
from tests.support.peers import Answer, Request, receiver

_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")


@dataclass
class Invocation:
    function: str
    payload: dict[str, Any]
    at: float  # monotonic seconds, when the double accepted it


@dataclass
class LambdaApi:
    url: str
    invocations: list[Invocation] = field(default_factory=list)
    # What each run of the sandbox's handler returned, in order, and when each began and
    # ended (wall-clock seconds).
    results: list[Any] = field(default_factory=list)
    runs: list[tuple[float, float]] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: threading.Condition = field(default_factory=threading.Condition)
    pending: int = 0
    events: queue.Queue[dict[str, Any] | None] = field(default_factory=queue.Queue)

    def enqueue(self, event: dict[str, Any]) -> None:
        """Run the sandbox's handler for `event` once its earlier invocations have run (as
        an accepted invoke, or the schedule, does)."""
        with self.idle:
            self.pending += 1
        self.events.put(event)

    def wait_idle(self, timeout: float = 60) -> None:
        """Until every accepted invocation has run."""
        with self.idle:
            if not self.idle.wait_for(lambda: self.pending == 0, timeout):
                raise TimeoutError("the sandbox did not finish its invocations")
        if self.failures:
            raise self.failures[0]


def lambda_env(api: LambdaApi | str) -> dict[str, str]:
    """The environment that points boto3's Lambda client at the double (or any URL)."""
    return {
        "AWS_ENDPOINT_URL_LAMBDA": api.url if isinstance(api, LambdaApi) else api,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }


class _Sandbox:
    """One thread importing `handlers.<module>` once and running it per queued event, on
    one event loop reused by warm invocations (as the Lambda runtime does)."""

    def __init__(self, module: str, api: LambdaApi) -> None:
        self.module = module
        self.api = api
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        handler: ModuleType | None = None
        try:
            while (event := self.api.events.get()) is not None:
                try:
                    if handler is None:
                        sys.modules.pop(f"handlers.{self.module}", None)
                        handler = importlib.import_module(f"handlers.{self.module}")
                    began = time.time()
                    result = handler.handler(event, FakeContext(function_name=self.module))
                    with self.api.lock:
                        self.api.results.append(result)
                        self.api.runs.append((began, time.time()))
                except BaseException as exc:
                    with self.api.lock:
                        self.api.failures.append(exc)
                finally:
                    with self.api.idle:
                        self.api.pending -= 1
                        self.api.idle.notify_all()
        finally:
            if handler is not None:
                loop.run_until_complete(handler.services.db.close())
            loop.close()
            asyncio.set_event_loop(None)


@contextmanager
def lambda_api(
    module: str = "deliver_tick", *, answer: Callable[[Request], Answer] | None = None
) -> Iterator[LambdaApi]:
    """The double, running `handlers.<module>` for each accepted event; `answer` replaces
    its answers (a double that hangs or fails), and then nothing runs."""
    api = LambdaApi(url="")
    sandbox = _Sandbox(module, api)

    def invoke(request: Request) -> Answer:
        match = _INVOKE.match(request.path.split("?", 1)[0])
        if request.method != "POST" or match is None:
            return 404, {}, b'{"Type": "User", "message": "not found"}'
        payload = json.loads(request.body or b"{}")
        with api.lock:
            api.invocations.append(Invocation(match.group(1), payload, time.monotonic()))
        if answer is not None:
            return answer(request)
        if request.headers.get("X-Amz-Invocation-Type") != "Event":
            return 400, {}, b'{"Type": "User", "message": "only Event invocations"}'
        api.enqueue(payload)
        return 202, {"Content-Type": "application/json"}, b""

    with receiver(invoke) as peer:
        api.url = peer.url
        sandbox.thread.start()
        try:
            yield api
        finally:
            api.events.put(None)
            sandbox.thread.join(timeout=60)
