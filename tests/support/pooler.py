"""A real PgBouncer in transaction mode in front of the test server, on a free loopback port.

Its pool is small (two server connections per database), so a transaction's statements
rarely find the server connection the previous transaction of the same client used: a
server-side prepared statement, a session setting or a session advisory lock would be
seen, or missed, on another connection.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.peers import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# Server connections per database and user: far fewer than the clients, so they hop.
POOL_SIZE = 2
# PgBouncer refuses to run as root; it drops to this user (see `_unprivileged_user`).
UNPRIVILEGED = "nobody"


def installed() -> bool:
    return os.access(PGBOUNCER, os.X_OK)


def through(url: str, port: int) -> str:
    """`url` (a URL or key=value connection string) with the pooler's host and port."""
    params = conninfo_to_dict(url)
    params.update(host="127.0.0.1", port=str(port))
    return make_conninfo(**params)  # type: ignore[arg-type]


def _config(server_url: str, port: int, folder: Path) -> Path:
    server = conninfo_to_dict(server_url)
    user = str(server.get("user") or "postgres")
    (folder / "userlist.txt").write_text(f'"{user}" ""\n', encoding="utf-8")
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "\n".join(
            [
                "[databases]",
                # Every database name (each test's clone) goes to the same server.
                f"* = host={server.get('host') or '127.0.0.1'} port={server.get('port') or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'userlist.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {POOL_SIZE}",
                "min_pool_size = 0",
                "reserve_pool_size = 0",
                "max_client_conn = 500",
                "max_db_connections = 0",
                f"admin_users = {user}",
                "ignore_startup_parameters = extra_float_digits",
                "server_lifetime = 3600",
                "server_idle_timeout = 60",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return ini


@contextlib.contextmanager
def pgbouncer(server_url: str) -> Iterator[int]:
    """PgBouncer in transaction mode in front of `server_url`'s server; yields its port."""
    folder = Path(tempfile.mkdtemp(prefix="postbag-test-pgbouncer-"))
    folder.chmod(0o755)
    port = free_port()
    ini = _config(server_url, port, folder)
    command = [PGBOUNCER, str(ini)]
    if os.geteuid() == 0:
        user = _unprivileged_user(server_url)
        command[1:1] = ["-u", user.pw_name]
        for path in (folder, *folder.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
    log = (folder / "pgbouncer.log").open("w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not _accepting(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "pgbouncer did not start:\n" + (folder / "pgbouncer.log").read_text()
                )
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _unprivileged_user(server_url: str) -> pwd.struct_passwd:
    """Whom PgBouncer runs as under root: the owner of the server's socket folder when it
    listens on a Unix socket (the embedded PostgreSQL's `pgserver`, the only one allowed in),
    else `nobody`."""
    host = str(conninfo_to_dict(server_url).get("host") or "")
    if host.startswith("/"):
        return pwd.getpwuid(os.stat(host).st_uid)
    return pwd.getpwnam(UNPRIVILEGED)


def _accepting(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
