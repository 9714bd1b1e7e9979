"""Apply `migrations/NNNN_name.sql` in order, each once, in its own transaction.

Each applied file is recorded with its SHA-256; an applied file that was edited since is
refused. An advisory lock makes two processes that start at once apply each file once.
Then the destination types the caller names are recorded (`destination_types`: the code's,
`core.destinations.registry.DESTINATION_TYPES`): the database refuses any type its code
does not know.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.platform.db import Conn
from core.platform.errors import MigrationError
from core.platform.logs import log
from core.platform.queries import queries

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
_FILE_NAME = re.compile(r"^\d{4}_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files on disk, in order."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        if not _FILE_NAME.match(path.name):
            raise MigrationError(f"migration file name must be NNNN_name.sql: {path.name}")
        found.append(Migration(path.name, path.read_text(encoding="utf-8")))
    return found


async def migrate(
    conn: Conn, directory: Path = MIGRATIONS_DIR, *, destination_types: Mapping[str, int]
) -> list[str]:
    """Apply what is not applied yet on `conn` (autocommit), then record `destination_types`
    (each type's name and attempt limit); return the names applied."""
    migrations = discover(directory)
    await conn.execute(queries["lock_migrations"])
    try:
        await conn.execute(queries["create_schema_migrations"])
        cur = await conn.execute(queries["applied_migrations"])
        applied = {row["name"]: row["checksum"] for row in await cur.fetchall()}
        done = []
        for migration in migrations:
            recorded = applied.get(migration.name)
            if recorded is not None:
                if recorded != migration.checksum:
                    raise MigrationError(
                        f"{migration.name} was edited after it was applied; "
                        "add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    queries["record_migration"],
                    {"name": migration.name, "checksum": migration.checksum},
                )
            log.info("migration applied", extra={"detail": {"migration": migration.name}})
            done.append(migration.name)
        await conn.execute(
            queries["record_destination_types"],
            {
                "names": list(destination_types),
                "max_attempts": list(destination_types.values()),
            },
        )
        return done
    finally:
        await conn.execute(queries["unlock_migrations"])
