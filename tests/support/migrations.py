"""An installation of an earlier release: every migration before a later one, applied, then
that one as an upgrade applies it (the upgrade tests, and the benchmark of 0062)."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import Conn
from core.platform.migrate import MIGRATIONS_DIR, migrate


class EarlierRelease:
    """The migrations folder of the release before `later` (every migration before it), in
    `folder`: `install` migrates a database to it, `upgrade` then applies `later` (and none
    after it)."""

    def __init__(self, folder: Path, later: str) -> None:
        self.directory = folder / "migrations"
        self.directory.mkdir(parents=True)
        for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
            if path.name < later:
                shutil.copy(path, self.directory / path.name)
        self.later = self.directory / later
        self.held = (MIGRATIONS_DIR / later).read_text()

    async def install(self, conn: Conn) -> list[str]:
        return await migrate(conn, self.directory, destination_types=DESTINATION_TYPES)

    async def upgrade(self, conn: Conn) -> list[str]:
        self.later.write_text(self.held)
        return await migrate(conn, self.directory, destination_types=DESTINATION_TYPES)
