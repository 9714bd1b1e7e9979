"""The implicit ham pass (docs/spam.md#implicit-ham): an accepted post left alone past its
form's grace period teaches the learned filter "not spam" once; one the owner marked, a
test post and a form with implicit ham off teach nothing, and the grace is the form's."""

from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.records import rows
from tests.support.spam import JSON_ACCEPT, spam_form
from tests.support.submit import submit_client


async def _post(services: Services, form: str, message: str, **extra: str) -> str:
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", json={"message": message, **extra}, headers=JSON_ACCEPT
        )
    assert response.status_code == 201, response.text
    return str(response.json()["receipt"])


async def _taught(conn: Conn) -> dict[str, str]:
    found = await rows(conn, "SELECT submission_id, label FROM spam_training")
    return {r["submission_id"]: r["label"] for r in found}


async def test_ham__left_alone_teaches_once_marked_or_test_posts_never(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(services, conn)
    left = await _post(services, form, "A question about delivery times to Leeds")
    marked = await _post(services, form, "Cheap backlinks for your website today")
    test = await _post(services, form, "Checking the form works", _test="1")
    async with api_client(services, tenant.key) as api:
        response = await api.post(f"/v1/submissions/{marked}/spam")
        assert response.status_code == 200, response.text
    stats = await run_retention(services, now=utcnow() + timedelta(hours=73), budget=10)
    assert (stats["implicit_ham_taught"], stats["implicit_ham_dropped"]) == (1, 1)
    assert await _taught(conn) == {left: "ham", marked: "spam"}
    assert test not in await _taught(conn)
    later = await run_retention(services, now=utcnow() + timedelta(hours=80), budget=10)
    assert later.get("implicit_ham_taught", 0) == 0
    assert await rows(conn, "SELECT ham_docs, spam_docs FROM spam_models") == [
        {"ham_docs": 1, "spam_docs": 1}
    ]


async def test_ham__a_form_with_implicit_ham_off_or_a_longer_grace_teaches_nothing_yet(
    services: Services, conn: Conn
) -> None:
    _, off = await spam_form(services, conn, {"implicit_ham": False})
    _, longer = await spam_form(services, conn, {"implicit_ham_hours": 200})
    _, turned_off = await spam_form(services, conn)
    await _post(services, off, "A question about delivery times to Leeds")
    waiting = await _post(services, longer, "A question about delivery times to Porto")
    dropped = await _post(services, turned_off, "A question about delivery times to Graz")
    await rows(
        conn,
        "UPDATE forms SET spam = '{\"implicit_ham\": false}' WHERE id = %(id)s RETURNING 1",
        id=turned_off,
    )
    stats = await run_retention(services, now=utcnow() + timedelta(hours=73), budget=10)
    assert stats.get("implicit_ham_taught", 0) == 0
    assert stats["implicit_ham_dropped"] == 1
    assert await _taught(conn) == {}
    await run_retention(services, now=utcnow() + timedelta(hours=201), budget=10)
    assert await _taught(conn) == {waiting: "ham"}
    assert dropped not in await _taught(conn)


async def test_ham__teaching_never_writes_the_submission_again(
    services: Services, conn: Conn
) -> None:
    """Its due time waits in a queue of its own: the submission's row (its xmin, the
    transaction that last wrote it) is the one the submit stored, and its indexes get no new
    entries."""
    _, form = await spam_form(services, conn)
    left = await _post(services, form, "A question about delivery times to Leeds")
    stored = await rows(conn, "SELECT xmin::text AS x FROM submissions WHERE id = %(i)s", i=left)
    assert await rows(conn, "SELECT submission_id FROM ham_due") == [{"submission_id": left}]
    stats = await run_retention(services, now=utcnow() + timedelta(hours=73), budget=10)
    assert stats["implicit_ham_taught"] == 1
    assert await _taught(conn) == {left: "ham"}
    assert await rows(conn, "SELECT xmin::text AS x FROM submissions WHERE id = %(i)s", i=left) == (
        stored
    )
    assert await rows(conn, "SELECT 1 FROM ham_due") == []
