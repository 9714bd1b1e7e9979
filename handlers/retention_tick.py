"""The retention tick function: one bounded pass per scheduled invocation."""

from collections.abc import Mapping
from typing import Any

from core.platform.services import Services
from core.platform.settings import production_settings
from core.ticks.scheduled import LambdaContext, run_scheduled

services = Services.from_settings(production_settings(), pool_max=2)


def handler(_event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_scheduled(services, "retention", context)
