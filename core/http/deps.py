"""FastAPI dependencies shared by the apps: the process's services and the clock."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from core.platform.clock import utcnow
from core.platform.services import Services


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
NowDep = Annotated[datetime, Depends(utcnow)]
