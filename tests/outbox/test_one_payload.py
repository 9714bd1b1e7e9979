"""One payload per submission: a post to a form with many routes writes its values once, on
the submission's row; each delivery keeps what differs per destination, and the worker
builds the body from the submission when it claims the delivery."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

import httpx
import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.owner.organizations import create_organization
from core.platform.db import Conn, connect
from core.platform.migrate import MIGRATIONS_DIR, migrate
from tests.support.builders import (
    Tenant,
    make_destination,
    make_form,
    make_route,
    setup_form,
)
from tests.support.cli import serving, subprocess_env
from tests.support.hostile import health_watch
from tests.support.records import claimed, rows
from tests.support.settings import TEST_SECRET_KEY

ROUTES = 300
# A 250 KB value that compression cannot shrink, so its bytes show wherever it is stored.
VALUE = "Zq7" + secrets.token_urlsafe(187_500)


@pytest.mark.slow
async def test_submit__300_routes_write_the_values_once(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    _, form = await setup_form(conn, plan="self_hosted", routes=ROUTES)
    before = await rows(conn, "SELECT pg_total_relation_size('deliveries') AS bytes")
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
    )
    with serving(env) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            async with health_watch(base) as watch:
                answer = await client.post(
                    f"/s/{form}", json={"note": VALUE}, headers={"Accept": "application/json"}
                )
    assert answer.status_code == 201, answer.text
    assert watch.waits and watch.stall < 1.0, watch.waits
    [delivery_rows] = await rows(
        conn,
        "SELECT count(*) AS n, sum(pg_column_size(d.*)) AS bytes,"
        " count(*) FILTER (WHERE d::text LIKE '%%Zq7%%') AS holding"
        " FROM deliveries d",
    )
    assert delivery_rows["n"] == ROUTES and delivery_rows["holding"] == 0
    # Measured: 345 bytes a row, and the table with its indexes grew 384 KiB (before, each
    # row held the 250 KB body: 75 MB).
    assert delivery_rows["bytes"] < ROUTES * 500, delivery_rows
    after = await rows(conn, "SELECT pg_total_relation_size('deliveries') AS bytes")
    assert after[0]["bytes"] - before[0]["bytes"] < 1024 * 1024
    [stored] = await rows(
        conn,
        'SELECT count(*) AS n, sum(pg_column_size(s."values")) AS bytes FROM submissions s'
        " WHERE s::text LIKE '%%Zq7%%'",
    )
    assert stored["n"] == 1 and 250_000 <= stored["bytes"] < 2 * 250_000, stored
    # Every delivery still sends the whole value, built from the one row.
    claims = await claimed(conn)
    assert len(claims) == ROUTES
    assert {claim.payload["values"]["note"] for claim in claims.values()} == {VALUE}
    assert {claim.payload["receipt"] for claim in claims.values()} == {answer.json()["receipt"]}


OLD_PAYLOAD = {
    "event": "form.submitted",
    "receipt": "",
    "form": "",
    "submitted_at": "2026-10-13T09:30:00.000Z",
    "test": False,
    "values": {"name": "Ada", "agree": "on"},
    "labels": {"name": "Name"},
    "consent": True,
    "attachments": {},
    "meta": {"origin": "https://site.example", "referrer": None, "locale": "en"},
}
OLD_TEMPLATE = {
    "subject": "From {{name}}",
    "text": None,
    "labels": {"name": "Name", "phone": "Phone"},
    "field_order": ["agree", "name"],
    "form_name": "Contact",
}


async def test_migration__deliveries_written_with_a_payload_send_the_same_body(
    empty_db_url: str, tmp_path: Path
) -> None:
    """Rows written before 0022 (the body and the form's parts copied into each delivery)
    are moved to the submission, and the claim builds the body they held."""
    earlier = tmp_path / "migrations"
    earlier.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if path.name < "0022":
            shutil.copy(path, earlier / path.name)
    async with await connect(empty_db_url) as conn:
        await migrate(conn, earlier, destination_types=DESTINATION_TYPES)
        # An organization without a key: keys have a role column only since 0030.
        tenant = Tenant(await create_organization(conn, name="Acme", plan="self_hosted"), "")
        form = await make_form(conn, tenant, consent_field="agree")
        sub = "sub_01jexamp1eexamp1eexamp1e00"
        payload = {**OLD_PAYLOAD, "receipt": sub, "form": form}
        await conn.execute(
            'INSERT INTO submissions (id, organization_id, form_id, status, "values", meta,'
            " payload_hash, received_at)"
            " VALUES (%(sub)s, %(org)s, %(form)s, 'accepted', %(values)s, %(meta)s, '\\x00',"
            " %(at)s)",
            {
                "sub": sub,
                "org": tenant.org,
                "form": form,
                "values": json.dumps(payload["values"]),
                "meta": json.dumps(payload["meta"]),
                "at": "2026-10-13T09:30:00Z",
            },
        )
        ids = []
        for n in range(2):
            destination = await make_destination(conn, tenant)
            route = await make_route(conn, tenant, form, destination)
            ids.append(f"dlv_01jexamp1eexamp1eexamp1e0{n}")
            await conn.execute(
                "INSERT INTO deliveries (id, organization_id, submission_id, route_id,"
                " destination_id, channel, max_attempts, payload, target, template,"
                " secret_version, next_attempt_at)"
                " VALUES (%(id)s, %(org)s, %(sub)s, %(rte)s, %(dst)s, 'webhook', 10,"
                ' %(payload)s, \'{"url": "https://hooks.example.com"}\', %(template)s, 1,'
                " now() - interval '1 second')",
                {
                    "id": ids[-1],
                    "org": tenant.org,
                    "sub": sub,
                    "rte": route,
                    "dst": destination,
                    "payload": json.dumps(payload),
                    "template": json.dumps(OLD_TEMPLATE),
                },
            )
        assert (await migrate(conn, destination_types=DESTINATION_TYPES))[
            0
        ] == "0022_bounded_storage.sql"
        left = await rows(conn, "SELECT payload::text, template FROM deliveries")
        routed = {"subject": "From {{name}}", "text": None}
        assert left == [{"payload": None, "template": routed}] * 2
        claims = await claimed(conn)
    for delivery in ids:
        claim = claims[delivery]
        assert claim.payload == payload
        assert claim.template == {**OLD_TEMPLATE, "labels": {"name": "Name"}}
