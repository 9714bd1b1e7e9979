"""Creating, cloning and dropping uniquely named databases on the test PostgreSQL server."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def database_url(admin_url: str, name: str) -> str:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


def _admin(admin_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url, autocommit=True)


def create_database(admin_url: str, *, template: str | None = None) -> str:
    name = f"postbag_test_{uuid.uuid4().hex[:12]}"
    with _admin(admin_url) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str) -> None:
    with _admin(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
