"""The deliver tick function: a bounded outbox pass per scheduled invocation, or several
for `POSTBAG_DELIVER_LOOP_SECONDS` (a shorter cadence than the one-minute schedule); a
submit's wake-up keeps passing for a couple of seconds (`core.platform.deliver_function`)."""

from collections.abc import Mapping
from typing import Any

from core.destinations.http import close_shared_client
from core.platform.deliver_function import WAKE_IDLE_PAUSE_SECONDS, is_wakeup, wake_linger_seconds
from core.platform.services import Services
from core.platform.settings import production_settings
from core.ticks.scheduled import LambdaContext, run_scheduled

settings = production_settings()
services = Services.from_settings(settings, pool_max=4)


def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    woken = is_wakeup(event)
    # Idle keep-alive connections would not outlive the minute until the next trigger.
    return run_scheduled(
        services,
        "deliver",
        context,
        loop_seconds=wake_linger_seconds() if woken else settings.deliver_loop_seconds,
        idle_pause=WAKE_IDLE_PAUSE_SECONDS if woken else None,
        cleanup=close_shared_client,
    )
