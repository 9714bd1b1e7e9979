from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli import subprocess_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.settings import TEST_SECRET_KEY


@pytest.mark.parametrize("name", ["submit", "api"])
def test_handler__function_url_get_health(
    name: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    event = load_event("function_url_get_health.json")
    first, warm = invoke(
        name,
        [event, event],
        FakeContext(),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
    )
    assert warm == first
    response = first
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == "application/json"
    assert json.loads(response["body"]) == {
        "status": "ok",
        "database": True,
        "worker_heartbeat_age_seconds": None,
        "oldest_due_delivery_age_seconds": None,
        "stuck_file_deletions": 0,
        "live_workers": 0,
        "replica_worker": None,
        "replica_worker_heartbeat_age_seconds": None,
    }


def test_submit_handler__cold_import_leaves_out_heavy_optional_modules(db_url: str) -> None:
    # A cold start pays for every module imported: the submit path needs no AWS SDK, no
    # FastAPI, no pydantic (settings are plain parsing, the adapters load only to send) and
    # no HTTP client or address validator (Turnstile and acknowledgements import them when
    # a form uses them).
    heavy = {"boto3", "fastapi", "pydantic", "httpx", "email_validator", "jsonschema_rs"}
    code = f"import sys, handlers.submit; print(sorted({heavy!r} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "[]"
