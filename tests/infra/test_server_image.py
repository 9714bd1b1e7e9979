"""The self-hosting image and compose file: no Docker engine here, so what they run is
checked to exist (entry point, commands, user, health check), and the health check command
is run against a real `postbag serve`."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.http.server import GRACE_SECONDS
from local.cli import build_parser
from tests.support.cli import spawn, subprocess_env, terminate, wait_until_serving
from tests.support.peers import closed_port
from tests.support.settings import TEST_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "infra" / "server.Dockerfile"
COMPOSE = ROOT / "infra" / "compose.yaml"


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def _one(keyword: str) -> str:
    [value] = [rest for key, rest in _instructions() if key == keyword]
    return value


def _healthcheck_command() -> list[str]:
    check = _one("HEALTHCHECK")
    command: list[str] = json.loads(check.split(" CMD ", 1)[1])
    return command


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_server_image__entry_point_and_command_are_the_postbag_cli() -> None:
    entry = json.loads(_one("ENTRYPOINT"))
    assert entry == ["python", "-m", "local.cli"]
    assert callable(importlib.import_module("local.cli").main)
    command = json.loads(_one("CMD"))
    assert build_parser().parse_args(command).command == "serve"
    # What the image copies exists, and it installs no extra (no dev tools, no pgserver).
    copied = [rest.split()[0] for key, rest in _instructions() if key == "COPY"]
    assert all((ROOT / source).exists() for source in copied), copied
    installs = [rest for key, rest in _instructions() if key == "RUN" and "pip install" in rest]
    assert installs and not any("[" in line for line in installs)
    assert (ROOT / "migrations").is_dir() and "COPY migrations /app/migrations" in (
        DOCKERFILE.read_text()
    )


def test_server_image__runs_as_a_user_it_creates_never_root() -> None:
    user = _one("USER")
    assert user not in ("root", "0")
    creates = [rest for key, rest in _instructions() if key == "RUN" and "useradd" in rest]
    assert creates and re.search(rf"useradd\b.*\s{re.escape(user)}(\s|$)", creates[0])
    assert f"chown -R {user} /var/lib/postbag" in creates[0]
    storage = [rest for key, rest in _instructions() if key == "ENV"]
    assert any("POSTBAG_STORAGE_URL=file:///var/lib/postbag/files" in env for env in storage)


def test_compose__migrate_once_then_serve_and_two_workers_from_the_image() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "migrate", "serve", "worker"}
    parser = build_parser()
    for name in ("migrate", "serve", "worker"):
        service = services[name]
        build = service["build"]
        assert (ROOT / "infra" / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        assert parser.parse_args(service["command"]).command == name
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("serve", "worker"):
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}
        }
    assert services["worker"]["deploy"]["replicas"] == 2
    # A worker has no HTTP, so the image's /health check is off for it.
    assert services["worker"]["healthcheck"] == {"disable": True}
    # The orchestrator waits longer than the worker's grace and the server's.
    grace = parser.parse_args(services["worker"]["command"]).grace
    assert int(services["worker"]["stop_grace_period"].rstrip("s")) > grace
    assert int(services["serve"]["stop_grace_period"].rstrip("s")) > GRACE_SECONDS


def test_self_host_guide__shows_the_compose_file_as_it_is() -> None:
    guide = (ROOT / "docs" / "self-host.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", guide, re.DOTALL)
    assert COMPOSE.read_text() in blocks
    assert "docs/self-host.md" in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_server_image__its_health_check_command_passes_against_postbag_serve(
    db_url: str, tmp_path: Path
) -> None:
    command = _healthcheck_command()
    assert command[0] == "python"
    port = closed_port()
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        PORT=str(port),
    )
    check = [sys.executable, *command[1:]]
    nothing = subprocess.run(check, env=env, capture_output=True, timeout=30, check=False)
    proc = spawn("serve", "--host", "127.0.0.1", env=env)  # the port from PORT, as Cloud Run's
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}/health")
        passed = subprocess.run(check, env=env, capture_output=True, timeout=30, check=False)
    finally:
        code, out, _ = terminate(proc)
    assert nothing.returncode != 0
    assert passed.returncode == 0, passed.stderr
    assert code == 0, out
