"""The cloud guide (docs/deploy.md) runs as written: no AWS here, so every variable its
commands use is checked to be set by an earlier command of the guide, and the commands that
need no AWS (the first organization with its owner, the import-time check) are run as the
guide writes them, against a real database."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
_USED = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_SET = re.compile(r"(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=")
API_URL = "https://abc123.lambda-url.eu-west-1.on.aws/"


def _blocks() -> list[str]:
    """The guide's shell blocks, continuation lines joined."""
    return [block.replace("\\\n", " ") for block in _BLOCK.findall(GUIDE.read_text())]


def _command(marker: str) -> str:
    """The one command of the guide holding `marker`, with the checkout's `.venv` as this
    test's interpreter."""
    [line] = [line for block in _blocks() for line in block.splitlines() if marker in line]
    programs = {
        ".venv/bin/postbag": f"{sys.executable} -m local.cli",
        ".venv/bin/python": sys.executable,
    }
    return re.sub(r"\.venv/bin/(?:postbag|python)", lambda m: programs[m.group(0)], line)


def test_deploy_guide__every_variable_is_set_before_it_is_used() -> None:
    known: set[str] = set()
    unset: list[str] = []
    for block in _blocks():
        for line in block.splitlines():
            code = line.split(" #", 1)[0]
            unset += [name for name in _USED.findall(code) if name not in known]
            known.update(_SET.findall(code))
    assert unset == []
    assert {"REGION", "ACCOUNT", "TAG", "ApiUrl", "SubmitUrl"} <= known


@pytest.mark.slow
def test_deploy_guide__the_first_organization_has_an_owner_who_can_sign_in(db_url: str) -> None:
    command = _command("create-org")
    done = subprocess.run(
        ["bash", "-c", command],
        env=subprocess_env(DATABASE_URL=db_url, ApiUrl=API_URL),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    assert created["api_key"].startswith("pb_")
    assert created["owner_link"].startswith(f"{API_URL}app/reset/")
    assert "**`$ApiUrl` + `app`**" in GUIDE.read_text()


@pytest.mark.slow
def test_deploy_guide__the_import_time_check_runs_as_written() -> None:
    done = subprocess.run(
        ["bash", "-c", _command("importtime")],
        env=subprocess_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"import time:\s+\d+ \|\s+\d+ \| handlers\.submit\n", done.stdout)
