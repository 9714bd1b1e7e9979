"""The retention tick runs its maintenance passes, each every minute, in a fixed order; a
pass that fails is logged, the others still run, and the tick fails with its error."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.maintenance import MINUTE
from core.ticks.passes.history import HISTORY_DAYS
from core.ticks.registry import TICKS
from core.ticks.retention import PASSES, run_retention
from tests.support.builders import make_tenant
from tests.support.cli import postbag, subprocess_env
from tests.support.records import rows
from tests.support.storage import stored_object

# Each pass and a counter it always reports, in the order they run.
REPORTED = {
    "expiry": None,  # its counters appear once it erased something (tests/ticks/passes/)
    "stream_expiry": None,
    "orphans": "orphans",
    "files": None,
    "history": "events_pruned",
    "counts": "reset_counts_pruned",
    "drift": "drift_pruned",
    "fingerprints": "spam_fingerprints_pruned",
    "ham": "implicit_ham_taught",
    "heartbeats": "heartbeats_pruned",
    "invitations": "invitations_swept",
    "audit_export": None,  # only with POSTBAG_AUDIT_EXPORT_URL (tests/http/v1/test_audit_export.py)
    "audit_retention": "audit_rows_forgotten",
    "inference": "schemas_inferred",
    "health": "destinations_rolled_up",
    "autopause": "destinations_paused",
    "quota": "released",
    "sessions": "sessions_forgotten",
    "notices": "notice_emails",
}


async def test_retention__every_pass_registered_in_order_each_minute(
    db_url: str, tmp_path: Path
) -> None:
    assert [p.name for p in PASSES] == list(REPORTED)
    assert {p.every for p in PASSES} == {MINUTE}
    assert TICKS["retention"].every_seconds == MINUTE.total_seconds()
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url, POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}"
    )
    ticked = postbag("tick", "retention", "--budget", "10", env=env)
    assert ticked.returncode == 0, ticked.stderr
    counters = json.loads(ticked.stdout)
    reported = {counter for counter in REPORTED.values() if counter is not None}
    assert reported <= counters.keys(), reported - counters.keys()


class BrokenStorage:
    """A store whose deletes fail with an error no pass expects."""

    async def put(self, key: str, path: Path, *, content_type: str) -> None:
        raise NotImplementedError

    def read(self, key: str) -> object:
        raise NotImplementedError

    async def delete(self, key: str) -> None:
        raise RuntimeError(f"the store is gone ({key})")


async def test_retention__a_failing_pass_is_logged_and_the_passes_after_it_still_run(
    services: Services, conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = await make_tenant(conn)
    await stored_object(conn, tenant.org, created_ago=timedelta(minutes=5), due=True)
    now = utcnow()
    old = now - timedelta(days=HISTORY_DAYS + 1)
    await conn.execute(
        "INSERT INTO events (organization_id, type, created_at)"
        " VALUES (%(org)s, 'submission.received', %(at)s)",
        {"org": tenant.org, "at": old},
    )
    with (
        caplog.at_level(logging.ERROR, logger="postbag"),
        pytest.raises(RuntimeError, match="the store is gone"),
    ):
        await run_retention(services, now=now, budget=10, storage=BrokenStorage())
    [failed] = [r for r in caplog.records if r.getMessage() == "maintenance pass failed"]
    assert getattr(failed, "detail", None) == {"pass": "files"}
    # The history pass, after the files pass, ran.
    assert await rows(conn, "SELECT id FROM events WHERE created_at = %(at)s", at=old) == []
