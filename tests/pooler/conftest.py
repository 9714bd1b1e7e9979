"""The pooler suite: Postbag's services on a real PgBouncer in transaction mode.

Skipped only where PgBouncer is not installed; with POSTBAG_TEST_REQUIRE_PGBOUNCER=1 (CI)
`./local/test` installs it where it can (root and apt-get, upgrading nothing) and the suite
fails instead of skipping.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.platform.services import Services
from tests.support.pooler import installed, pgbouncer, through
from tests.support.settings import built_services

# The production default: more clients than PgBouncer has server connections.
POOL_MAX = 10


@pytest.fixture(scope="session")
def pooler_port(admin_url: str) -> Iterator[int]:
    """One PgBouncer per test process, in front of the test server."""
    if not installed():
        if os.environ.get("POSTBAG_TEST_REQUIRE_PGBOUNCER") == "1":
            pytest.fail("pgbouncer is required here (POSTBAG_TEST_REQUIRE_PGBOUNCER=1)")
        pytest.skip(
            "pgbouncer is not installed (POSTBAG_TEST_REQUIRE_PGBOUNCER=1 ./local/test "
            "installs it with apt-get where it runs as root, or apt-get install pgbouncer)"
        )
    with pgbouncer(admin_url) as port:
        yield port


@pytest.fixture
def pooled_url(db_url: str, pooler_port: int) -> str:
    """This test's database, through PgBouncer."""
    return through(db_url, pooler_port)


@pytest.fixture
async def pooled(pooled_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    """Services whose every connection goes through PgBouncer in transaction mode, with no
    direct URL (as a cloud function that reaches the database only through the pooler)."""
    async with built_services(
        pooled_url, tmp_path, pool_max=POOL_MAX, db_pooler="transaction"
    ) as built:
        yield built
