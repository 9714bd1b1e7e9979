"""Every SQL statement, loaded once from `core/sql/*.sql` and referred to by name.

A file holds blocks headed by `-- name: <name>` and a one-line `-- <purpose>`. Comment
lines are left out of the loaded text, but for the lines `-- if <part>` and `-- end <part>`
that enclose an optional part of a statement.

`conn.execute(queries[name], params)` runs most of them; `execute(conn, name, params)` runs
the long ones: psycopg parses a statement's `%(name)s` placeholders on every call once it is
over 4 KB, which the submit statement and the claim are, so `execute` numbers them once at
load and runs the statement through psycopg's raw cursor (`$1`, `$2`, … with a list of
values). `execute(..., omit={part})` runs it without those optional parts: a step with
nothing to write still costs the server its tables' locks and plan nodes, so the submit
statement leaves out its attachments, acknowledgement, autoresponse, implicit-ham and
schema-drift steps when the post has none of them.
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
# The lines that open and close an optional part, kept in the loaded text.
_PART_LINE = re.compile(r"^-- (?:if|end) [a-z_]+$")
_PART = re.compile(r"^-- if ([a-z_]+)\n(.*?)^-- end \1(?:\n|\Z)", re.MULTILINE | re.DOTALL)
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
            lines = [
                line
                for line in body.splitlines()
                if not line.lstrip().startswith("--") or _PART_LINE.match(line)
            ]
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


def without(text: str, omit: frozenset[str]) -> str:
    """`text` without its optional parts named in `omit`, and with the others' marker
    lines taken out."""
    return _PART.sub(lambda part: "" if part.group(1) in omit else part.group(2), text)


@cache
def _numbered(name: str, omit: frozenset[str]) -> Numbered:
    return number(without(queries[name], omit))


async def execute(
    conn: Conn, name: str, params: Mapping[str, Any], *, omit: frozenset[str] = frozenset()
) -> psycopg.AsyncRawCursor[DictRow]:
    """Run the statement `name` without its optional parts in `omit`, with `params` (as
    `conn.execute` would) through a raw cursor; its rows are dicts."""
    statement = _numbered(name, omit)
    cursor = psycopg.AsyncRawCursor(conn)
    return await cursor.execute(statement.text, statement.values(params))
