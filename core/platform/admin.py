"""Operator commands a cloud deployment runs by invoking a function directly.

`aws lambda invoke --function-name <api function> --payload '{"postbag_command": "migrate"}'`
applies pending migrations from inside the VPC that reaches the database; the deploy guide
runs it before each upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.platform.db import connect
from core.platform.errors import InvalidInput
from core.platform.migrate import migrate
from core.platform.services import Services

COMMANDS = ("migrate",)


def is_admin_command(event: Mapping[str, Any]) -> bool:
    """Whether a Lambda event is an operator command rather than an HTTP request."""
    return "postbag_command" in event


async def run_admin_command(
    services: Services, event: Mapping[str, Any], *, destination_types: Mapping[str, int]
) -> dict[str, Any]:
    """Run the command an operator invoked; the result is the invocation's answer.
    `migrate` records `destination_types` (the code's types and attempt limits)."""
    command = event.get("postbag_command")
    if command not in COMMANDS:
        raise InvalidInput(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    conn = await connect(services.settings.migration_url())
    try:
        applied = await migrate(conn, destination_types=destination_types)
    finally:
        await conn.close()
    return {"command": command, "applied": applied}
