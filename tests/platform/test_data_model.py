"""Invariants the database itself holds (SPEC §4-§6), and row-level security."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from core.platform.db import Conn, enter_scope
from core.platform.scope import OrgScope
from tests.support.seed import seed_organization


async def _tenant_tables(conn: Conn) -> list[str]:
    cur = await conn.execute(
        """SELECT c.table_name FROM information_schema.columns c
             JOIN information_schema.tables t USING (table_schema, table_name)
             JOIN pg_class r ON r.oid = to_regclass(c.table_name)
            WHERE c.table_schema = 'public' AND c.column_name = 'organization_id'
              AND t.table_type = 'BASE TABLE' AND NOT r.relispartition ORDER BY 1"""
    )
    return [row["table_name"] for row in await cur.fetchall()]


@pytest.mark.parametrize(
    ("statement", "constraint"),
    [
        (
            """INSERT INTO submission_keys (form_id, idempotency_key, organization_id,
                                            submission_id)
               VALUES (%(frm)s, 'idem-1', %(org)s, %(sub)s)""",
            "submission_keys_pkey",
        ),
        (
            """INSERT INTO deliveries (id, organization_id, submission_id, route_id,
                                       destination_id, channel, max_attempts, target)
               VALUES ('dlv_dup', %(org)s, %(sub)s, %(rte)s, %(dst)s, 'webhook', 10, '{}')""",
            "deliveries_submission_route_key",
        ),
        (
            """INSERT INTO digests (id, organization_id, route_id, period_key, period_start,
                                    period_end, submission_count)
               VALUES ('dgs_dup', %(org)s, %(rte)s, '2026-01-01', '2026-01-01', '2026-01-02', 0)""",
            "digests_route_period_key",
        ),
        (
            """INSERT INTO form_schemas (organization_id, form_id, version, schema)
               VALUES (%(org)s, %(frm)s, 1, '{"type": "object"}')""",
            "form_schemas_form_version_key",
        ),
        (
            """INSERT INTO destination_secrets (organization_id, destination_id, version, secret)
               VALUES (%(org)s, %(dst)s, 1, 'another-secret-value')""",
            "destination_secrets_pkey",
        ),
        (
            """INSERT INTO routes (id, organization_id, form_id, destination_id)
               VALUES ('rte_dup', %(org)s, %(frm)s, %(dst)s)""",
            "routes_form_destination_key",
        ),
        (
            """INSERT INTO alerts (id, organization_id, kind, subject_id)
               VALUES ('alr_dup', %(org)s, 'delivery.dead', %(dst)s)""",
            "alerts_one_open_idx",
        ),
    ],
)
async def test_uniqueness__refused_by_the_database(
    conn: Conn, statement: str, constraint: str
) -> None:
    ids = await seed_organization(conn)
    with pytest.raises(errors.UniqueViolation) as caught:
        await conn.execute(statement, ids)
    assert caught.value.diag.constraint_name == constraint


@pytest.mark.parametrize(
    ("statement", "constraint"),
    [
        (
            "UPDATE deliveries SET status = 'delivered' WHERE id = %(dlv)s",
            "deliveries_status_check",
        ),
        (
            "UPDATE deliveries SET status = 'sending' WHERE id = %(dlv)s",
            "deliveries_sending_has_lease",
        ),
        ("UPDATE deliveries SET status = 'dead' WHERE id = %(dlv)s", "deliveries_ended_has_reason"),
        (
            "UPDATE submissions SET status = 'quarantined' WHERE id = %(sub)s",
            "submissions_reason_matches_status",
        ),
        (
            "UPDATE submissions SET erased_at = now() WHERE id = %(sub)s",
            "submissions_erased_has_no_values",
        ),
        ("UPDATE routes SET mode = 'digest' WHERE id = %(rte)s", "routes_period_matches_mode"),
        ("UPDATE forms SET schema_mode = 'strict' WHERE id = %(frm)s", "forms_schema_mode_check"),
        ("UPDATE organizations SET plan = 'gold' WHERE id = %(org)s", "organizations_plan_check"),
    ],
)
async def test_checks__invalid_values_refused(conn: Conn, statement: str, constraint: str) -> None:
    ids = await seed_organization(conn)
    with pytest.raises(errors.CheckViolation) as caught:
        await conn.execute(statement, ids)
    assert caught.value.diag.constraint_name == constraint


async def test_child_rows__cannot_point_at_another_organizations_parent(conn: Conn) -> None:
    a = await seed_organization(conn)
    b = await seed_organization(conn)
    with pytest.raises(errors.ForeignKeyViolation):
        await conn.execute(
            """INSERT INTO routes (id, organization_id, form_id, destination_id)
               VALUES ('rte_cross', %(org_a)s, %(frm_a)s, %(dst_b)s)""",
            {"org_a": a["org"], "frm_a": a["frm"], "dst_b": b["dst"]},
        )


@pytest.mark.parametrize("table", ["form_schemas", "destination_secrets"])
async def test_versions__rows_are_immutable(conn: Conn, table: str) -> None:
    await seed_organization(conn)
    column = "schema" if table == "form_schemas" else "secret"
    value = '\'{"type": "object"}\'' if table == "form_schemas" else "'rotated-in-place-no'"
    with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
        await conn.execute(f"UPDATE {table} SET {column} = {value}")


async def test_row_level_security__scoped_session_sees_only_its_organization(
    conn: Conn, db_url: str
) -> None:
    a = await seed_organization(conn)
    b = await seed_organization(conn)
    tables = await _tenant_tables(conn)
    assert len(tables) >= 15

    cur = await conn.execute(
        """SELECT c.relname, c.relrowsecurity,
                  EXISTS (SELECT 1 FROM pg_policies p WHERE p.tablename = c.relname) AS has_policy
             FROM pg_class c WHERE c.relname = ANY(%(tables)s)""",
        {"tables": tables},
    )
    protected = {
        row["relname"]: row["relrowsecurity"] and row["has_policy"] for row in await cur.fetchall()
    }
    assert protected == dict.fromkeys(tables, True)

    scoped_conn = await psycopg.AsyncConnection.connect(db_url)
    try:
        async with scoped_conn.transaction():
            await enter_scope(scoped_conn, OrgScope(a["org"]))  # type: ignore[arg-type]
            for table in tables:
                total = await (
                    await scoped_conn.execute(f"SELECT count(*) FROM {table}")
                ).fetchone()
                theirs = await (
                    await scoped_conn.execute(
                        f"SELECT count(*) FROM {table} WHERE organization_id = %s", [b["org"]]
                    )
                ).fetchone()
                assert total is not None and total[0] >= 1, f"{table}: seed wrote no row"
                assert theirs == (0,), f"{table} shows another organization's rows"
            orgs = await (await scoped_conn.execute("SELECT id FROM organizations")).fetchall()
            assert orgs == [(a["org"],)]
    finally:
        await scoped_conn.close()

    # And the owner sees both, so the zero above is the policy, not missing data.
    for table in tables:
        row = await (
            await conn.execute(
                f"SELECT count(DISTINCT organization_id) AS n FROM {table} "
                "WHERE organization_id = ANY(%(orgs)s)",
                {"orgs": [a["org"], b["org"]]},
            )
        ).fetchone()
        assert row is not None and row["n"] == 2, table


async def test_row_level_security__cannot_write_into_another_organization(
    conn: Conn, db_url: str
) -> None:
    a = await seed_organization(conn)
    b = await seed_organization(conn)
    scoped_conn = await psycopg.AsyncConnection.connect(db_url)
    try:
        with pytest.raises(errors.InsufficientPrivilege):
            async with scoped_conn.transaction():
                await enter_scope(scoped_conn, OrgScope(a["org"]))  # type: ignore[arg-type]
                await scoped_conn.execute(
                    "INSERT INTO forms (id, organization_id, name) VALUES ('frm_x', %s, 'x')",
                    [b["org"]],
                )
    finally:
        await scoped_conn.close()
