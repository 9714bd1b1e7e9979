"""The test harness: a real PostgreSQL, a migrated template, one clone per test.

`POSTBAG_TEST_DATABASE_URL` names an admin connection to a server (CI: this machine's
PostgreSQL); without it, an embedded server (pgserver) is started for the session.
Below the harness, the fixtures more than one folder of tests asks for.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiosmtpd.smtp import Envelope
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID

from core.destinations.http import close_shared_client
from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import Conn, connect
from core.platform.migrate import migrate
from core.platform.services import Services
from core.schemas.checker import close_schema_checker
from tests.support.databases import Clones, create_database, database_url, drop_database
from tests.support.mail import Inbox, smtp_peer
from tests.support.settings import SENDER, built_services

SES_REGION = "eu-west-1"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow",
        action="store_true",
        help="run the tests marked slow too (fault injection, processes); .ci/run does",
    )


def _runs_slow(config: pytest.Config) -> bool:
    return bool(config.getoption("--slow")) or "slow" in (config.getoption("markexpr") or "")


def pytest_report_header(config: pytest.Config) -> str | None:
    if _runs_slow(config):
        return None
    return "tests marked slow are deselected: ./local/test --slow runs them (as .ci/run does)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without `--slow` (or a `-m` naming them), the slow tests are deselected."""
    if _runs_slow(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


@pytest.fixture(scope="session")
def admin_url(request: pytest.FixtureRequest) -> Iterator[str]:
    url = os.environ.get("POSTBAG_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from pgserver import get_server

    # pytest-xdist's workers share one embedded server: each joins it by its data directory,
    # named by the run, and the last one to leave stops it. That one also deletes the folder
    # (pgserver's own "delete" mode raced between two workers leaving at once).
    run = getattr(request.config, "workerinput", {}).get("testrunuid") or uuid.uuid4().hex
    home = Path(tempfile.gettempdir()) / f"postbag-test-pg-{run}"
    home.mkdir(mode=0o755, exist_ok=True)
    # One worker at a time: the first makes the data directory and starts the server, the
    # others join it (pgserver's own check for the directory and its mkdir race otherwise).
    with (home / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = get_server(home / "data", cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()
    handles = home / "data" / ".handle_pids.json"
    if handles.exists() and json.loads(handles.read_text(encoding="utf-8")) == []:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def pg_home() -> Iterator[Path]:
    """A folder for an embedded PostgreSQL of the test's own, readable by others.

    Run as root, pgserver runs PostgreSQL as the user `pgserver`, which must reach the data
    directory. Not under pytest's temporary tree: every pytest that starts (another worker,
    another checkout's run) makes that tree private to its owner again.
    """
    home = Path(tempfile.mkdtemp(prefix="postbag-test-home-"))
    home.chmod(0o755)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_name(admin_url: str) -> Iterator[str]:
    """A database migrated once per session; tests clone it."""
    name = create_database(admin_url)

    async def run() -> None:
        conn = await connect(database_url(admin_url, name))
        try:
            await migrate(conn, destination_types=DESTINATION_TYPES)
        finally:
            await conn.close()

    asyncio.run(run())
    yield name
    drop_database(admin_url, name)


@pytest.fixture(scope="session")
def clones(admin_url: str, template_name: str) -> Iterator[Clones]:
    """Databases equal to the template, made ready ahead of the tests on a thread: clones
    at first, then the databases earlier tests gave back, recycled."""
    with Clones(admin_url, template_name) as made:
        yield made


@pytest.fixture
def db_url(admin_url: str, clones: Clones) -> Iterator[str]:
    """A migrated database of this test's own, as the template is; recycled afterwards."""
    name = clones.take()
    yield database_url(admin_url, name)
    clones.give_back(name)


@pytest.fixture
def empty_db_url(admin_url: str) -> Iterator[str]:
    """A fresh database with no migrations applied."""
    name = create_database(admin_url)
    yield database_url(admin_url, name)
    drop_database(admin_url, name)


@pytest.fixture
async def services(db_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    async with built_services(db_url, tmp_path) as built:
        yield built


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[Conn]:
    """An owner connection (autocommit) to this test's database."""
    connection = await connect(db_url)
    yield connection
    await connection.close()


@pytest.fixture(autouse=True)
async def close_http() -> AsyncIterator[None]:
    """Close the worker's shared HTTP client and the schema checker's children after each test.

    The client belongs to the session's event loop, so without this one test's keep-alive
    connections would outlive its receiver; a test that sent nothing has none to close.
    """
    yield
    await close_shared_client()
    await close_schema_checker()


@pytest.fixture
def ses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """SES mocked by moto with the test sender verified; the backend records what was sent."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": SES_REGION,
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        boto3.client("ses", region_name=SES_REGION).verify_email_identity(EmailAddress=SENDER)
        from moto.ses.models import ses_backends

        yield ses_backends[DEFAULT_ACCOUNT_ID][SES_REGION]


@pytest.fixture(params=["file", "s3"])
def storage_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Where uploads are stored, once per store: a folder, then an S3 bucket mocked by moto."""
    if request.param == "file":
        yield f"file://{tmp_path / 'store'}"
        return
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        bucket = f"postbag-{uuid.uuid4().hex[:12]}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        yield f"s3://{bucket}/attachments"


@pytest.fixture
def smtp_server() -> Iterator[tuple[str, list[Envelope]]]:
    """A real SMTP server on loopback (aiosmtpd): refuses `nobody@…`, keeps the rest."""
    inbox = Inbox()
    with smtp_peer(inbox) as url:
        yield url, inbox.received
