"""Every SQL statement, loaded once from `core/sql/*.sql` and referred to by name.

A file holds blocks headed by `-- name: <name>` and a one-line `-- <purpose>`. Comment
lines are left out of the loaded text: psycopg caches the parsing of a statement only when
it is at most 4 KB, and the submit transaction is over that with its comments.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def _load(directory: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        parts = _HEADER.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in found:
                raise ValueError(f"query {name!r} is defined twice ({path.name})")
            lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
            found[name] = "\n".join(lines).strip()
    return found


queries = MappingProxyType(_load(Path(__file__).resolve().parents[1] / "sql"))
