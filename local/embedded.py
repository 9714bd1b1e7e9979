"""An embedded PostgreSQL (the `pgserver` wheel) under `./.postbag/pg` for development.

pgserver runs PostgreSQL 16 from the wheel with a Unix socket and no TCP listener. Run as
root, it creates an OS user `pgserver` to own the data directory and opens read access on
that directory's parent folders (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import secrets
import warnings
from pathlib import Path

STATE_DIR = Path(".postbag")


def embedded_database_url(state_dir: Path = STATE_DIR) -> str:
    """Start (or join) the embedded server and return its socket URI."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then uses /tmp, which is fine.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pgserver import get_server  # type: ignore[attr-defined]

    state_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(state_dir.resolve() / "pg", cleanup_mode="stop")
    uri: str = server.get_uri()
    return uri


def local_secret_key(state_dir: Path = STATE_DIR) -> str:
    """The local runner's secret key, generated once into `./.postbag/secret`."""
    path = state_dir / "secret"
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()
