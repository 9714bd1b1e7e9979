"""`postbag` as a client of `/v1`, against a served runner: each command once."""

from __future__ import annotations

import io
import json
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.platform.ids import new_id
from local.cli import main
from tests.support.cli import postbag, subprocess_env
from tests.support.runner import World, seeded_world, submit


@pytest.fixture(scope="module")
def world(
    admin_url: str, template_name: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with seeded_world(admin_url, template_name, tmp_path_factory.mktemp("client")) as found:
        yield found


@pytest.fixture
def as_acme(world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> World:
    """The environment names the runner and Acme's key; no stored login."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("POSTBAG_API_URL", world.url)
    monkeypatch.setenv("POSTBAG_API_KEY", world.acme.key)
    return world


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_login__checks_the_key_and_stores_it_for_the_owner_only(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("POSTBAG_API_URL", raising=False)
    monkeypatch.delenv("POSTBAG_API_KEY", raising=False)
    stored = tmp_path / "postbag" / "credentials.json"

    monkeypatch.setattr(sys, "stdin", io.StringIO("pb_not_a_key\n"))
    assert run(capsys, "login", world.url)[:1] == (1,)
    assert not stored.exists()

    monkeypatch.setattr(sys, "stdin", io.StringIO(world.acme.key + "\n"))
    logged = run_json(capsys, "login", world.url + "/")
    assert logged == {"url": world.url, "plan": "pro", "stored_in": str(stored)}
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text()) == {"url": world.url, "api_key": world.acme.key}

    forms = run_json(capsys, "forms", "list")
    assert [form["id"] for form in forms["data"]][:1] == [world.form]
    monkeypatch.setenv("POSTBAG_API_KEY", world.other.key)  # the environment overrides
    assert run_json(capsys, "forms", "list")["data"] == []


def test_forms__create_list_show(as_acme: World, capsys: pytest.CaptureFixture[str]) -> None:
    created = run_json(
        capsys, "forms", "create", "--name", "Quote", "--origin", "https://acme.example"
    )
    listed = run_json(capsys, "forms", "list")
    code, table, _ = run(capsys, "forms", "show", created["id"])
    assert created["allowed_origins"] == ["https://acme.example"]
    assert created["id"] in [form["id"] for form in listed["data"]]
    assert code == 0
    assert "submit_url" in table and created["submit_url"] in table
    assert f'<form action="{created["submit_url"]}"' in table
    code, table, _ = run(capsys, "forms", "list")
    assert table.splitlines()[0].split() == ["ID", "NAME", "ACCEPTING", "SUBMIT_URL"]


def test_submissions__list_show_export_erase(
    as_acme: World, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    world = as_acme
    receipt = submit(world.url, world.form, {"email": "grace@example.com", "message": "Hi"})
    listed = run_json(capsys, "submissions", "list", "--form", world.form)
    shown = run_json(capsys, "submissions", "show", world.submission)
    code, table, _ = run(capsys, "submissions", "show", world.submission)
    exported = run_json(capsys, "submissions", "export", "--form", world.form)
    code_csv, csv_text, _ = run(capsys, "submissions", "export", "--form", world.form)
    unconfirmed = run(capsys, "submissions", "erase", receipt)  # no terminal, no --yes
    still = run_json(capsys, "submissions", "show", receipt)
    erased = run_json(capsys, "submissions", "erase", receipt, "--yes")
    assert {row["id"] for row in listed["data"]} >= {world.submission, receipt}
    assert shown["values"] == {"email": "ada@example.com", "message": "Hello"}
    assert code == 0 and "ada@example.com" in table and world.delivery in table
    assert "grace@example.com" in exported["csv"]
    assert code_csv == 0 and csv_text.splitlines()[0].startswith("receipt,")
    assert unconfirmed[0] == 2 and "--yes" in unconfirmed[2]
    assert still["values_state"] == "present"
    assert erased["values_state"] == "erased" and erased["values"] is None
    assert run_json(capsys, "submissions", "show", receipt)["values"] is None


def test_deliveries__list_show_retry(as_acme: World, capsys: pytest.CaptureFixture[str]) -> None:
    world = as_acme
    listed = run_json(capsys, "deliveries", "list", "--submission", world.submission)
    shown = run_json(capsys, "deliveries", "show", world.delivery)
    retried = run_json(capsys, "deliveries", "retry", world.delivery)
    code, table, _ = run(capsys, "deliveries", "list", "--submission", world.submission)
    assert [row["id"] for row in listed["data"]] == [world.delivery]
    assert shown["status"] in {"dead", "pending"} and "history" in shown
    assert retried["status"] == "pending"
    assert code == 0 and world.delivery in table and "STATUS" in table.splitlines()[0]


def test_a_refusal_exits_1_with_the_problem_code_and_detail(
    as_acme: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = new_id("frm")
    code, out, err = run(capsys, "forms", "show", absent)
    assert (code, out) == (1, "")
    assert err.strip() == f"postbag: not_found: no form {absent}"
    code, _, err = run(capsys, "forms", "create", "--name", "X", "--origin", "nope")
    assert code == 1 and err.startswith("postbag: invalid_input:") and "allowed_origins" in err
    monkeypatch.setenv("POSTBAG_API_URL", "http://127.0.0.1:1")  # nothing listens there
    code, _, err = run(capsys, "forms", "list")
    assert code == 1 and err.startswith("postbag: unreachable: http://127.0.0.1:1")


def test_a_key_acts_with_its_role_in_the_client_commands(
    as_acme: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = httpx.post(
        f"{as_acme.url}/v1/keys",
        json={"name": "support", "role": "viewer"},
        headers={"Authorization": f"Bearer {as_acme.acme.key}"},
    )
    assert made.status_code == 201, made.text
    monkeypatch.setenv("POSTBAG_API_KEY", made.json()["key"])
    assert [f["id"] for f in run_json(capsys, "forms", "list")["data"]][:1] == [as_acme.form]
    code, out, err = run(capsys, "submissions", "show", as_acme.submission)
    assert (code, out) == (1, "")
    assert err.strip() == "postbag: forbidden: this needs the operator role; yours is viewer"


def test_usage_errors_exit_2(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["submissions", "export"])  # --form is required
    assert exited.value.code == 2
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("POSTBAG_API_URL", raising=False)
    monkeypatch.delenv("POSTBAG_API_KEY", raising=False)
    code, _, err = run(capsys, "forms", "list")
    assert code == 2 and "postbag login URL" in err


@pytest.mark.slow
def test_events_tail__follows_the_stream_until_ctrl_c_and_exit_codes_of_the_process(
    world: World, tmp_path: Path
) -> None:
    env = subprocess_env(
        POSTBAG_API_URL=world.url,
        POSTBAG_API_KEY=world.acme.key,
        XDG_CONFIG_HOME=str(tmp_path),
    )
    tail = subprocess.Popen(
        [sys.executable, "-m", "local.cli", "events", "tail", "--json", "--interval", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert tail.stdout is not None
        first = json.loads(tail.stdout.readline())  # the stream so far, from the start
        later = submit(world.url, world.form, {"email": "later@example.com", "message": "Hm"})
        seen: list[dict[str, Any]] = [first]
        deadline = time.monotonic() + 20
        while later not in {event["subject"] for event in seen}:
            assert time.monotonic() < deadline, seen
            seen.append(json.loads(tail.stdout.readline()))
    finally:
        tail.send_signal(signal.SIGINT)
        _, err = tail.communicate(timeout=20)
    assert tail.returncode == 0, err
    assert first["subject"] == world.submission and first["type"] == "submission.received"
    assert [event["id"] for event in seen] == sorted({event["id"] for event in seen})

    refused = postbag("deliveries", "show", "dlv_missing", env=env)
    assert refused.returncode == 1 and "not_found" in refused.stderr
    usage = postbag("deliveries", "retry", env=env)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_streams__create_send_list(
    as_acme: World, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    created = run_json(capsys, "streams", "create", "--name", "Orders")
    code, shown_text, _ = run(capsys, "streams", "create", "--name", "Signups")
    assert code == 0 and "ingest key (shown once): pbs_" in shown_text
    assert created["ingest_key"]["key"].startswith("pbs_")
    data = tmp_path / "order.json"
    data.write_text(json.dumps({"order": 1042, "total": 99.5}))
    stream = created["id"]
    sent = run_json(
        capsys, "send", stream, "--type", "order.paid", "--data", f"@{data}", "--id", "o-1"
    )
    again = run_json(
        capsys, "send", stream, "--type", "order.paid", "--data", f"@{data}", "--id", "o-1"
    )
    changed = run(capsys, "send", stream, "--type", "order.paid", "--data", "{}", "--id", "o-1")
    listed = run_json(capsys, "streams", "events", stream, "--type", "order.paid")
    streams = run_json(capsys, "streams", "list")
    assert (sent["status"], sent["id"]) == ("accepted", "o-1")
    assert again == {"event": sent["event"], "id": "o-1", "status": "duplicate"}
    assert changed[0] == 1 and "idempotency_conflict" in changed[2]
    assert [(e["event"], e["data"]) for e in listed["data"]] == [
        (sent["event"], {"order": 1042, "total": 99.5})
    ]
    assert stream in [s["id"] for s in streams["data"]]
    assert run_json(capsys, "streams", "show", stream)["name"] == "Orders"
