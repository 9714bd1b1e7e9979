"""Another organization's objects are 404 on every /v1 route (never 403, never a leak).

The cases come from the app's own route table, so a route added without scoping, or
without a sample body here, fails this file.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from core.http.access import Rule, checked_routes, rule_of
from core.owner.audit import READ_ONCE
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from tests.support.api import (
    EMAIL,
    WEBHOOK,
    api_client,
    app_without_database,
    assert_problem,
    create,
    served_operations,
)
from tests.support.builders import Tenant, make_member, make_tenant
from tests.support.mail import mailed
from tests.support.submit import submit_client


def _v1_operations() -> list[tuple[str, str]]:
    return [(m, p) for m, p in served_operations(app_without_database()) if p.startswith("/v1/")]


OPERATIONS = _v1_operations()


def _audited() -> dict[tuple[str, str], Rule]:
    """The rule of each `/v1` operation that records an audit action."""
    found = {}
    for served in checked_routes(app_without_database()):
        rule = rule_of(served.route)
        if rule is not None and rule.action is not None:
            found.update({(method, served.path): rule for method in served.methods})
    return found


# A valid body per writing operation, so a 404 can only come from scoping, not validation.
# "{spare_destination_id}" is replaced by a destination of the caller's own.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/keys"): {"name": "k"},
    ("POST", "/v1/members"): {"email": "new@example.com", "role": "viewer"},
    ("PATCH", "/v1/members/{member_id}"): {"role": "viewer"},
    ("POST", "/v1/invitations/{invitation_id}/resend"): {},
    ("POST", "/v1/forms"): {"name": "F"},
    ("PATCH", "/v1/forms/{form_id}"): {"name": "Changed"},
    ("POST", "/v1/forms/{form_id}/schemas"): {"schema": {"type": "object"}},
    ("POST", "/v1/forms/{form_id}/schemas/{version}/adopt"): {},
    ("POST", "/v1/destinations"): EMAIL,
    ("PATCH", "/v1/destinations/{destination_id}"): {"name": "Changed"},
    ("POST", "/v1/forms/{form_id}/routes"): {"destination_id": "{spare_destination_id}"},
    ("PATCH", "/v1/routes/{route_id}"): {"enabled": False},
    ("POST", "/v1/submissions/{submission_id}/erase"): {},
    ("POST", "/v1/submissions/{submission_id}/release"): {},
    ("POST", "/v1/submissions/{submission_id}/spam"): {},
    ("POST", "/v1/deliveries/{delivery_id}/retry"): {},
    ("POST", "/v1/destinations/{destination_id}/test"): {},
    ("POST", "/v1/alerts/{alert_id}/ack"): {},
    ("POST", "/v1/streams"): {"name": "S"},
    ("PATCH", "/v1/streams/{stream_id}"): {"name": "Changed"},
    ("POST", "/v1/streams/{stream_id}/keys"): {"name": "k"},
    ("POST", "/v1/streams/{stream_id}/schemas"): {"schema": {"type": "object"}},
    ("POST", "/v1/streams/{stream_id}/routes"): {"destination_id": "{spare_destination_id}"},
    ("POST", "/v1/streams/{stream_id}/events"): {"type": "t", "data": {}},
    ("POST", "/v1/streams/{stream_id}/batch"): {"events": [{"type": "t", "data": {}}]},
    ("POST", "/v1/streams/{stream_id}/events/{event_id}/erase"): {},
    ("POST", "/v1/streams/{stream_id}/events/{event_id}/release"): {},
    ("POST", "/v1/streams/{stream_id}/schemas/suggest"): {},
    ("POST", "/v1/streams/{stream_id}/schemas/{version}/adopt"): {},
    ("POST", "/v1/deliveries/replay"): {"since": "2026-01-01T00:00:00Z", "dry_run": True},
    ("PATCH", "/v1/organization"): {"notify": ["intruder@example.com"]},
    ("POST", "/v1/hooks"): {"target_url": "https://example.com/hook", "event": "delivery.dead"},
    ("PUT", "/v1/organization/sso"): {
        "issuer": "http://127.0.0.1:9",
        "client_id": "c",
        "allowed_domains": ["scoping.example"],
    },
    ("PUT", "/v1/organization/policy"): {"two_factor_required": False},
    ("PUT", "/v1/organization/email"): {
        "provider": "smtp",
        "from_address": "intruder@example.com",
        "smtp": {"host": "127.0.0.1", "port": 2525},
    },
    ("POST", "/v1/organization/email/test"): {"to": "intruder@example.com"},
}

# An operation that succeeds only on another object of the kind its path names.
OBJECTS: dict[tuple[str, str], dict[str, str]] = {
    # Only a spam or quarantined submission can be released.
    ("POST", "/v1/submissions/{submission_id}/release"): {"submission_id": "spam_submission_id"},
    # Only a quarantined event can be released.
    ("POST", "/v1/streams/{stream_id}/events/{event_id}/release"): {
        "stream_id": "enforcing_stream_id",
        "event_id": "quarantined_event_id",
    },
}

# Query strings an operation needs to succeed on the caller's own objects.
QUERIES: dict[tuple[str, str], str] = {
    ("GET", "/v1/submissions/export.csv"): "?form={form_id}",
    ("GET", "/v1/digests"): "?route={route_id}",
}

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def _world(
    client: httpx.AsyncClient, services: Services, conn: Conn, who: Tenant
) -> dict[str, str]:
    """One object of every kind for `who`; returns the ids by path parameter name."""
    form = await create(
        client,
        who,
        "/v1/forms",
        {"name": "Form", "file_fields": {"brief": {"types": [".pdf"]}}},
    )
    await create(client, who, f"/v1/forms/{form['id']}/schemas", {"schema": {"type": "object"}})
    inbox = await create(client, who, "/v1/destinations", EMAIL)
    spare = await create(client, who, "/v1/destinations", WEBHOOK)
    route = await create(
        client, who, f"/v1/forms/{form['id']}/routes", {"destination_id": inbox["id"]}
    )
    key = await create(client, who, "/v1/keys", {"name": "spare"})
    async with submit_client(services) as public:
        posted = await public.post(
            f"/s/{form['id']}",
            data={"email": "visitor@example.com"},
            files={"brief": ("brief.pdf", PDF, "application/pdf")},
            headers={"Accept": "application/json"},
        )
    assert posted.status_code == 201, posted.text
    receipt = posted.json()["receipt"]
    async with submit_client(services) as public:
        spam = await public.post(
            f"/s/{form['id']}", data={"_gotcha": "bot"}, headers={"Accept": "application/json"}
        )
    detail = (await client.get(f"/v1/submissions/{receipt}", headers=who.headers)).json()
    delivery_id = detail["deliveries"][0]["id"]
    # A dead delivery and its alert, as the worker would leave them.
    await conn.execute(
        "UPDATE deliveries SET status = 'dead', reason = 'http_404' WHERE id = %(id)s",
        {"id": delivery_id},
    )
    alert_id = new_id("alr")
    await conn.execute(
        "INSERT INTO alerts (id, organization_id, kind, subject_id) "
        "VALUES (%(id)s, %(org)s, 'delivery.dead', %(dst)s)",
        {"id": alert_id, "org": who.scope.organization_id, "dst": inbox["id"]},
    )
    # A digest of the route and its delivery, as the digest tick would leave them.
    digest_id = new_id("dgs")
    await conn.execute(
        "INSERT INTO digests (id, organization_id, route_id, period_key, period_start,"
        " period_end, submission_count) VALUES (%(id)s, %(org)s, %(rte)s, '2026-01-01',"
        " '2026-01-01', '2026-01-02', 1)",
        {"id": digest_id, "org": who.scope.organization_id, "rte": route["id"]},
    )
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, kind, digest_id, route_id, destination_id,"
        " channel, max_attempts, payload, target) VALUES (%(id)s, %(org)s, 'digest', %(dgs)s,"
        " %(rte)s, %(dst)s, 'email', 8, '{}', '{}')",
        {
            "id": new_id("dlv"),
            "org": who.scope.organization_id,
            "dgs": digest_id,
            "rte": route["id"],
            "dst": inbox["id"],
        },
    )
    # A replay whose window matches nothing (the dead delivery above stays dead).
    window = {"since": "2020-01-01T00:00:00Z", "until": "2020-01-02T00:00:00Z"}
    replay = (await client.post("/v1/deliveries/replay", json=window, headers=who.headers)).json()
    stream = await create(client, who, "/v1/streams", {"name": "Stream"})
    await create(client, who, f"/v1/streams/{stream['id']}/schemas", {"schema": {"type": "object"}})
    stream_route = await create(
        client, who, f"/v1/streams/{stream['id']}/routes", {"destination_id": inbox["id"]}
    )
    posted_event = await client.post(
        f"/v1/streams/{stream['id']}/events", json={"type": "t", "data": {}}, headers=who.headers
    )
    enforcing = await create(
        client, who, "/v1/streams", {"name": "Enforcing", "schema_mode": "enforce"}
    )
    strict = {"schema": {"type": "object", "required": ["order"]}}
    await create(client, who, f"/v1/streams/{enforcing['id']}/schemas", strict)
    quarantined = await client.post(
        f"/v1/streams/{enforcing['id']}/events",
        json={"type": "t", "data": {}},
        headers=who.headers,
    )
    hook = await create(
        client,
        who,
        "/v1/hooks",
        {
            "target_url": "https://example.com/zap",
            "event": "submission.created",
            "form": form["id"],
        },
    )
    invited = await create(
        client, who, "/v1/members", {"email": f"{new_id('inv')}@example.com", "role": "viewer"}
    )
    sso = {"issuer": "http://127.0.0.1:9", "client_id": "c", "allowed_domains": []}
    sso["allowed_domains"] = [new_id("org").replace("_", "-") + ".example"]
    configured = await client.put("/v1/organization/sso", json=sso, headers=who.headers)
    assert configured.status_code == 200, configured.text
    return {
        "invitation_id": invited["id"],
        "hook_id": hook["id"],
        "replay_id": replay["id"],
        "stream_id": stream["id"],
        "stream_route_id": stream_route["id"],
        "ingest_key_id": stream["ingest_key"]["id"],
        "event_id": posted_event.json()["event"],
        "enforcing_stream_id": enforcing["id"],
        "quarantined_event_id": quarantined.json()["event"],
        "digest_id": digest_id,
        "form_id": form["id"],
        "destination_id": inbox["id"],
        "spare_destination_id": spare["id"],
        "route_id": route["id"],
        "key_id": key["id"],
        "member_id": await make_member(conn, who, role="operator"),
        "submission_id": receipt,
        "spam_submission_id": spam.json()["receipt"],
        "attachment_id": detail["attachments"][0]["id"],
        "delivery_id": delivery_id,
        "alert_id": alert_id,
        "version": "1",  # the schema version created above
    }


async def _snapshot(client: httpx.AsyncClient, who: Tenant, ids: dict[str, str]) -> list[Any]:
    """Everything `who` can read about its objects."""
    paths = [
        f"/v1/forms/{ids['form_id']}",
        f"/v1/forms/{ids['form_id']}/schemas",
        f"/v1/forms/{ids['form_id']}/routes",
        f"/v1/streams/{ids['stream_id']}",
        f"/v1/streams/{ids['stream_id']}/events",
        f"/v1/streams/{ids['stream_id']}/routes",
        f"/v1/destinations/{ids['destination_id']}",
        "/v1/destinations",
        "/v1/forms",
        "/v1/hooks",
        "/v1/keys",
        "/v1/invitations",
        "/v1/usage",
        "/v1/organization",
        "/v1/organization/email",
    ]
    seen = [(await client.get(path, headers=who.headers)).json() for path in paths]
    for key in seen[paths.index("/v1/keys")]["data"]:
        key.pop("last_used_at")  # the snapshot's own requests move it
    return seen


def _fill(method: str, path: str, ids: dict[str, str]) -> str:
    full = path + QUERIES.get((method, path), "")
    ids = {**ids, **{name: ids[other] for name, other in OBJECTS.get((method, path), {}).items()}}
    return full.format(**{name: ids[name] for name in ids if "{" + name + "}" in full})


def _body(method: str, path: str, ids: dict[str, str]) -> dict[str, Any] | None:
    if method in ("GET", "DELETE"):
        return None
    if (method, path) not in BODIES:
        pytest.fail(f"add a valid sample body for {method} {path} to BODIES")
    return {
        name: ids["spare_destination_id"] if value == "{spare_destination_id}" else value
        for name, value in BODIES[(method, path)].items()
    }


async def test_scoping__another_organizations_objects_are_404(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Any]]
) -> None:
    owner = await make_tenant(conn, name="Owner", plan="pro")
    intruder = await make_tenant(conn, name="Intruder", plan="pro")
    async with api_client(mailed(services, smtp_server)) as client:
        theirs = await _world(client, services, conn, owner)
        mine = await _world(client, services, conn, intruder)
        before = await _snapshot(client, owner, theirs)
        answered, leaked = {}, {}
        for method, path in OPERATIONS:
            named = "{" in path
            response = await client.request(
                method,
                _fill(method, path, theirs if named else mine),
                json=_body(method, path, mine),
                headers=intruder.headers,
            )
            if named:
                answered[method, path] = (response.status_code, response.json().get("code"))
            else:
                # A list or a create of the caller's own shows nothing of theirs.
                assert response.status_code < 300, (method, path, response.text)
                leaked[method, path] = [
                    v for k, v in theirs.items() if k != "version" and v in response.text
                ]
        # Every call on another organization's objects, in one database: each is a 404 that
        # changed nothing of theirs (a call that did would show in the snapshot).
        assert {op: seen for op, seen in answered.items() if seen != (404, "not_found")} == {}
        assert {op: ids for op, ids in leaked.items() if ids} == {}
        assert len(answered) >= 40 and len(leaked) >= 10
        assert await _snapshot(client, owner, theirs) == before


def _own_order(operation: tuple[str, str]) -> tuple[int, int, bool, str]:
    """Reads first, then changes (erasing last), then deletes, what others hang from last."""
    method, path = operation
    if method == "GET":
        return (0, 0, False, path)
    if method != "DELETE":
        return (2 if path.endswith("/erase") else 1, 0, False, path)
    parent = path.startswith(("/v1/forms/", "/v1/destinations/", "/v1/streams/"))
    return (3, -path.count("/"), parent, path)


async def test_scoping__the_same_calls_on_the_callers_own_objects_succeed(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Any]]
) -> None:
    # So that each 404 above is the scope, not a body or a path the route refuses. One
    # world takes the calls in an order that keeps what each needs; a call that still
    # fails there (what an earlier call changed) is made again in a world of its own.
    # Each call that succeeds leaves exactly the audit rows its rule declares: one for a
    # change or a read of values, none for any other read.
    intruder = await make_tenant(conn, name="Intruder", plan="pro")
    audited = _audited()
    refused, recorded = {}, {}
    async with api_client(mailed(services, smtp_server)) as client:
        mine = await _world(client, services, conn, intruder)
        for method, path in sorted(OPERATIONS, key=_own_order):
            trail = await _trail(conn, intruder)
            own = await client.request(
                method,
                _fill(method, path, mine),
                json=_body(method, path, mine),
                headers=intruder.headers,
            )
            if own.status_code >= 300:
                fresh = await _world(client, services, conn, intruder)
                trail = await _trail(conn, intruder)
                own = await client.request(
                    method,
                    _fill(method, path, fresh),
                    json=_body(method, path, fresh),
                    headers=intruder.headers,
                )
            if own.status_code >= 300:
                refused[method, path] = own.text
                continue
            rule = audited.get((method, path))
            records = rule is not None and rule.status in (None, own.status_code)
            added = (await _trail(conn, intruder))[len(trail) :]
            expected = [rule.action] if rule is not None and records else []
            # A stream's first ingest key is recorded with it; a read of one object the
            # key read moments ago is that read (READ_ONCE).
            expected = ALSO_RECORDED.get((method, path), []) + expected
            again = rule is not None and rule.action in READ_ONCE and added == []
            if added != expected and not again:
                recorded[method, path] = added
    assert refused == {}
    assert recorded == {}
    assert len(audited) >= 35


# Rows a call records before its rule's own.
ALSO_RECORDED = {("POST", "/v1/streams"): ["ingest_key.created"]}


async def _trail(conn: Conn, tenant: Tenant) -> list[str]:
    """The organization's audit actions, oldest first."""
    cur = await conn.execute(
        "SELECT action FROM audit_log WHERE organization_id = %(org)s ORDER BY seq",
        {"org": tenant.org},
    )
    return [row["action"] for row in await cur.fetchall()]


async def test_scoping__a_route_to_another_organizations_destination_is_404(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Any]]
) -> None:
    owner = await make_tenant(conn, name="Owner", plan="pro")
    intruder = await make_tenant(conn, name="Intruder", plan="pro")
    async with api_client(mailed(services, smtp_server)) as client:
        theirs = await _world(client, services, conn, owner)
        mine = await _world(client, services, conn, intruder)
        response = await client.post(
            f"/v1/forms/{mine['form_id']}/routes",
            json={"destination_id": theirs["spare_destination_id"]},
            headers=intruder.headers,
        )
    assert_problem(response, 404, "not_found")


def test_scoping__every_v1_operation_is_covered() -> None:
    # Guards the parametrisation itself: the table above really holds the app's routes.
    assert ("DELETE", "/v1/routes/{route_id}") in OPERATIONS
    assert ("GET", "/v1/usage") in OPERATIONS
    assert len(OPERATIONS) >= 20
