"""Every benchmark in its smoke mode (`--smoke`: tiny sizes, seconds, the real code paths
end to end), so that a change breaking one fails the build; `.ci/run` runs it after the
test suite. Exits non-zero at the first that fails, after printing its output and
interrupting the others.

    .venv/bin/python -m tests.bench.smoke \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres [--jobs 4] [--only deliver,cloud]

Each benchmark runs in its own process (its own databases, ports and folders), `--jobs` at
a time; each one's output is printed when it ends, with its seconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]

# The arguments each benchmark's smoke run takes besides `--smoke --admin-url` (submit's
# flags run the most of its code: a worker process delivering, the schema enforced), the
# longest first so that the last to start are short.
BENCHMARKS: dict[str, list[str]] = {
    "hostile": [],
    "schema": [],
    "deliver": [],
    "submit": ["--worker-process", "--enforce"],
    "pooler": [],
    "streams": [],
    "search": [],
    "cloud": [],
    "bomb": [],
    "history": [],
    "keys": [],
    "scale": [],
}
# What a smoke run may take before it counts as failed (a benchmark that hangs).
TIMEOUT = 300.0


@dataclass
class Running:
    name: str
    process: subprocess.Popen[bytes]
    output: IO[bytes]
    started: float


def start(name: str, admin_url: str) -> Running:
    output = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", f"tests.bench.{name}", "--smoke", "--admin-url", admin_url]
        + BENCHMARKS[name],
        cwd=ROOT,
        stdout=output,
        stderr=subprocess.STDOUT,
        # Its own process group: interrupted with the servers it started.
        start_new_session=True,
    )
    return Running(name, process, output, time.monotonic())


def report(run: Running, verdict: str) -> None:
    run.output.seek(0)
    text = run.output.read().decode(errors="replace")
    seconds = time.monotonic() - run.started
    print(f"--- {run.name}: {verdict} in {seconds:.1f} s", flush=True)
    print(text.rstrip(), flush=True)


def interrupt(runs: list[Running]) -> None:
    """SIGINT to each one's group (its `finally` blocks drop its databases and stop its
    servers), then SIGKILL to those still running after 30 s."""
    for run in runs:
        os.killpg(run.process.pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    for run in runs:
        try:
            run.process.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            os.killpg(run.process.pid, signal.SIGKILL)
            run.process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    # Most of a smoke run waits (servers starting, rounds of fixed seconds): 4 at a time
    # on 2 cores take about half the time of 2.
    parser.add_argument("--jobs", type=int, default=4, help="benchmarks at a time")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated names")
    args = parser.parse_args()
    waiting = args.only.split(",")
    unknown = set(waiting) - set(BENCHMARKS)
    if unknown:
        parser.error(f"no such benchmark: {', '.join(sorted(unknown))}")
    began = time.monotonic()
    running: list[Running] = []
    try:
        while waiting or running:
            while waiting and len(running) < args.jobs:
                running.append(start(waiting.pop(0), args.admin_url))
            time.sleep(0.1)
            for run in list(running):
                code = run.process.poll()
                late = time.monotonic() - run.started > TIMEOUT
                if code is None and not late:
                    continue
                running.remove(run)
                if code == 0:
                    report(run, "ok")
                    continue
                if late:
                    interrupt([run])
                report(run, "TIMED OUT" if late else f"FAILED (exit {code})")
                return 1
    finally:
        # A failure, or this run interrupted: the others stop too.
        interrupt(running)
    print(f"--- all benchmarks' smoke runs passed in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
