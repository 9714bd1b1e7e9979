"""What a process builds once and every request or tick shares: settings, the pool, and the
rooms' process-wide state (the forms kept for later submits, the deliver function's client…)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from core.platform.db import Database
from core.platform.settings import Settings

T = TypeVar("T")


class Registry(Generic[T]):
    """One kind of process-wide state, declared once by the room that keeps it; each
    Services holds its own, built by `build` on first use (`Services.state`)."""

    __slots__ = ("build", "name")

    def __init__(self, name: str, build: Callable[[], T]) -> None:
        self.name = name
        self.build = build

    def __repr__(self) -> str:
        return f"Registry({self.name!r})"


@dataclass(slots=True)
class Services:
    settings: Settings
    db: Database
    # The heartbeat name of the delivery worker this process runs (None: it runs none).
    worker: str | None = None
    # The rooms' process-wide state by registry: it lives and goes with the services.
    _state: dict[Registry[Any], Any] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def from_settings(cls, settings: Settings, *, pool_max: int | None = None) -> Services:
        """Build the services of one process (a Lambda sandbox, the runner, a CLI call)."""
        db = Database(
            settings.require_database_url(),
            max_size=pool_max or settings.db_pool_max,
            connect_timeout=settings.db_connect_timeout,
            wait_timeout=settings.db_connect_timeout,
            transaction_pooler=settings.transaction_pooler,
            read_url=settings.read_database_url,
        )
        return cls(settings=settings, db=db)

    def state(self, registry: Registry[T]) -> T:
        """This process's state of `registry` (built on first use)."""
        if registry not in self._state:
            self._state[registry] = registry.build()
        value: T = self._state[registry]
        return value
