"""Benchmark of stream ingest against pgbench inserting the same rows.

Starts the local runner (`postbag dev --no-ticks`: ingest alone, as the cloud's api function
runs it) against a fresh database with one stream and one route to a webhook, and drives it
from a separate process at concurrency 8 (`--concurrency`): `POST /v1/streams/{id}/batch`
with 500 events a batch (each with its own id, so each is stored, with one delivery), and
`POST /v1/streams/{id}/events` one event at a time. In the same run pgbench runs the same
rows: per batch one transaction with a multi-row INSERT of 500 events and one of their 500
deliveries; per single event one transaction of one event and one delivery. Each mode runs
`--rounds` alternating rounds (Postbag, then pgbench) of `--duration` seconds, so the
machine's drifting speed weighs on both alike; it prints each round's ratio, then events/s
of both and their ratio.

    .venv/bin/python tests/bench/streams.py \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres --duration 10

Not a test: speed is reported as ratios against a reference run on the same machine.
`--smoke`: one round of 1 s per mode at concurrency 2, failing unless both stored events.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from core.platform.ids import new_id
from tests.bench.receiver import start_receiver
from tests.bench.submit import SECRET, _free_port, _url, pgbench
from tests.support.cli import subprocess_env

BATCH = 500
KEY = "pbs_bench-ingest-key-0123456789abcdef0123456789"
DATA = {"order": 1042, "total": 99.5, "currency": "EUR", "items": ["book", "pen"]}


# --- the load generator (a separate process) ----------------------------------------------


async def _drive(port: int, path: str, batch: int, concurrency: int, duration: float) -> int:
    """Post for `duration` seconds from `concurrency` keep-alive connections (plain HTTP/1.1
    on sockets: the load generator shares the machine, so it spends little); the events
    stored."""
    deadline = time.perf_counter() + duration
    stored = 0
    run = uuid.uuid4().hex[:8]

    async def worker(n: int) -> None:
        nonlocal stored
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        counter = 0
        while time.perf_counter() < deadline:
            counter += 1
            events = [
                {"id": f"{run}-{n}-{counter}-{i}", "type": "order.paid", "data": DATA}
                for i in range(batch)
            ]
            target = path + ("/events" if batch == 1 else "/batch")
            body = json.dumps(events[0] if batch == 1 else {"events": events}).encode()
            writer.write(
                f"POST {target} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            answer = await reader.readexactly(length)
            expected = b"HTTP/1.1 202" if batch == 1 else b"HTTP/1.1 200"
            if not head.startswith(expected) or b'"rejected"' in answer:
                raise RuntimeError((head + answer).decode(errors="replace")[:500])
            stored += batch
        writer.close()

    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return stored


def _drive_process(
    port: int, path: str, batch: int, concurrency: int, duration: float, out: Connection
) -> None:
    out.send(asyncio.run(_drive(port, path, batch, concurrency, duration)))


def drive(port: int, path: str, batch: int, concurrency: int, duration: float) -> int:
    """Drive the runner from another process for `duration` seconds; the events stored."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.Process(
        target=_drive_process, args=(port, path, batch, concurrency, duration, sender)
    )
    process.start()
    stored: int = receiver.recv()
    process.join()
    return stored


# --- pgbench ----------------------------------------------------------------------------------

PGBENCH_SCRIPT = """\
\\set n random(1, 2000000000)
BEGIN;
INSERT INTO stream_events (id, organization_id, stream_id, client_id, type, status, data,
    payload_hash, received_at, erase_at)
SELECT 'evt_pgb' || :client_id || '_' || :n || '_' || txid_current() || '_' || g, '{org}',
    '{stream}', 'pgb-' || :client_id || '-' || :n || '-' || txid_current() || '-' || g,
    'order.paid', 'accepted',
    '{{"order": 1042, "total": 99.5, "currency": "EUR", "items": ["book", "pen"]}}',
    '\\\\x00', now(), now() + interval '90 days'
  FROM generate_series(1, {batch}) g;
INSERT INTO deliveries (id, organization_id, kind, event_id, stream_route_id, destination_id,
    channel, max_attempts, target, secret_version, next_attempt_at)
SELECT 'dlv_pgb' || :client_id || '_' || :n || '_' || txid_current() || '_' || g, '{org}',
    'event', 'evt_pgb' || :client_id || '_' || :n || '_' || txid_current() || '_' || g,
    '{route}', '{dst}', 'webhook', 10, '{{"url": "https://hooks.example.com/a"}}', 1,
    now() + interval '1 year'
  FROM generate_series(1, {batch}) g;
COMMIT;
"""


# --- the run --------------------------------------------------------------------------------------


def setup(url: str, hook_url: str) -> dict[str, str]:
    """The organization, stream, ingest key and route to a loopback webhook."""
    ids = {
        "org": new_id("org"),
        "stream": new_id("str"),
        "dst": new_id("dst"),
        "route": new_id("srt"),
        "key": new_id("sky"),
    }
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO organizations (id, name, plan) VALUES (%(org)s, 'Bench', 'self_hosted')",
            ids,
        )
        conn.execute(
            "INSERT INTO streams (id, organization_id, name) VALUES (%(stream)s, %(org)s, 'B')",
            ids,
        )
        conn.execute(
            "INSERT INTO stream_keys (id, organization_id, stream_id, name, prefix, key_hash) "
            "VALUES (%(key)s, %(org)s, %(stream)s, 'bench', 'pbs_bench', %(hash)s)",
            {**ids, "hash": hashlib.sha256(KEY.encode()).digest()},
        )
        conn.execute(
            "INSERT INTO destinations (id, organization_id, type, name, config) "
            "VALUES (%(dst)s, %(org)s, 'webhook', 'Hook', %(config)s)",
            {**ids, "config": Jsonb({"url": hook_url})},
        )
        conn.execute(
            "INSERT INTO destination_secrets (organization_id, destination_id, version, secret) "
            "VALUES (%(org)s, %(dst)s, 1, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')",
            ids,
        )
        conn.execute(
            "INSERT INTO stream_routes (id, organization_id, stream_id, destination_id) "
            "VALUES (%(route)s, %(org)s, %(stream)s, %(dst)s)",
            ids,
        )
    return ids


def measure(
    port: int,
    path: str,
    url: str,
    script: Path,
    workdir: Path,
    batch: int,
    args: argparse.Namespace,
) -> tuple[float, float, list[float]]:
    """Events/s of Postbag and of pgbench over alternating rounds, and each round's ratio."""
    ours = theirs = 0
    rounds: list[float] = []
    for _ in range(args.rounds):
        mine = drive(port, path, batch, args.concurrency, args.duration)
        transactions = pgbench(url, script, args.concurrency, args.duration, workdir / "logs")
        reference = len(transactions) * batch
        rounds.append(mine / max(reference, 1))
        ours += mine
        theirs += reference
    seconds = args.rounds * args.duration
    return ours / seconds, theirs / seconds, rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per mode")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pool-max", type=int, default=10, help="POSTBAG_DB_POOL_MAX")
    parser.add_argument(
        "--modes", choices=["both", "batch", "single"], default="both", help="what to measure"
    )
    parser.add_argument("--smoke", action="store_true", help="both modes, tiny, in seconds")
    args = parser.parse_args()
    warm_up = 2.0
    if args.smoke:
        args.duration, args.rounds, args.concurrency, warm_up = 1, 1, 2, 0.5

    dbname = f"postbag_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
    url = _url(args.admin_url, dbname)
    workdir = Path(tempfile.mkdtemp(prefix="postbag-bench-"))
    port = _free_port()
    receiver, hook_url = start_receiver()
    env = subprocess_env(
        POSTBAG_DATABASE_URL=url,
        POSTBAG_SECRET_KEY=SECRET,
        POSTBAG_LOG_LEVEL="WARNING",
        POSTBAG_DB_POOL_MAX=str(args.pool_max),
        POSTBAG_STORAGE_URL=f"file://{workdir / 'files'}",
    )
    postbag = str(Path(sys.executable).parent / "postbag")
    runner = subprocess.Popen(
        [postbag, "dev", "--port", str(port), "--no-ticks"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        ids = setup(url, hook_url)
        path = f"/v1/streams/{ids['stream']}"
        drive(port, path, BATCH, 2, warm_up)  # warm-up: pool, caches
        print(
            f"cpus: {os.cpu_count()}, concurrency {args.concurrency}, {args.rounds} rounds of "
            f"{args.duration} s each (Postbag, then pgbench)"
        )
        modes = [("batch of 500", BATCH), ("single event", 1)]
        if args.modes != "both":
            modes = [modes[0] if args.modes == "batch" else modes[1]]
        for label, batch in modes:
            script = workdir / f"streams-{batch}.pgbench"
            script.write_text(PGBENCH_SCRIPT.format(**ids, batch=batch))
            ours, theirs, rounds = measure(port, path, url, script, workdir, batch, args)
            each = ", ".join(f"{ratio:.2f}" for ratio in rounds)
            print(
                f"{label}: postbag {ours:.0f} events/s, pgbench {theirs:.0f} events/s, "
                f"ratio {ours / max(theirs, 1):.2f} (each round: {each})",
                flush=True,
            )
            assert not args.smoke or (ours and theirs), f"{label}: no events stored"
    finally:
        receiver.terminate()
        runner.send_signal(signal.SIGINT)
        try:
            runner.wait(timeout=20)
        except subprocess.TimeoutExpired:
            runner.kill()
        with psycopg.connect(args.admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
