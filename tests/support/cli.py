"""Running the `postbag` command in a subprocess, with none of the parent's Postbag settings."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a `postbag` subprocess, without the parent's Postbag settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTBAG_")}
    env.update(extra)
    return env


def postbag(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `postbag <args>` to completion; its output is captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "local.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Output:
    """What a running `postbag` process has written so far to its piped stdout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._seen = b""

    def until(self, marker: str, *, count: int = 1, timeout: float = 120) -> str:
        """Wait until `marker` has appeared `count` times; return everything seen."""
        deadline = time.monotonic() + timeout
        while self._seen.decode(errors="replace").count(marker) < count:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._fd], [], [], max(remaining, 0))
            chunk = os.read(self._fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"no {marker!r} in:\n{self._seen.decode(errors='replace')}")
            self._seen += chunk
        return self._seen.decode(errors="replace")
