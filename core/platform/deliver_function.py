"""The cloud's deliver function: the asynchronous invoke that wakes it, and its wake-up event.

The submit path invokes the function named by `POSTBAG_DELIVER_FUNCTION_NAME` with
`InvocationType=Event` (Lambda queues the event and answers 202 at once) through boto3, so
`AWS_ENDPOINT_URL_LAMBDA` redirects it as it does any boto3 client. A wake-up is an
accelerator, never the path a delivery depends on: the minute schedule still runs.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.platform.aws import Bounds, aws_client
from core.platform.logs import log
from core.platform.services import Registry, Services

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

# The longest a wake-up may hold up its caller: past it, the invoke is given up.
INVOKE_TIMEOUT_SECONDS = 0.1
# One sandbox wakes the deliver function at most once per interval: a burst of submits
# costs one invoke. The woken invocation keeps passing for longer than the interval
# (`wake_linger_seconds`), so a submit that the interval kept from invoking is delivered
# by the invocation it would have woken.
WAKE_INTERVAL_SECONDS = 1.0
# Between the passes of a woken invocation that find nothing due.
WAKE_IDLE_PAUSE_SECONDS = 0.2
# What the deliver function's handler recognises as a wake-up (the schedule's events come
# from `aws.events`).
WAKE_SOURCE = "postbag.wakeup"


def wake_linger_seconds() -> float:
    """How long a woken invocation keeps passing: the interval, one idle pause (its last
    pass starts after everything the interval covered), and as much again for the invoke's
    own queueing."""
    return 2 * WAKE_INTERVAL_SECONDS + WAKE_IDLE_PAUSE_SECONDS


def is_wakeup(event: Mapping[str, Any]) -> bool:
    """Whether a deliver function's event is a submit's wake-up (not the schedule's)."""
    return event.get("source") == WAKE_SOURCE


@dataclass(frozen=True, slots=True)
class DeliverFunction:
    """One process's Lambda client, bound to the deliver function's name."""

    name: str
    client: LambdaClient

    def invoke(self) -> bool:
        """Queue one wake-up event (blocking, bounded by the client's timeouts); whether
        Lambda accepted it. A failure is logged and answered False, never raised."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.client.invoke(
                FunctionName=self.name,
                InvocationType="Event",
                Payload=json.dumps({"source": WAKE_SOURCE}).encode(),
            )
        except (BotoCoreError, ClientError) as exc:
            log.warning(
                "could not wake the deliver function; the schedule will deliver",
                extra={"detail": {"error": type(exc).__name__}},
            )
            return False
        return answer["StatusCode"] == 202

    async def wake(self) -> bool:
        """`invoke` off the event loop, given up after INVOKE_TIMEOUT_SECONDS (the thread
        ends by itself within the client's own timeouts)."""
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self.invoke), timeout=INVOKE_TIMEOUT_SECONDS
            )
        except TimeoutError:
            log.warning(
                "waking the deliver function took too long; given up",
                extra={"detail": {"timeout_seconds": INVOKE_TIMEOUT_SECONDS}},
            )
            return False


# The process's client of each function name and endpoint.
_FUNCTIONS: Registry[dict[tuple[str, str | None], DeliverFunction]] = Registry(
    "deliver functions", dict
)


def client_for(services: Services, name: str) -> DeliverFunction:
    """The process's client for the function `name` at the endpoint the environment names,
    built on the first call (a handler builds it at import, so the cold start pays for
    boto3, not the first submit's bound)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_LAMBDA") or os.environ.get("AWS_ENDPOINT_URL")
    key = (name, endpoint)
    functions = services.state(_FUNCTIONS)
    if key not in functions:
        bounds = Bounds(connect=INVOKE_TIMEOUT_SECONDS, read=INVOKE_TIMEOUT_SECONDS, attempts=1)
        functions[key] = DeliverFunction(name, aws_client("lambda", bounds, endpoint_url=endpoint))
    return functions[key]
