"""Worker processes for the outbox's tests: `postbag tick deliver` as a real subprocess."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable

from tests.support.cli import subprocess_env


def worker(db_url: str, budget: float = 120) -> subprocess.Popen[bytes]:
    """One `postbag tick deliver` pass in its own process, allowed to send to loopback."""
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_ALLOW_PRIVATE_TARGETS="true",
        POSTBAG_LOG_LEVEL="WARNING",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "local.cli", "tick", "deliver", "--budget", str(budget)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_exit(processes: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait for every process to exit, and assert each exited 0."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for process in processes:
        assert process.poll() == 0, "a worker failed or hung"


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
