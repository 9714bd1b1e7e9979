"""The test harness: a real PostgreSQL, a migrated template, one clone per test.

`POSTBAG_TEST_DATABASE_URL` names an admin connection to a server (CI: this machine's
PostgreSQL); without it, an embedded server (pgserver) is started for the session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from core.owner.organizations import create_api_key, create_organization
from core.platform.db import Conn, connect
from core.platform.migrate import migrate
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.platform.settings import load_settings

TEST_SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"


def database_url(admin_url: str, name: str) -> str:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("POSTBAG_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from pgserver import get_server

    server = get_server(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()


def _admin(admin_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url, autocommit=True)


def create_database(admin_url: str, *, template: str | None = None) -> str:
    name = f"postbag_test_{uuid.uuid4().hex[:12]}"
    with _admin(admin_url) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str) -> None:
    with _admin(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_name(admin_url: str) -> Iterator[str]:
    """A database migrated once per session; tests clone it."""
    name = create_database(admin_url)
    import asyncio

    async def run() -> None:
        conn = await connect(database_url(admin_url, name))
        try:
            await migrate(conn)
        finally:
            await conn.close()

    asyncio.run(run())
    yield name
    drop_database(admin_url, name)


@pytest.fixture
def db_url(admin_url: str, template_name: str) -> Iterator[str]:
    """A fresh migrated database of this test's own, dropped afterwards."""
    name = create_database(admin_url, template=template_name)
    yield database_url(admin_url, name)
    drop_database(admin_url, name)


@pytest.fixture
def empty_db_url(admin_url: str) -> Iterator[str]:
    """A fresh database with no migrations applied."""
    name = create_database(admin_url)
    yield database_url(admin_url, name)
    drop_database(admin_url, name)


@pytest.fixture
async def services(db_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    settings = load_settings(
        database_url=db_url,
        secret_key=TEST_SECRET_KEY,
        storage_url=f"file://{tmp_path / 'files'}",
        allow_private_targets=True,
    )
    built = Services.from_settings(settings, pool_max=4)
    yield built
    await built.db.close()


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[Conn]:
    """An owner connection (autocommit) to this test's database."""
    connection = await connect(db_url)
    yield connection
    await connection.close()


async def make_org(conn: Conn, name: str = "Acme", plan: str = "free") -> tuple[OrgScope, str]:
    """An organization and a live API key for it."""
    async with conn.transaction():
        scope = await create_organization(conn, name=name, plan=plan)
        key = await create_api_key(conn, scope, name="test")
    return scope, key.secret


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a `postbag` subprocess, without the parent's Postbag settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTBAG_")}
    env.update(extra)
    return env
