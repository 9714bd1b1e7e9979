"""What a process keeps of the rows it read, for its later requests: a form for submits
(`core.intake.form`), a stream's settings for ingests (`core.streams.ingest`). Kept per
database (a process has one; tests have several), at most `size` each, the oldest dropped
first; whoever keeps a row has the insert confirm its revision."""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

from core.platform.db import Database

T = TypeVar("T")


class Kept(Generic[T]):
    """Rows kept by id, per database."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: weakref.WeakKeyDictionary[Database, dict[str, T]] = weakref.WeakKeyDictionary()

    def get(self, db: Database, key: str) -> T | None:
        """The row kept under `key`, if any."""
        return self._rows.get(db, {}).get(key)

    def forget(self, db: Database, key: str) -> None:
        """Drop the row kept under `key` (it is being read again, or was refused)."""
        self._rows.get(db, {}).pop(key, None)

    def keep(self, db: Database, key: str, row: T) -> None:
        """Keep `row` under `key` in place of any kept before, dropping the oldest row when
        `size` are kept."""
        rows = self._rows.setdefault(db, {})
        rows.pop(key, None)
        if len(rows) >= self.size:
            del rows[next(iter(rows))]
        rows[key] = row
