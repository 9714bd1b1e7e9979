"""The audit trail leaves the building: `GET /v1/audit/export` re-verified from outside by
recomputing the hash chain (NDJSON and CSV), the scheduled export to S3 (moto) chaining its
daily objects, and the retention tick forgetting by plan while `verify` accepts the anchor."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from core.owner.audit import verify_chain
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import Tenant, make_tenant
from tests.support.records import rows
from tests.support.settings import with_settings

ZERO = "0" * 64
_FIELDS = ("id", "organization_id", "seq", "at", "actor_kind", "actor_id", "actor_name",
           "action", "subject", "via", "ip", "user_agent")  # fmt: skip


def outside_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """The chain's rule as docs/teams.md states it, written here without Postbag's code."""
    content = json.dumps([row[name] for name in _FIELDS], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256((prev_hash + content).encode()).hexdigest()


def assert_chain(lines: list[dict[str, Any]], *, first_prev: str | None = None) -> None:
    """Each row links to the one before it and its hash is its content's."""
    prev = first_prev if first_prev is not None else lines[0]["prev_hash"]
    for row in lines:
        assert row["prev_hash"] == prev, row
        assert row["hash"] == outside_hash(prev, row), row
        prev = row["hash"]


async def append_at(conn: Conn, tenant: Tenant, at: datetime, **fields: Any) -> dict[str, Any]:
    """A row appended to the tenant's chain as if written at `at` (as the owner: the insert
    trigger checks only that it follows the head)."""
    [head] = await rows(
        conn,
        "SELECT coalesce(max(seq), 0) AS seq,"
        " coalesce((SELECT hash FROM audit_heads WHERE organization_id = %(org)s), %(zero)s)"
        " AS hash FROM audit_heads WHERE organization_id = %(org)s",
        org=tenant.org,
        zero=ZERO,
    )
    row: dict[str, Any] = {
        "id": f"aud_{uuid.uuid4().hex[:20]}",
        "organization_id": tenant.org,
        "seq": head["seq"] + 1,
        "at": at.astimezone(UTC).isoformat(timespec="microseconds"),
        "actor_kind": "key",
        "actor_id": "key_test",
        "actor_name": "test",
        "action": "form.updated",
        "subject": "frm_x",
        "via": "api",
        "ip": "192.0.2.1",
        "user_agent": "ua/1",
        **fields,
    }
    row["prev_hash"] = head["hash"]
    row["hash"] = outside_hash(head["hash"], row)
    await conn.execute(
        "INSERT INTO audit_log (id, organization_id, seq, at, actor_kind, actor_id, actor_name,"
        " action, subject, via, ip, user_agent, prev_hash, hash) VALUES (%(id)s,"
        " %(organization_id)s, %(seq)s, %(at)s, %(actor_kind)s, %(actor_id)s, %(actor_name)s,"
        " %(action)s, %(subject)s, %(via)s, %(ip)s, %(user_agent)s, %(prev_hash)s, %(hash)s)",
        row,
    )
    return row


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


async def test_export_is_reverified_from_outside_in_ndjson_and_csv(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    start = utcnow() - timedelta(days=3)
    await append_at(conn, tenant, start, user_agent="=HYPERLINK(1)", ip=None)
    await append_at(conn, tenant, start + timedelta(days=1), actor_name="'quoted", subject=None)
    await append_at(conn, tenant, start + timedelta(days=2), user_agent="")
    async with api_client(services, tenant.key) as client:
        client.headers["User-Agent"] = "-leading dash/1"
        await create(client, tenant, "/v1/forms", {"name": "Survey"})
        answer = await client.get("/v1/audit/export")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/x-ndjson"
        lines = ndjson(answer.text)
        assert [row["seq"] for row in lines] == [1, 2, 3, 4]
        assert lines[3]["action"] == "form.created"
        assert_chain(lines, first_prev=ZERO)
        assert (lines[0]["user_agent"], lines[0]["ip"]) == ("=HYPERLINK(1)", None)

        csv_answer = await client.get("/v1/audit/export", params={"format": "csv"})
        assert csv_answer.headers["content-type"] == "text/csv; charset=utf-8"
        [header, *records] = list(csv.reader(io.StringIO(csv_answer.text)))
        assert header[-3:] == ["prev_hash", "hash", "content"]
        prev = ZERO
        for record in records:
            cells = dict(zip(header, record, strict=True))
            assert hashlib.sha256((prev + cells["content"]).encode()).hexdigest() == cells["hash"]
            content = json.loads(cells["content"])
            for name, value in zip(_FIELDS, content, strict=True):
                shown = cells[name][1:] if cells[name].startswith("'") else cells[name]
                assert shown == ("" if value is None else str(value))
            prev = cells["hash"]
        assert records[0][header.index("user_agent")] == "'=HYPERLINK(1)"  # formula-safe
        assert prev == lines[-1]["hash"]

        window = await client.get(
            "/v1/audit/export",
            params={
                "since": (start + timedelta(hours=12)).isoformat(),
                "until": (start + timedelta(days=1, hours=12)).isoformat(),
            },
        )
        [middle] = ndjson(window.text)
        assert middle["seq"] == 2
        assert_chain([middle], first_prev=lines[0]["hash"])

        backwards = await client.get(
            "/v1/audit/export",
            params={"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        )
        assert_problem(backwards, 422, "invalid_input")
        viewer = await create(client, tenant, "/v1/keys", {"name": "v", "role": "viewer"})
    async with api_client(services, viewer["key"]) as as_viewer:
        assert_problem(await as_viewer.get("/v1/audit/export"), 403, "forbidden")


async def test_retention_forgets_by_plan_and_verify_accepts_the_anchor(
    services: Services, conn: Conn
) -> None:
    now = utcnow()
    free = await make_tenant(conn, "Free", plan="free")
    team = await make_tenant(conn, "Team", plan="team")
    for tenant in (free, team):
        for days in (800, 400, 366, 10):
            await append_at(conn, tenant, now - timedelta(days=days))
    stats = await run_retention(services, now=now, budget=10)
    assert stats["audit_rows_forgotten"] == 4  # free: 800, 400, 366; team (730): 800
    kept = await rows(
        conn, "SELECT organization_id, seq FROM audit_log ORDER BY organization_id, seq"
    )
    assert [(r["organization_id"], r["seq"]) for r in kept if r["organization_id"] == free.org] == [
        (free.org, 4)
    ]
    assert [r["seq"] for r in kept if r["organization_id"] == team.org] == [2, 3, 4]
    [anchor] = await rows(conn, "SELECT seq FROM audit_anchors WHERE organization_id = %(o)s",
                          o=free.org)  # fmt: skip
    assert anchor["seq"] == 3
    for tenant in (free, team):
        report = await verify_chain(conn, tenant.org)
        assert (report.broken_id, report.problem, report.head_seq) == (None, None, 4)
    # The chain goes on from its anchor, and the export starts there.
    async with api_client(services, free.key) as client:
        await create(client, free, "/v1/forms", {"name": "After"})
        lines = ndjson((await client.get("/v1/audit/export")).text)
    [forgotten_last] = await rows(
        conn, "SELECT hash FROM audit_anchors WHERE organization_id = %(o)s", o=free.org
    )
    assert_chain(lines, first_prev=forgotten_last["hash"])
    assert (await verify_chain(conn, free.org)).rows == 2
    assert (await run_retention(services, now=now, budget=10))["audit_rows_forgotten"] == 0


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An S3 bucket mocked by moto."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        name = f"audit-{uuid.uuid4().hex[:12]}"
        boto3.client("s3").create_bucket(Bucket=name)
        yield name


def _objects(bucket: str) -> list[tuple[str, dict[str, str], list[dict[str, Any]]]]:
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    found = []
    for item in sorted(listed, key=lambda item: item["Key"]):
        got = s3.get_object(Bucket=bucket, Key=item["Key"])
        found.append((item["Key"], got["Metadata"], ndjson(got["Body"].read().decode())))
    return found


async def test_scheduled_export_writes_one_chained_object_per_day_before_retention_forgets(
    services: Services, conn: Conn, bucket: str
) -> None:
    exporting = with_settings(services, audit_export_url=f"s3://{bucket}/trail")
    tenant = await make_tenant(conn, plan="free")
    now = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    old = now - timedelta(days=400)
    await append_at(conn, tenant, old)
    await append_at(conn, tenant, old + timedelta(hours=1))
    await append_at(conn, tenant, now - timedelta(days=1))
    await append_at(conn, tenant, now - timedelta(hours=1))  # today: not over yet

    stats = await run_retention(exporting, now=now, budget=10)
    assert (stats["audit_objects_exported"], stats["audit_rows_exported"]) == (2, 3)
    assert stats["audit_rows_forgotten"] == 2  # exported first, then past 365 days
    objects = _objects(bucket)
    assert [key for key, _, _ in objects] == [
        f"trail/{tenant.org}/{old.date().isoformat()}.ndjson",
        f"trail/{tenant.org}/2026-12-03.ndjson",
    ]
    prev = ZERO
    for _, metadata, lines in objects:
        assert metadata["prev-hash"] == prev
        assert_chain(lines, first_prev=prev)
        assert metadata["last-hash"] == lines[-1]["hash"]
        prev = metadata["last-hash"]
    assert (await verify_chain(conn, tenant.org)).broken_id is None

    later = now + timedelta(days=1)
    stats = await run_retention(exporting, now=later, budget=10)
    assert stats["audit_objects_exported"] == 1
    _, metadata, [today] = _objects(bucket)[-1]
    assert (metadata["prev-hash"], today["seq"]) == (prev, 4)
    assert "audit_objects_exported" not in await run_retention(exporting, now=later, budget=10)


async def test_with_an_export_configured_nothing_unexported_is_forgotten(
    services: Services, conn: Conn, bucket: str
) -> None:
    exporting = with_settings(services, audit_export_url=f"s3://{bucket}/trail")
    tenant = await make_tenant(conn, plan="free")
    now = utcnow()
    await append_at(conn, tenant, now - timedelta(days=400))
    boto3.client("s3").delete_bucket(Bucket=bucket)  # the export fails
    with pytest.raises(Exception, match="NoSuchBucket"):
        await run_retention(exporting, now=now, budget=10)
    assert len(await rows(conn, "SELECT id FROM audit_log")) == 1
