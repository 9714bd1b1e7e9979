"""Stored objects written straight into `stored_objects`, and a store whose deletes fail
a given number of times."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.errors import StorageError
from core.platform.ids import new_id


class FlakyStorage:
    """A store whose deletes fail `failures` times, then succeed."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.deleted: list[str] = []

    async def put(self, key: str, path: Path, *, content_type: str) -> None:
        raise NotImplementedError

    def read(self, key: str) -> Any:
        raise NotImplementedError

    async def delete(self, key: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StorageError(f"could not delete {key}: ServiceUnavailable")
        self.deleted.append(key)


async def stored_object(conn: Conn, org: str, *, created_ago: timedelta, due: bool) -> str:
    """A stored object of `org` written `created_ago`, due for deletion then if `due`
    (else an orphan: no attachment refers to it); returns its key."""
    now = utcnow()
    sub, key = new_id("sub"), f"{org}/{new_id('sub')}/{new_id('att')}"
    await conn.execute(
        "INSERT INTO stored_objects (storage_key, organization_id, submission_id, created_at,"
        " delete_after) VALUES (%(key)s, %(org)s, %(sub)s, %(created)s, %(due)s)",
        {
            "key": key,
            "org": org,
            "sub": sub,
            "created": now - created_ago,
            "due": now - created_ago if due else None,
        },
    )
    return key
