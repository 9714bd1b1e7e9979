"""Every SQL statement, loaded once from `core/sql/*.sql` and referred to by name.

A file holds blocks headed by `-- name: <name>` and a one-line `-- <purpose>`. Comment
lines are left out of the loaded text. `conn.execute(queries[name], params)` runs most of
them; `execute(conn, name, params)` runs the long ones: psycopg parses a statement's
`%(name)s` placeholders on every call once it is over 4 KB, which the submit statement and
the claim are, so `execute` numbers them once at load and runs the statement through
psycopg's raw cursor (`$1`, `$2`, … with a list of values).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import DictRow

if TYPE_CHECKING:
    from core.platform.db import Conn

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
# A named placeholder, or the `%%` that stands for a literal `%`.
_PLACEHOLDER = re.compile(r"%\(([a-z_][a-z0-9_]*)\)s|%%")


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


@dataclass(frozen=True, slots=True)
class Numbered:
    """A statement with its placeholders numbered: `$n` stands for `names[n - 1]`."""

    text: str
    names: tuple[str, ...]

    def values(self, params: Mapping[str, Any]) -> list[Any]:
        """The parameters in placeholder order (a KeyError names a missing one)."""
        return [params[name] for name in self.names]


def number(text: str) -> Numbered:
    """Number the `%(name)s` placeholders of `text` in order of first use (a name used
    twice is one parameter, as psycopg treats it); `%%` becomes `%`."""
    names: dict[str, int] = {}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${names.setdefault(name, len(names) + 1)}"

    return Numbered(_PLACEHOLDER.sub(replace, text), tuple(names))


@cache
def _numbered(name: str) -> Numbered:
    return number(queries[name])


async def execute(
    conn: Conn, name: str, params: Mapping[str, Any]
) -> psycopg.AsyncRawCursor[DictRow]:
    """Run the statement `name` with `params` (as `conn.execute` would) through a raw
    cursor; its rows are dicts."""
    statement = _numbered(name)
    cursor = psycopg.AsyncRawCursor(conn)
    return await cursor.execute(statement.text, statement.values(params))
