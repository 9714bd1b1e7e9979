"""What a process keeps of the rows it read, for its later requests: a form for submits
(`core.intake.form`), a stream's settings for ingests (`core.streams.ingest`). Each is held
by the process's `Services` (a registry of its room; tests have several services), at most
`size` rows, the oldest dropped first; whoever keeps a row has the insert confirm its
revision."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Kept(Generic[T]):
    """Rows kept by id, at most `size`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._rows: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        """The row kept under `key`, if any."""
        return self._rows.get(key)

    def forget(self, key: str) -> None:
        """Drop the row kept under `key` (it is being read again, or was refused)."""
        self._rows.pop(key, None)

    def keep(self, key: str, row: T) -> None:
        """Keep `row` under `key` in place of any kept before, dropping the oldest row when
        `size` are kept."""
        self._rows.pop(key, None)
        if len(self._rows) >= self.size:
            del self._rows[next(iter(self._rows))]
        self._rows[key] = row
