"""Creating, cloning and dropping uniquely named databases on the test PostgreSQL server."""

from __future__ import annotations

import os
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# Each pytest-xdist worker names its databases after itself (gw0, gw1…): a database left
# behind by a killed run says which process made it.
_PREFIX = f"postbag_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_"


def database_url(admin_url: str, name: str) -> str:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


def _admin(admin_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url, autocommit=True)


def create_database(admin_url: str, *, template: str | None = None) -> str:
    name = f"{_PREFIX}{uuid.uuid4().hex[:12]}"
    with _admin(admin_url) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str) -> None:
    with _admin(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Clones:
    """Clones of a template made ahead of the tests that take them, and dropped behind them,
    on a thread of their own: a test waits for neither statement of its own database.

    A clone copies the template's pages through the write-ahead log, and PostgreSQL 15
    forces a checkpoint for every DROP DATABASE: tens of milliseconds each on an idle server,
    up to a second while other runs share its disk. The thread does them in order (clone,
    drop, clone…), so the drops bound how far ahead it gets; deferring them all to the end
    of the session measured no faster and left hundreds of databases for a killed run. Each
    test still gets a database of its own that no other test has touched.
    """

    def __init__(self, admin_url: str, template: str, *, ahead: int = 2) -> None:
        self._admin_url = admin_url
        self._template = template
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clones")
        self._ready: deque[Future[str]] = deque()
        for _ in range(ahead):
            self._clone_ahead()

    def _clone_ahead(self) -> None:
        self._ready.append(
            self._thread.submit(create_database, self._admin_url, template=self._template)
        )

    def take(self) -> str:
        """A fresh clone, untouched, for one test; another is started in its place."""
        name = self._ready.popleft().result()
        self._clone_ahead()
        return name

    def drop(self, name: str) -> None:
        """Drop a taken clone behind the next tests (`WITH (FORCE)`: a connection the test
        left open does not keep it)."""
        self._thread.submit(drop_database, self._admin_url, name)

    def __enter__(self) -> Clones:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        while self._ready:
            self.drop(self._ready.popleft().result())
        self._thread.shutdown(wait=True)
