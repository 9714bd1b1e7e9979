from __future__ import annotations

import json

import pytest

from core.owner.organizations import authenticate
from core.platform.db import Conn
from tests.support.cli import postbag, subprocess_env


@pytest.mark.slow
async def test_create_key__gives_an_existing_organization_a_key_that_authenticates(
    db_url: str, conn: Conn
) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    created = json.loads(postbag("create-org", "--name", "Acme", "--json", env=env).stdout)
    result = postbag(
        "create-key", created["organization_id"], "--name", "laptop", "--json", env=env
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["organization_id"] == created["organization_id"]
    assert printed["api_key"] != created["api_key"]
    scope = await authenticate(conn, printed["api_key"])
    assert scope.organization_id == created["organization_id"]
    names = await (await conn.execute("SELECT name FROM api_keys ORDER BY created_at")).fetchall()
    assert [row["name"] for row in names] == ["default", "laptop"]
    made = await (await conn.execute("SELECT id FROM api_keys WHERE name = 'laptop'")).fetchone()
    recorded = await conn.execute(
        "SELECT actor_kind, actor_id, action, subject, via FROM audit_log"
    )
    assert await recorded.fetchall() == [
        {
            "actor_kind": "operator",
            "actor_id": "cli",
            "action": "key.created",
            "subject": made["id"] if made else None,
            "via": "cli",
        }
    ]
    assert (await (await conn.execute("SELECT count(*) AS n FROM organizations")).fetchone()) == {
        "n": 1
    }


async def test_create_key__refuses_an_unknown_organization_and_stores_nothing(
    db_url: str, conn: Conn
) -> None:
    result = postbag(
        "create-key",
        "org_0000000000000000000000000",
        env=subprocess_env(POSTBAG_DATABASE_URL=db_url),
    )
    assert result.returncode == 1
    assert "no organization org_0000000000000000000000000" in result.stderr
    assert await (await conn.execute("SELECT count(*) AS n FROM api_keys")).fetchone() == {"n": 0}


@pytest.mark.slow
async def test_orgs__lists_ids_plans_and_names_oldest_first(db_url: str) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    first = json.loads(postbag("create-org", "--name", "Acme", "--json", env=env).stdout)
    second = json.loads(
        postbag("create-org", "--name", "Beta Ltd", "--plan", "pro", "--json", env=env).stdout
    )
    listed = postbag("orgs", "--json", env=env)
    text = postbag("orgs", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"id": first["organization_id"], "name": "Acme", "plan": "self_hosted"},
        {"id": second["organization_id"], "name": "Beta Ltd", "plan": "pro"},
    ]
    assert text.stdout.splitlines()[1].split(None, 2) == [
        second["organization_id"],
        "pro",
        "Beta Ltd",
    ]
    assert first["api_key"] not in listed.stdout + text.stdout
