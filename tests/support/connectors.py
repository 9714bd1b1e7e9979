"""The connectors of `integrations/` run in Node, a step at a time, against a real Postbag."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE = "/usr/bin/node"
ROOT = Path(__file__).parents[2]
INTEGRATIONS = ROOT / "integrations"
# Where ./local/test installs the pinned npm packages the tests use.
NODE_MODULES = ROOT / ".venv" / "node" / "node_modules"


def need_node_package(name: str) -> None:
    """Skip, saying why, when ./local/test could not install `name`."""
    if not (NODE_MODULES / name).is_dir():
        pytest.skip(
            f"NODE CHECK SKIPPED: the {name} npm package is missing "
            f"(./local/test installs it into {NODE_MODULES.parent})"
        )


def run_node(script: Path, argv: list[str], **env: str) -> Any:
    """Run a connector's harness (`node SCRIPT ARGV…`); the result it prints as JSON after
    `RESULT ` (a failure fails the test with its error)."""
    done = subprocess.run(
        [NODE, str(script), *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES), **env},
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    answer = json.loads(line.removeprefix("RESULT "))
    assert answer["ok"], f"{argv[0]}: {answer['error']}\n{done.stderr}"
    return answer["result"]
