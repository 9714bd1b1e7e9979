"""The deliver tick function: a bounded outbox pass per scheduled invocation, or several
for `POSTBAG_DELIVER_LOOP_SECONDS` (a shorter cadence than the one-minute schedule)."""

from collections.abc import Mapping
from typing import Any

from core.destinations.http import close_shared_client
from core.platform.services import Services
from core.platform.settings import production_settings
from core.ticks.scheduled import LambdaContext, run_scheduled

settings = production_settings()
services = Services.from_settings(settings, pool_max=4)


def handler(_event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Idle keep-alive connections would not outlive the minute until the next trigger.
    return run_scheduled(
        services,
        "deliver",
        context,
        loop_seconds=settings.deliver_loop_seconds,
        cleanup=close_shared_client,
    )
