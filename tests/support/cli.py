"""Running the `postbag` command in a subprocess, with none of the parent's Postbag settings:
to completion, or as a server or worker stopped by SIGTERM."""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.peers import closed_port

ROOT = Path(__file__).resolve().parents[2]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a `postbag` subprocess, without the parent's Postbag settings,
    importing this tree's code (the editable install may point at another checkout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POSTBAG_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
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


def spawn(
    *args: str, env: dict[str, str], cwd: Path | None = None, open_files: int | None = None
) -> subprocess.Popen[str]:
    """Start `postbag <args>` (a server or a worker); stdout and stderr go to one pipe.
    `open_files` starts it with that soft limit of open files."""

    def lower_open_files() -> None:
        assert open_files is not None
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

    return subprocess.Popen(
        [sys.executable, "-m", "local.cli", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lower_open_files if open_files is not None else None,
    )


def wait_until_serving(proc: subprocess.Popen[str], url: str, seconds: float = 60) -> None:
    """Wait until `url` answers (any status); fail with the output if `proc` exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[0])
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {seconds} s")


def terminate(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, float]:
    """Send SIGTERM; the exit code, the output and the seconds it took to exit."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out, time.monotonic() - started


@contextmanager
def serving_process(
    env: dict[str, str], *args: str, open_files: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`postbag serve` on a free port until the block ends; its base URL and process."""
    port = closed_port()
    proc = spawn(
        "serve", "--host", "127.0.0.1", "--port", str(port), *args, env=env, open_files=open_files
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, base + "/health")
        yield base, proc
    finally:
        code, out, _ = terminate(proc)
        assert code == 0, out


@contextmanager
def serving(env: dict[str, str], *args: str) -> Iterator[str]:
    """`postbag serve` on a free port until the block ends; its base URL."""
    with serving_process(env, *args) as (base, _proc):
        yield base
