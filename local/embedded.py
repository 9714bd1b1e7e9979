"""An embedded PostgreSQL (the `pgserver` wheel) under `./.postbag/pg` for development.

pgserver runs PostgreSQL 16 from the wheel with a Unix socket and no TCP listener. Run as
root, it creates an OS user `pgserver` to own the data directory and opens read access on
that directory's parent folders (PostgreSQL refuses to run as root).

pgserver counts the processes using a data directory in `.handle_pids.json` and stops the
server at the exit of the last one (an `atexit` hook). Two things would defeat that: a
process killed by a signal never runs its hook, and a pid left in the list by such a process
keeps the server up for good. So `stop_like_ctrl_c` turns SIGTERM and SIGHUP into the
`KeyboardInterrupt` of Ctrl-C, and the pids of processes that no longer exist are dropped
from the list when joining the server and again just before the hook runs.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import warnings
from pathlib import Path
from types import FrameType

STATE_DIR = Path(".postbag")
HANDLE_LIST = ".handle_pids.json"


def embedded_database_url(state_dir: Path = STATE_DIR) -> str:
    """Start (or join) the embedded server and return its socket URI."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then uses /tmp, which is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pgserver import get_server  # type: ignore[attr-defined]

    state_dir.mkdir(parents=True, exist_ok=True)
    pgdata = state_dir.resolve() / "pg"
    forget_dead_handles(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    # Registered after pgserver's own exit hook, so it runs first (atexit is last-in first-out).
    atexit.register(forget_dead_handles, pgdata)
    uri: str = server.get_uri()
    return uri


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the pids of processes that no longer exist from pgserver's handle list (under
    pgserver's lock); return the pids that remain."""
    from pgserver.postgres_server import PostgresServer

    path = pgdata / HANDLE_LIST
    with PostgresServer._lock:
        if not path.exists():
            return []
        pids = [int(pid) for pid in json.loads(path.read_text(encoding="utf-8"))]
        alive = [pid for pid in pids if _alive(pid)]
        if alive != pids:
            path.write_text(json.dumps(alive), encoding="utf-8")
        return alive


def _interrupt(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - a signal handler's signature
    raise KeyboardInterrupt


def _terminate(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - a signal handler's signature
    # While uvicorn serves, SIGTERM is its graceful shutdown; otherwise `_interrupt`.
    signal.raise_signal(signal.SIGTERM)


def stop_like_ctrl_c() -> None:
    """Make SIGTERM and SIGHUP end the process the way Ctrl-C does, exit hooks included.

    uvicorn handles SIGINT and SIGTERM while it serves, then raises the signal again with
    the handler found before it: SIGTERM's default would end the process without running the
    exit hooks (and leave the embedded PostgreSQL running); this handler raises
    `KeyboardInterrupt` instead, as SIGINT's does. SIGHUP (a closed terminal) goes the
    SIGTERM way.
    """
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _terminate)


def local_secret_key(state_dir: Path = STATE_DIR) -> str:
    """The local runner's secret key, generated once into `./.postbag/secret`."""
    path = state_dir / "secret"
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()
