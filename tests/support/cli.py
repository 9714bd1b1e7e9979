"""Running the `postbag` command in a subprocess, with none of the parent's Postbag settings."""

from __future__ import annotations

import os
import subprocess
import sys
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
