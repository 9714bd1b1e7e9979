"""What a process builds once and every request or tick shares: settings and the pool."""

from __future__ import annotations

from dataclasses import dataclass

from core.platform.db import Database
from core.platform.settings import Settings


@dataclass(slots=True)
class Services:
    settings: Settings
    db: Database
    # The heartbeat name of the delivery worker this process runs (None: it runs none).
    worker: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, pool_max: int | None = None) -> Services:
        """Build the services of one process (a Lambda sandbox, the runner, a CLI call)."""
        db = Database(
            settings.require_database_url(),
            max_size=pool_max or settings.db_pool_max,
            connect_timeout=settings.db_connect_timeout,
            wait_timeout=settings.db_connect_timeout,
            transaction_pooler=settings.transaction_pooler,
        )
        return cls(settings=settings, db=db)
