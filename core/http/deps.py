"""FastAPI dependencies shared by the apps: the process's services and the clock."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from core.intake.visitor import client_address
from core.owner.throttle import throttle_client
from core.platform.clock import utcnow
from core.platform.services import Services


# Both are coroutines: FastAPI runs a plain function dependency on its thread pool, a
# thread hop per dependency of every request.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def request_time() -> datetime:
    """The time a request is handled at (`core.platform.clock.utcnow`)."""
    return utcnow()


ServicesDep = Annotated[Services, Depends(get_services)]
NowDep = Annotated[datetime, Depends(request_time)]


def throttled_client(request: Request, services: Services) -> bytes:
    """The request's client as the sign-in and bad-key throttles count it (see
    `core.owner.throttle`), its address found as the submit path finds it."""
    peer = request.client.host if request.client else None
    address = client_address(
        peer, request.headers.get("x-forwarded-for"), services.settings.trusted_proxies
    )
    return throttle_client(address, services.settings.require_secret_key())
