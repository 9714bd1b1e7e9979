from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from tests.support.cli import postbag, subprocess_env


def _stderr_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    """Run `postbag <args>` with stderr on a pseudo-terminal; return what it wrote there."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "local.cli", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=follower,
            timeout=120,
            check=False,
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    assert proc.returncode == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_logs__readable_lines_on_a_terminal_json_lines_when_piped(db_url: str) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_LOG_LEVEL="DEBUG")
    on_terminal = _stderr_on_a_terminal("tick", "deliver", "--budget", "1", env=env)
    piped = postbag("tick", "deliver", "--budget", "1", env=env)
    assert re.search(
        r"^\d\d:\d\d:\d\d debug +tick pass  tick=deliver released=0 claimed=0$",
        on_terminal,
        re.MULTILINE,
    ), on_terminal
    assert "{" not in on_terminal
    lines = [json.loads(line) for line in piped.stderr.splitlines()]
    passes = [line for line in lines if line["message"] == "tick pass"]
    assert passes and passes[0]["tick"] == "deliver" and passes[0]["level"] == "debug"


def test_logs__a_tick_pass_that_did_nothing_is_not_logged_at_info(db_url: str) -> None:
    result = postbag(
        "tick", "deliver", "--budget", "1", env=subprocess_env(POSTBAG_DATABASE_URL=db_url)
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["claimed"] == 0
    assert "tick pass" not in result.stderr


def test_logs__terminal_lines_escape_control_characters_in_values() -> None:
    import logging

    from core.platform.logs import ReadableFormatter

    hostile = "x\x1b[2J\rFAKE\nline\x07"
    record = logging.LogRecord("postbag", logging.INFO, __file__, 1, "seen %s", (hostile,), None)
    record.__dict__.update({"detail": {"text": hostile}, "form_id": "frm_plain"})
    line = ReadableFormatter().format(record)
    assert "\x1b" not in line and "\r" not in line and "\n" not in line and "\x07" not in line
    assert json.dumps("seen " + hostile) in line
    assert "text=" + json.dumps(hostile) in line
    assert "form_id=frm_plain" in line
