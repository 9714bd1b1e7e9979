"""What the benchmarks share: a database migrated once a run and a fresh clone of it for
each round. The audit trail refuses TRUNCATE (and a DELETE but an organization's own), so a
round never empties the last round's tables: it starts on a clone, as the tests do."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import connect
from core.platform.migrate import migrate
from tests.support.databases import create_database, database_url, drop_database


def span(values: list[float], unit: str, *, scale: float = 1.0, digits: int = 2) -> str:
    """The range of a figure over rounds (`1.20-1.35 s`), or its one value when they agree."""
    low, high = min(values) / scale, max(values) / scale
    return f"{low:.{digits}f}{unit}" if low == high else f"{low:.{digits}f}-{high:.{digits}f}{unit}"


def migrated(admin_url: str) -> str:
    """A new database with every migration applied; its name."""
    name = create_database(admin_url)

    async def run() -> None:
        conn = await connect(database_url(admin_url, name))
        try:
            await migrate(conn, destination_types=DESTINATION_TYPES)
        finally:
            await conn.close()

    try:
        asyncio.run(run())
    except BaseException:
        drop_database(admin_url, name)
        raise
    return name


class Databases:
    """Clones of one migrated template, a fresh one per round, all dropped at the end: a
    DROP DATABASE checkpoints, so none runs during a later round's measurement, and the
    drops at the end run at once (their checkpoints coalesce)."""

    def __init__(self, admin_url: str) -> None:
        self._admin_url = admin_url
        self._template = migrated(admin_url)
        self._made: list[str] = []

    def fresh(self) -> str:
        """The URL of a new database equal to the migrated template."""
        name = create_database(self._admin_url, template=self._template)
        self._made.append(name)
        return database_url(self._admin_url, name)

    def __enter__(self) -> Databases:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        names = [*self._made, self._template]
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            list(pool.map(lambda name: drop_database(self._admin_url, name), names))
