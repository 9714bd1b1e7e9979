"""What a zip bomb upload costs a real runner: RSS and the longest `/health` answer.

Starts `postbag dev --no-ticks` from the tree given (its code, this tree's bomb builder)
against a fresh database, makes a form whose file field takes `.odt`, polls `/health`
from a thread while a 1 MB ZIP inflating to 1 GiB is posted, and prints one JSON line:
the runner's RSS before, its peak (VmHWM) after, the upload's time and the longest and
median `/health` answers meanwhile.

    .venv/bin/python tests/bench/bomb.py --tree . \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: the figures depend on the machine. `--smoke` (already seconds) also fails
unless the bomb is refused (422).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psycopg
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.builders import make_tenant
from tests.support.databases import create_database, database_url, drop_database
from tests.support.files import zip_bomb

_RUNNER = "from local.cli import main; import sys; sys.exit(main(sys.argv[1:]))"


def _megabytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) // 1024
    raise LookupError(field)


async def _new_key(url: str) -> str:
    """An API key of a new organization (the runner has migrated the database by now)."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row)
    try:
        return (await make_tenant(conn, name="Bomb")).key
    finally:
        await conn.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure(tree: Path, admin_url: str) -> dict[str, object]:
    name = create_database(admin_url)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "POSTBAG_DATABASE_URL": database_url(admin_url, name),
        "POSTBAG_SECRET_KEY": secrets.token_urlsafe(40),
        "POSTBAG_STORAGE_URL": f"file://{Path('/tmp') / name}",
        "POSTBAG_PUBLIC_URL": base,
    }
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, "dev", "--port", str(port), "--no-ticks"],
        env=env,
        cwd=tree,  # `-c` puts the working directory first on the path
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            while True:
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    if runner.poll() is not None:
                        raise RuntimeError(f"postbag dev ended with {runner.returncode}") from None
                    time.sleep(0.1)
            key = asyncio.run(_new_key(env["POSTBAG_DATABASE_URL"]))
            form = client.post(
                "/v1/forms",
                json={"name": "F", "file_fields": {"doc": {"types": [".odt"]}}},
                headers={"Authorization": f"Bearer {key}"},
            ).json()["id"]
            before = _megabytes(runner.pid, "VmRSS")
            waits: list[float] = []
            done = threading.Event()

            def poll() -> None:
                with httpx.Client(base_url=base, timeout=120) as health:
                    while not done.is_set():
                        started = time.monotonic()
                        health.get("/health")
                        waits.append(time.monotonic() - started)
                        time.sleep(0.01)

            poller = threading.Thread(target=poll)
            poller.start()
            bomb = zip_bomb()
            started = time.monotonic()
            answer = client.post(
                f"/s/{form}",
                files=[("doc", ("doc.odt", bomb, "application/zip"))],
                headers={"Accept": "application/json"},
            )
            took = time.monotonic() - started
            time.sleep(0.2)
            done.set()
            poller.join()
        return {
            "tree": str(tree),
            "bomb_bytes": len(bomb),
            "status": answer.status_code,
            "code": answer.json().get("code"),
            "rss_before_mb": before,
            "peak_rss_mb": _megabytes(runner.pid, "VmHWM"),
            "upload_seconds": round(took, 2),
            "health_max_ms": round(max(waits) * 1000),
            "health_median_ms": round(sorted(waits)[len(waits) // 2] * 1000),
        }
    finally:
        runner.terminate()
        runner.wait(30)
        drop_database(admin_url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--smoke", action="store_true", help="fail unless the bomb is refused")
    args = parser.parse_args()
    found = measure(args.tree.resolve(), args.admin_url)
    print(json.dumps(found))
    assert not args.smoke or found["status"] == 422, "the bomb was not refused"


if __name__ == "__main__":
    main()
