"""The management API function: Mangum over the api app, built once per sandbox.

A direct invocation with `{"postbag_command": "migrate"}` applies migrations instead.
"""

import asyncio
from typing import Any

from mangum import Mangum

from core.destinations.registry import DESTINATION_TYPES
from core.http.api_app import create_api_app
from core.outbox.wakeup import prepare_wakeup
from core.platform.admin import is_admin_command, run_admin_command
from core.platform.services import Services
from core.platform.settings import production_settings

settings = production_settings()
services = Services.from_settings(settings, pool_max=2)
# Releasing a submission from quarantine wakes the deliver function as a submit does.
prepare_wakeup(services)
http = Mangum(create_api_app(services), lifespan="off")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if is_admin_command(event):
        command = run_admin_command(services, event, destination_types=DESTINATION_TYPES)
        return asyncio.get_event_loop().run_until_complete(command)
    return http(event, context)
