"""Creating, cloning, recycling and dropping uniquely named databases on the test server."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# Each pytest-xdist worker names its databases after itself (gw0, gw1…): a database left
# behind by a killed run says which process made it.
_PREFIX = f"postbag_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_"


def database_url(admin_url: str, name: str) -> str:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


def _admin(admin_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url, autocommit=True)


def _new_name() -> str:
    return f"{_PREFIX}{uuid.uuid4().hex[:12]}"


def create_database(admin_url: str, *, template: str | None = None) -> str:
    name = _new_name()
    with _admin(admin_url) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str) -> None:
    with _admin(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Everything a test could change in its database besides rows, sequences and statistics:
# the schema's objects and definitions, grants, per-database settings, prepared
# transactions and large objects. Equal digests: the same schema as the template's.
_SCHEMA_DIGEST = """
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
  SELECT format('rel %s %s %s %s %s %s %s', n.nspname, c.relname, c.relkind, c.relpersistence,
                c.reloptions, c.relacl, c.relrowsecurity || '/' || c.relforcerowsecurity)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  UNION ALL
  SELECT format('col %s %s %s %s %s %s', a.attrelid::regclass, a.attname, a.atttypid::regtype,
                a.attnotnull, a.attisdropped, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND a.attnum > 0
  UNION ALL
  SELECT format('con %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace NOT IN ('pg_catalog'::regnamespace,
                                                  'information_schema'::regnamespace)
  UNION ALL
  SELECT format('idx %s', pg_get_indexdef(indexrelid)) FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid
   WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace,
                                'pg_toast'::regnamespace)
  UNION ALL
  SELECT format('trg %s %s', pg_get_triggerdef(oid), tgenabled) FROM pg_trigger
   WHERE NOT tgisinternal
  UNION ALL
  SELECT format('fn %s %s %s %s', pronamespace::regnamespace, proname,
                pg_get_function_identity_arguments(oid), md5(prosrc))
    FROM pg_proc WHERE pronamespace NOT IN ('pg_catalog'::regnamespace,
                                            'information_schema'::regnamespace)
  UNION ALL
  SELECT format('pol %s %s %s %s %s', polrelid::regclass, polname, polcmd,
                pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid))
    FROM pg_policy
  UNION ALL
  SELECT format('view %s %s', c.oid::regclass, pg_get_viewdef(c.oid)) FROM pg_class c
   WHERE c.relkind IN ('v', 'm') AND c.relnamespace NOT IN ('pg_catalog'::regnamespace,
                                                           'information_schema'::regnamespace)
  UNION ALL
  SELECT format('type %s %s %s', typnamespace::regnamespace, typname, typtype) FROM pg_type
   WHERE typnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace,
                              'pg_toast'::regnamespace)
  UNION ALL
  SELECT format('enum %s %s %s', enumtypid::regtype, enumlabel, enumsortorder) FROM pg_enum
  UNION ALL
  SELECT format('nsp %s %s', nspname, nspacl) FROM pg_namespace
  UNION ALL
  SELECT format('ext %s %s', extname, extversion) FROM pg_extension
  UNION ALL
  SELECT format('set %s %s', setrole, setconfig) FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT format('db %s %s', datacl, datconnlimit) FROM pg_database
   WHERE datname = current_database()
  UNION ALL
  SELECT format('xact %s', gid) FROM pg_prepared_xacts WHERE database = current_database()
  UNION ALL
  SELECT format('lo %s', oid) FROM pg_largeobject_metadata
  UNION ALL
  SELECT format('pub %s', pubname) FROM pg_publication
  UNION ALL
  SELECT format('evt %s', evtname) FROM pg_event_trigger
) AS lines (line)
"""

_OUTSIDE_CATALOG = (
    "SELECT oid FROM pg_class WHERE relnamespace NOT IN"
    " ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)"
)
_ANALYZED = f"SELECT count(*) FROM pg_statistic WHERE starelid IN ({_OUTSIDE_CATALOG})"

# The planner's figures for every relation outside the system catalogs (with the TOAST).
_RELATION_STATS = """
SELECT oid, relpages, reltuples, relallvisible FROM pg_class
 WHERE relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
   AND relkind IN ('r', 'i', 't', 'm', 'p')
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a test could leave changed in a database: rows, sequences, the planner's
    figures, the schema. A recycled database is reset to the template's."""

    tables: tuple[str, ...]  # quoted, schema-qualified
    seeded: dict[str, bytes]  # table -> its rows (COPY text), for tables the migrations fill
    sequences: dict[str, tuple[int, bool]]  # sequence -> (last_value, is_called)
    stats: dict[int, tuple[int, float, int]]  # relation oid -> planner figures
    analyzed: int  # rows of pg_statistic outside the system catalogs
    schema: str  # digest of _SCHEMA_DIGEST


def _digest(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    row = conn.execute(_SCHEMA_DIGEST).fetchone()
    assert row is not None
    return hashlib.sha256(str(row[0]).encode()).hexdigest()


def _rows(conn: psycopg.Connection[tuple[object, ...]], table: str) -> bytes:
    """The table's rows as COPY text, in the order they are stored."""
    copied = bytearray()
    with conn.cursor().copy(f"COPY {table} TO STDOUT") as copy:
        for chunk in copy:
            copied += chunk
    return bytes(copied)


def _same_rows(copied: bytes, other: bytes) -> bool:
    return sorted(copied.splitlines()) == sorted(other.splitlines())


def _sequences(conn: psycopg.Connection[tuple[object, ...]]) -> dict[str, tuple[int, bool]]:
    found: dict[str, tuple[int, bool]] = {}
    for (name,) in conn.execute(
        "SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences"
    ).fetchall():
        row = conn.execute(f"SELECT last_value, is_called FROM {name}").fetchone()
        assert row is not None
        found[str(name)] = (int(str(row[0])), bool(row[1]))
    return found


def _stats(conn: psycopg.Connection[tuple[object, ...]]) -> dict[int, tuple[int, float, int]]:
    return {
        int(str(oid)): (int(str(pages)), float(str(tuples)), int(str(visible)))
        for oid, pages, tuples, visible in conn.execute(_RELATION_STATS).fetchall()
    }


def snapshot(url: str) -> Snapshot:
    with psycopg.connect(url, autocommit=True) as conn:
        tables = tuple(
            str(name)
            for (name,) in conn.execute(
                # Partitioned tables hold no rows of their own: their partitions are listed.
                "SELECT format('%I.%I', s.schemaname, s.relname) FROM pg_stat_user_tables s"
                " JOIN pg_class c ON c.oid = s.relid WHERE c.relkind = 'r' ORDER BY 1"
            ).fetchall()
        )
        seeded = {table: rows for table in tables if (rows := _rows(conn, table))}
        analyzed = conn.execute(_ANALYZED).fetchone()
        assert analyzed is not None
        return Snapshot(
            tables, seeded, _sequences(conn), _stats(conn), int(str(analyzed[0])), _digest(conn)
        )


def _changed_tables(conn: psycopg.Connection[tuple[object, ...]], template: Snapshot) -> list[str]:
    probe = ", ".join(f"EXISTS (SELECT FROM {table})" for table in template.tables)
    filled = conn.execute(f"SELECT {probe}").fetchone()
    assert filled is not None
    changed = []
    for table, has_rows in zip(template.tables, filled, strict=True):
        seeded = template.seeded.get(table)
        if (seeded is None and has_rows) or (
            seeded is not None and not _same_rows(_rows(conn, table), seeded)
        ):
            changed.append(table)
    return changed


def _reset(url: str, template: Snapshot) -> None:
    """Put a used database back as the template is; AssertionError when it cannot (its
    schema changed, a table kept pages)."""
    with psycopg.connect(url, autocommit=True) as conn:
        changed = _changed_tables(conn, template)
        # As a replica applies rows: no triggers and no foreign-key checks (every table is
        # emptied or restored whole, so the result is consistent).
        with conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in changed:
                conn.execute(f"DELETE FROM {table}")
        for table in changed:
            # Removes the deleted rows and truncates the table to no pages: the next
            # test's rows are stored in the order they are inserted, as in a fresh clone.
            conn.execute(f"VACUUM {table}")
        kept = conn.execute(
            "SELECT array_agg(t) FROM unnest(%s::regclass[]) AS t WHERE pg_relation_size(t) > 0",
            (changed,),
        ).fetchone()
        assert kept == (None,), f"tables kept pages: {kept}"
        assert template.analyzed == 0, "the template's tables were analyzed"
        oids, figures = zip(*template.stats.items(), strict=True)
        with conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in changed:
                if table in template.seeded:
                    with conn.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                        copy.write(template.seeded[table])
            for name, (value, called) in template.sequences.items():
                conn.execute("SELECT setval(%s, %s, %s)", (name, value, called))
            # The planner's figures as the template has them, without what ANALYZE learnt
            # from the last test's rows.
            conn.execute(
                "UPDATE pg_class AS c SET relpages = t.pages, reltuples = t.tuples,"
                " relallvisible = t.visible"
                " FROM unnest(%s::oid[], %s::int[], %s::real[], %s::int[])"
                " AS t (oid, pages, tuples, visible)"
                " WHERE c.oid = t.oid AND (c.relpages, c.reltuples, c.relallvisible)"
                " IS DISTINCT FROM (t.pages, t.tuples, t.visible)",
                (list(oids), *(list(column) for column in zip(*figures, strict=True))),
            )
            conn.execute(f"DELETE FROM pg_statistic WHERE starelid IN ({_OUTSIDE_CATALOG})")
        # The activity counters from zero.
        conn.execute("SELECT pg_stat_reset()")
        assert _stats(conn).keys() == template.stats.keys(), "the relations are not the template's"
        assert _digest(conn) == template.schema, "the schema is not the template's"


class Clones:
    """Databases equal to the migrated template, ready before the tests that take them.

    The first are clones (CREATE DATABASE … TEMPLATE); after that a database a test gives
    back is recycled on this thread while the next tests run: its connections are ended,
    it is renamed (a client the test left behind cannot reach it again), and its rows,
    sequences and planner statistics are put back as the template has them, checked against
    the template's schema. PostgreSQL checkpoints for every DROP DATABASE (1 to 5 s each
    while other runs share the server, and every test's drop waits for it), so a database
    is dropped only when it cannot be recycled, and at the end.
    """

    def __init__(self, admin_url: str, template: str, *, ahead: int = 2) -> None:
        self._admin_url = admin_url
        self._template = template
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clones")
        self._snapshot = snapshot(database_url(admin_url, template))
        self._ready: deque[Future[str]] = deque()
        for _ in range(ahead):
            self._ready.append(self._thread.submit(self._clone))

    def _clone(self) -> str:
        return create_database(self._admin_url, template=self._template)

    def _recycle(self, name: str) -> str:
        fresh = _new_name()
        try:
            with _admin(self._admin_url) as admin:
                admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                for _attempt in range(10):
                    ended = admin.execute(
                        "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity"
                        " WHERE datname = %s",
                        (name,),
                    ).fetchone()
                    if ended == (0,):
                        break
                admin.execute(f'ALTER DATABASE "{name}" RENAME TO "{fresh}"')
                admin.execute(f'ALTER DATABASE "{fresh}" WITH ALLOW_CONNECTIONS true')
            _reset(database_url(self._admin_url, fresh), self._snapshot)
        except (AssertionError, psycopg.Error):
            drop_database(self._admin_url, name)
            drop_database(self._admin_url, fresh)
            return self._clone()
        return fresh

    def take(self) -> str:
        """A database equal to the template's, for one test alone."""
        if not self._ready:
            self._ready.append(self._thread.submit(self._clone))
        return self._ready.popleft().result()

    def give_back(self, name: str) -> None:
        """Recycle a taken database behind the next tests; any connection still open to it
        is ended, as `DROP DATABASE … WITH (FORCE)` would."""
        self._ready.append(self._thread.submit(self._recycle, name))

    def __enter__(self) -> Clones:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        while self._ready:
            name = self._ready.popleft().result()
            self._thread.submit(drop_database, self._admin_url, name)
        self._thread.shutdown(wait=True)
