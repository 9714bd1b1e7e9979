"""An installation of an earlier release: every migration but a later one, applied, then
that one as an upgrade applies it (the upgrade tests, and the benchmark of 0062)."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import Conn
from core.platform.migrate import MIGRATIONS_DIR, migrate


class EarlierRelease:
    """The migrations folder of the release before `later` (every migration but it), in
    `folder`: `install` migrates a database to it, `upgrade` then applies `later`."""

    def __init__(self, folder: Path, later: str) -> None:
        self.directory = folder / "migrations"
        shutil.copytree(MIGRATIONS_DIR, self.directory)
        self.later = self.directory / later
        self.held = self.later.read_text()
        self.later.unlink()

    async def install(self, conn: Conn) -> list[str]:
        return await migrate(conn, self.directory, destination_types=DESTINATION_TYPES)

    async def upgrade(self, conn: Conn) -> list[str]:
        self.later.write_text(self.held)
        return await migrate(conn, self.directory, destination_types=DESTINATION_TYPES)
