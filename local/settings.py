"""The settings of each `postbag` command, all read through `core.platform.settings`.

`postbag serve` and `postbag worker` take the environment as it is
(`production_settings`). `postbag dev` alone fills in development defaults, and lists each
one it used so that it can say so at start. The one-shot commands (`migrate`,
`create-org`…) only fall back to the embedded PostgreSQL when no database URL is set.
"""

from __future__ import annotations

import importlib.util
import os

from core.platform.errors import ConfigError
from core.platform.settings import Settings, load_settings
from local.embedded import STATE_DIR, embedded_database_url, local_secret_key


def _embedded_url() -> str:
    if importlib.util.find_spec("pgserver") is None:
        # The production image has no embedded PostgreSQL.
        raise ConfigError("POSTBAG_DATABASE_URL is required (no embedded PostgreSQL installed)")
    return embedded_database_url()


def listening_url(host: str, port: int) -> str:
    """Where a server listening on `host:port` is reached from this machine, e.g.
    `http://127.0.0.1:8080` (all interfaces: the loopback address)."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def command_settings() -> Settings:
    """A one-shot command's settings: the environment's, with the embedded PostgreSQL
    when `POSTBAG_DATABASE_URL` is unset."""
    settings = load_settings()
    return settings if settings.database_url else settings.with_values(database_url=_embedded_url())


def development_settings(*, public_url: str | None = None) -> tuple[Settings, list[str]]:
    """`postbag dev`'s settings, and one line for each development default it applied
    beyond what its banner reports (private targets allowed, the development mailbox): the
    embedded PostgreSQL and a generated secret key. `public_url` (where it listens) applies
    when POSTBAG_PUBLIC_URL is unset; email goes to the development mailbox when
    POSTBAG_EMAIL_PROVIDER is unset."""
    settings = load_settings()
    overrides: dict[str, object] = {"allow_private_targets": True}
    if "POSTBAG_EMAIL_PROVIDER" not in os.environ:
        overrides["email_provider"] = "dev"
    notes = []
    if not settings.database_url:
        overrides["database_url"] = _embedded_url()
        notes.append(f"the database is an embedded PostgreSQL under {STATE_DIR / 'pg'}")
    if settings.secret_key is None:
        overrides["secret_key"] = local_secret_key()
        notes.append(f"the secret key was generated into {STATE_DIR / 'secret'}")
    if public_url and "POSTBAG_PUBLIC_URL" not in os.environ:
        overrides["public_url"] = public_url
    return settings.with_values(**overrides), notes
