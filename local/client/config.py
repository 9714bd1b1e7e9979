"""Where the client finds its Postbag: `POSTBAG_API_URL` and `POSTBAG_API_KEY`, else the login.

`postbag login` stores the URL and key in `$XDG_CONFIG_HOME/postbag/credentials.json`
(`~/.config/postbag/…` without it), readable by its owner only (mode 0600).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class NotLoggedIn(Exception):
    """Neither the environment nor a stored login names a Postbag and a key."""


@dataclass(frozen=True, slots=True)
class Login:
    url: str
    key: str


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "postbag" / "credentials.json"


def save_login(login: Login) -> Path:
    """Store the login, the file created with mode 0600 (and its folder 0700)."""
    path = credentials_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its old mode through os.open
    with os.fdopen(fd, "w") as out:
        json.dump({"url": login.url, "api_key": login.key}, out)
        out.write("\n")
    return path


def _stored() -> dict[str, str]:
    try:
        data = json.loads(credentials_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise NotLoggedIn(f"{credentials_path()} is unreadable: {exc}") from exc
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def current_login() -> Login:
    """The environment's URL and key, each falling back to the stored login."""
    stored = _stored()
    url = os.environ.get("POSTBAG_API_URL") or stored.get("url")
    key = os.environ.get("POSTBAG_API_KEY") or stored.get("api_key")
    if not url or not key:
        raise NotLoggedIn(
            "no Postbag to talk to: run `postbag login URL`, or set POSTBAG_API_URL "
            "and POSTBAG_API_KEY"
        )
    return Login(url=url.rstrip("/"), key=key)
