"""A throwaway PostgreSQL primary and a streaming standby of it, for what only a real
replica shows: replay, its pause and lag, a server that refuses every write.

Both run the binaries of the embedded PostgreSQL (the `pgserver` wheel, as `./local/run`
does), each on a free TCP port of 127.0.0.1, under `home`. Run as root, PostgreSQL runs as
pgserver's system user (it refuses to run as root), as the embedded server does.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

# pgserver's system user when it is started by root (`pgserver.postgres_server`).
SYSTEM_USER = "pgserver"

# Small and unsafe on a crash, which a throwaway cluster never outlives.
_SETTINGS = """
wal_level = replica
max_wal_senders = 4
max_connections = 40
shared_buffers = 16MB
fsync = off
full_page_writes = off
hot_standby = on
"""

_HBA = """
local all all trust
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
"""


@dataclass(frozen=True, slots=True)
class Cluster:
    """One running server: its data directory and port."""

    pgdata: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _system_user() -> str | None:
    """The user PostgreSQL runs as: this process's, or pgserver's when this is root."""
    if os.geteuid() != 0:
        return None
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


def _own_folder(path: Path, user: str | None) -> None:
    path.mkdir(mode=0o700)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _start(pgdata: Path, port: int, user: str | None) -> Cluster:
    from pgserver._commands import pg_ctl

    options = f"-p {port} -h 127.0.0.1 -k {pgdata}"
    pg_ctl(
        ["-w", "-t", "60", "-l", str(pgdata / "log"), "-o", options, "start"],
        pgdata=pgdata,
        user=user,
        timeout=90,
    )
    return Cluster(pgdata, port)


def _stop(pgdata: Path, user: str | None) -> None:
    from pgserver._commands import pg_ctl

    if (pgdata / "postmaster.pid").exists():
        with contextlib.suppress(Exception):
            pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=pgdata, user=user, timeout=60)


@contextlib.contextmanager
def primary_and_standby(home: Path) -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and a hot standby streaming from it, both stopped (immediately) when the
    block ends, however it ends; their folders are left to `home`'s owner to remove."""
    from pgserver._commands import initdb, pg_basebackup

    user = _system_user()
    if user is not None:
        home.chmod(0o755)
    primary_dir, standby_dir = home / "primary", home / "standby"
    _own_folder(primary_dir, user)
    try:
        initdb(
            ["--auth=trust", "--encoding=utf8", "-U", "postgres"],
            pgdata=primary_dir,
            user=user,
            timeout=120,
        )
        with (primary_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(_SETTINGS)
        (primary_dir / "pg_hba.conf").write_text(_HBA, encoding="utf-8")
        primary = _start(primary_dir, _free_port(), user)
        _own_folder(standby_dir, user)
        # -R: the copy starts as a standby of the primary (standby.signal, primary_conninfo).
        source = ["-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"]
        pg_basebackup(
            [*source, "-D", str(standby_dir), "-R", "-X", "stream", "-c", "fast"],
            user=user,
            timeout=120,
        )
        standby = _start(standby_dir, _free_port(), user)
        yield primary, standby
    finally:
        _stop(standby_dir, user)
        _stop(primary_dir, user)


def replayed(primary: Cluster, standby: Cluster, *, within: float = 30.0) -> None:
    """Wait until the standby has applied everything the primary wrote so far."""
    with psycopg.connect(primary.url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    written = row[0]
    deadline = time.monotonic() + within
    with psycopg.connect(standby.url, autocommit=True) as conn:
        while True:
            applied = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (written,)
            ).fetchone()
            if applied == (True,):
                return
            assert time.monotonic() < deadline, f"the standby did not replay {written}"
            time.sleep(0.05)
