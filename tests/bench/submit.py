"""Benchmark of `POST /s/{form}` against pgbench doing the same transaction.

Starts the local runner (`postbag dev --no-ticks`: the submit path alone, as the cloud's
submit function runs it; `--with-ticks` also runs its delivery worker; `--worker-process`
delivers from a `postbag worker` process beside it instead), or with `--serve-workers N` the
production server (`postbag serve --workers N`, as docs/self-host.md runs it), against a
fresh database, drives `POST /s/{form}` (urlencoded, 8 fields, a form with 2 webhook routes to a
fast loopback receiver) from a separate process at several concurrencies, and in the same
run drives `pgbench` with a script doing the same SQL transaction (insert a submission, two
deliveries, one event) at the same concurrencies: at each, `--rounds` rounds (3) of
`--duration` seconds of Postbag, each followed by as long of pgbench, so that the machine's
drifting speed weighs on both alike. Prints each round's ratio, then over all rounds
requests/s, p50/p99 latency, the Postbag/pgbench ratio, CPU per request (runner, whole
machine) and the runner's peak RSS; then loads 1,000,000 submissions and measures
Postbag again. `--enforce` gives the form `schema_mode='enforce'` and ENFORCED_SCHEMA, which
every post meets (each post is then checked by the schema checker's child processes), and
prints how the submissions were stored.

    .venv/bin/python tests/bench/submit.py \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres --duration 10 [--enforce]

Not a test: speed is reported as ratios against a reference run on the same machine.
`--smoke`: one round of 1 s at concurrency 2 and 1,000 existing submissions, failing
unless both sides ran, every Postbag delivery was sent and (`--enforce`) every submission
accepted.
"""

from __future__ import annotations

import argparse
import asyncio
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
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from core.platform.ids import new_id
from tests.bench.receiver import start_receiver
from tests.support.cli import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bench-secret-key-0123456789abcdef0123456789"


def _url(admin_url: str, dbname: str) -> str:
    params = conninfo_to_dict(admin_url)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# The fields every post sends (see `_drive`), as an owner would describe them: required
# strings of bounded length, the email a checked format.
ENFORCED_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": ["name", "email", "company", "phone", "subject", "message", "consent", "source"],
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "email": {"type": "string", "format": "email", "maxLength": 254},
        "company": {"type": "string", "maxLength": 200},
        "phone": {"type": "string", "maxLength": 40},
        "subject": {"type": "string", "maxLength": 200},
        "message": {"type": "string", "maxLength": 5000},
        "consent": {"type": "string", "enum": ["yes"]},
        "source": {"type": "string", "maxLength": 100},
    },
}


# --- the load generator (a separate process) ----------------------------------------------


async def _drive(port: int, path: str, concurrency: int, duration: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + duration
    run = uuid.uuid4().hex[:8]  # identical payloads within 60 s would be one submission

    async def worker(n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        counter = 0
        while time.perf_counter() < deadline:
            counter += 1
            body = (
                f"name=Ada+Lovelace&email=ada{n}%40example.com&company=Analytical+Engines"
                f"&phone=%2B44+20+7946+0000&subject=Hello&message=Worker+{n}+request+{counter}+of+{run}"
                f"&consent=yes&source=bench"
            ).encode()
            request = (
                f"POST {path} HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n"
                f"X-Forwarded-For: 10.{n % 256}.{counter // 256 % 256}.{counter % 256}\r\n"
                f"Content-Type: application/x-www-form-urlencoded\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 201"):
                raise RuntimeError(head.decode(errors="replace"))
            latencies.append(time.perf_counter() - started)
        writer.close()

    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return latencies


def _drive_process(
    port: int, path: str, concurrency: int, duration: float, out: Connection
) -> None:
    out.send(asyncio.run(_drive(port, path, concurrency, duration)))


def drive(port: int, path: str, concurrency: int, duration: float) -> list[float]:
    """Drive the runner from another process for `duration` seconds; each request's latency."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.Process(
        target=_drive_process, args=(port, path, concurrency, duration, sender)
    )
    process.start()
    latencies: list[float] = receiver.recv()
    process.join()
    return latencies


def summary(latencies: list[float], seconds: float) -> dict[str, float]:
    """Requests (or transactions) per second over `seconds`, and latency percentiles."""
    return {
        "rps": len(latencies) / seconds,
        "p50_ms": _percentile(latencies, 0.50) * 1000,
        "p99_ms": _percentile(latencies, 0.99) * 1000,
    }


# --- pgbench ----------------------------------------------------------------------------------

# pgbench's submission ids: the millisecond the run began, as Postbag's ids begin (so its rows
# land in the same weekly partition as Postbag's), then `u`, which Crockford base32 (the
# alphabet of Postbag's ids) never holds, so they are told apart by their 15th character.
REFERENCE_MARK = "u"


def reference_prefix() -> str:
    """The start of every id pgbench's submissions get in this run."""
    return new_id("sub")[:14] + REFERENCE_MARK


PGBENCH_SCRIPT = """\
\\set n random(1, 2000000000)
BEGIN;
INSERT INTO submissions (id, organization_id, form_id, status, flags, "values", meta,
    payload_hash, client_hash, received_at, erase_at)
VALUES ('{week}' || :client_id || '_' || :n || '_' || txid_current(), '{org}', '{form}',
    'accepted', '{{}}',
    '{{"name": "Ada Lovelace", "email": "ada@example.com", "company": "Analytical Engines",
      "phone": "+44 20 7946 0000", "subject": "Hello", "message": "Worker request",
      "consent": "yes", "source": "bench"}}',
    '{{"origin": null}}', '\\\\x00', '\\\\x01', now(), now() + interval '90 days');
INSERT INTO deliveries (id, organization_id, kind, submission_id, route_id, destination_id,
    channel, max_attempts, target, template, secret_version, next_attempt_at)
VALUES ('dlv_pgb1_' || :client_id || '_' || :n || '_' || txid_current(), '{org}',
    'submission', '{week}' || :client_id || '_' || :n || '_' || txid_current(),
    '{route1}', '{dst1}', 'webhook', 10,
    '{{"url": "https://hooks.example.com/a"}}', NULL, 1, now() + interval '1 year');
INSERT INTO deliveries (id, organization_id, kind, submission_id, route_id, destination_id,
    channel, max_attempts, target, template, secret_version, next_attempt_at)
VALUES ('dlv_pgb2_' || :client_id || '_' || :n || '_' || txid_current(), '{org}',
    'submission', '{week}' || :client_id || '_' || :n || '_' || txid_current(),
    '{route2}', '{dst2}', 'webhook', 10,
    '{{"url": "https://hooks.example.com/b"}}', NULL, 1, now() + interval '1 year');
INSERT INTO events (organization_id, type, subject_id, data)
VALUES ('{org}', 'submission.received',
    '{week}' || :client_id || '_' || :n || '_' || txid_current(), '{{"status": "accepted"}}');
COMMIT;
"""


def pgbench(url: str, script: Path, concurrency: int, duration: int, logdir: Path) -> list[float]:
    """Run pgbench with the custom script for `duration` seconds; each transaction's latency
    (none when it failed three times)."""
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    params = conninfo_to_dict(url)
    command = [
        "pgbench",
        "-n",
        "-f",
        str(script),
        "-c",
        str(concurrency),
        "-j",
        str(min(concurrency, 2)),
        "-T",
        str(duration),
        "-l",
        "--log-prefix",
        str(logdir / "pgbench"),
        "-h",
        str(params.get("host", "127.0.0.1")),
        "-p",
        str(params.get("port", 5432)),
        "-U",
        str(params.get("user", "postgres")),
        str(params["dbname"]),
    ]
    for attempt in range(3):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            break
        # Typically "too many clients" when the server is shared; wait and try again.
        print(f"pgbench -c {concurrency} failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        time.sleep(5 * (attempt + 1))
    else:
        return []
    # Every transaction is logged (-l): counted the way the load generator counts requests.
    latencies: list[float] = []
    for log in logdir.glob("pgbench*"):
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                latencies.append(int(parts[2]) / 1e6)
    return latencies


# --- the run --------------------------------------------------------------------------------------


def setup(url: str, hook_url: str) -> dict[str, str]:
    """The organization, form and two webhook routes the benchmark posts to; their
    destinations are a fast loopback receiver, so the runner's worker delivers as it would."""
    # Well-formed ids: the submit path refuses any other shape before it queries.
    ids = {
        "org": new_id("org"),
        "form": new_id("frm"),
        "dst1": new_id("dst"),
        "dst2": new_id("dst"),
        "route1": new_id("rte"),
        "route2": new_id("rte"),
    }
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO organizations (id, name, plan) VALUES (%(org)s, 'Bench', 'self_hosted')",
            ids,
        )
        conn.execute(
            "INSERT INTO forms (id, organization_id, name) VALUES (%(form)s, %(org)s, 'Bench')",
            ids,
        )
        for n in (1, 2):
            conn.execute(
                "INSERT INTO destinations (id, organization_id, type, name, config) "
                f"VALUES (%(dst{n})s, %(org)s, 'webhook', 'Hook', %(config)s)",
                {**ids, "config": Jsonb({"url": f"{hook_url}/{n}"})},
            )
            conn.execute(
                "INSERT INTO destination_secrets "
                "(organization_id, destination_id, version, secret) "
                f"VALUES (%(org)s, %(dst{n})s, 1, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')",
                ids,
            )
            conn.execute(
                "INSERT INTO routes (id, organization_id, form_id, destination_id) "
                f"VALUES (%(route{n})s, %(org)s, %(form)s, %(dst{n})s)",
                ids,
            )
    return ids


def enforce(url: str, ids: dict[str, str]) -> None:
    """Make the benchmark's form check every post against ENFORCED_SCHEMA (its first
    version, `manual`: the one `enforce` checks)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO form_schemas (organization_id, form_id, version, schema) "
            "VALUES (%(org)s, %(form)s, 1, %(schema)s)",
            {**ids, "schema": Jsonb(ENFORCED_SCHEMA)},
        )
        conn.execute("UPDATE forms SET schema_mode = 'enforce' WHERE id = %(form)s", ids)


def settle(url: str) -> None:
    """Give the new database's tables the statistics autovacuum gives any database within
    its first minute. Until then the planner sees every table as empty, and the plans the
    runner's connections keep from that time can pick, for the rate limit's count, the
    form's index over the form and client's, reading every recent submission of the form
    per post (until the first automatic ANALYZE replaces them): the benchmark measures the
    steady state, not that first minute."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def submission_states(url: str) -> str:
    """How Postbag's submissions were stored (with `--enforce`, all `accepted` when every
    check ran: `quarantined schema_unchecked` counts checks the checker could not run)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT status, coalesce(reason, ''), count(*) FROM submissions "
            "WHERE substr(id, 15, 1) <> %(mark)s GROUP BY 1, 2 ORDER BY 1, 2",
            {"mark": REFERENCE_MARK},
        ).fetchall()
    return ", ".join(" ".join(str(part) for part in row if part) for row in rows)


def load_existing(url: str, ids: dict[str, str], count: int) -> float:
    """`count` older submissions of the form; the seconds it took."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            'INSERT INTO submissions (id, organization_id, form_id, status, "values", '
            "payload_hash, client_hash, received_at, erase_at) "
            "SELECT %(prefix)s || 'old' || g, %(org)s, %(form)s, 'accepted', "
            '\'{"name": "Old", "email": "old@example.com"}\', \'\\x00\', '
            "decode(md5(g::text), 'hex'), now() - g * interval '2 seconds', "
            "now() + interval '90 days' FROM generate_series(1, %(count)s) g",
            {**ids, "count": count, "prefix": reference_prefix()},
        )
        conn.execute("VACUUM ANALYZE submissions")
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time so far of a process and of its children (the processes of
    `postbag serve --workers N`), with the time of their children that ended."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ended = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = cpu_seconds(pid) + ended
    for child in children:
        try:
            total += tree_cpu_seconds(int(child))
        except OSError:  # it ended meanwhile
            continue
    return total


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (all cores, every process)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> dict[int, float]:
    """CPU time so far of each PostgreSQL process (backends and the server's own), by pid."""
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "cmdline").read_bytes().startswith(b"postgres"):
                continue
            found[int(entry.name)] = cpu_seconds(int(entry.name))
        except OSError:  # the process ended meanwhile
            continue
    return found


def postgres_cpu_since(before: dict[int, float]) -> float:
    """The CPU time PostgreSQL's processes used since `before`: of those alive now (one
    that ended meanwhile, such as a pgbench client's backend, takes its time with it)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in postgres_cpu_seconds().items())


def transactions(url: str) -> int:
    """Transactions committed so far in the benchmark's database (each autocommit statement
    is one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def unsent(url: str) -> tuple[int, int]:
    """Postbag's own deliveries (pgbench's are never due) not yet ended, and sent."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status IN ('pending', 'failed', 'sending')),"
            " count(*) FILTER (WHERE status = 'sent')"
            " FROM deliveries WHERE id NOT LIKE 'dlv\\_pgb%%'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def drain(url: str, limit: float = 300) -> float:
    """Seconds until every Postbag delivery has ended (the worker catching up after a run);
    the states printed at the end show that they ended `sent`."""
    started = time.perf_counter()
    while unsent(url)[0] and time.perf_counter() - started < limit:
        time.sleep(0.1)
    return time.perf_counter() - started


def delivery_states(url: str) -> str:
    """How many deliveries are in each state: with ticks, the worker has kept up when
    almost all are `sent` once the last run ends."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM deliveries GROUP BY status ORDER BY status"
        ).fetchall()
    return ", ".join(f"{status} {count}" for status, count in rows) or "none"


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(
    url: str,
    port: int,
    path: str,
    script: Path,
    workdir: Path,
    runner_pid: int,
    concurrency: int,
    args: argparse.Namespace,
    delivering: bool,
) -> tuple[dict[str, float], dict[str, float], list[float]]:
    """Postbag and pgbench at one concurrency, in `args.rounds` alternating rounds of
    `args.duration` seconds each (the machine's speed drifts from one minute to the next:
    alternating spreads the drift over both); their figures over all rounds, and each
    round's ratio."""
    latencies: list[float] = []
    reference_latencies: list[float] = []
    cpu = machine = postgres = xact = sent = left = drain_s = reference_machine = 0.0
    rounds: list[float] = []
    for _ in range(args.rounds):
        cpu_before, machine_before = tree_cpu_seconds(runner_pid), machine_cpu_seconds()
        postgres_before, xact_before = postgres_cpu_seconds(), transactions(url)
        sent_before = unsent(url)[1] if delivering else 0
        these = drive(port, path, concurrency, args.duration)
        cpu += tree_cpu_seconds(runner_pid) - cpu_before
        postgres += postgres_cpu_since(postgres_before)
        xact += transactions(url) - xact_before
        machine += machine_cpu_seconds() - machine_before
        if delivering:
            waiting, sent_now = unsent(url)
            sent += sent_now - sent_before
            left += waiting
            drain_s += drain(url)
        # pgbench gets the machine once the worker has caught up, as Postbag had it.
        machine_before = machine_cpu_seconds()
        theirs = pgbench(url, script, concurrency, args.duration, workdir / "logs")
        reference_machine += machine_cpu_seconds() - machine_before
        rounds.append(len(these) / max(len(theirs), 1))
        latencies += these
        reference_latencies += theirs
    seconds = args.rounds * args.duration
    requests = max(len(latencies), 1)
    ours = summary(latencies, seconds) | {
        "cpu_ms": cpu / requests * 1000,
        "postgres_ms": postgres / requests * 1000,
        "xact": xact / requests,
        "machine_ms": machine / requests * 1000,
        "sent_in_run": sent / seconds,
        "left": left / args.rounds,
        "drain_s": drain_s,
    }
    reference = summary(reference_latencies, seconds) | {
        "machine_ms": reference_machine / max(len(reference_latencies), 1) * 1000
    }
    return ours, reference, rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per round")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="alternating rounds of Postbag and pgbench at each concurrency",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--skip-million", action="store_true")
    parser.add_argument("--pool-max", type=int, default=10, help="POSTBAG_DB_POOL_MAX")
    parser.add_argument(
        "--with-ticks",
        action="store_true",
        help="the runner also delivers (its worker shares the machine; pgbench does not)",
    )
    parser.add_argument(
        "--worker-process",
        action="store_true",
        help="deliver from a `postbag worker` process beside the runner (as self-hosting "
        "runs it) rather than from the runner's own worker",
    )
    parser.add_argument(
        "--enforce",
        action="store_true",
        help="the form enforces ENFORCED_SCHEMA, which every post meets",
    )
    parser.add_argument(
        "--serve-workers",
        type=int,
        default=0,
        help="serve with `postbag serve --workers N` (the production server, as "
        "docs/self-host.md runs it) instead of the one-process `postbag dev`",
    )
    parser.add_argument("--smoke", action="store_true", help="every part, tiny, in seconds")
    args = parser.parse_args()
    if args.serve_workers and args.with_ticks and not args.worker_process:
        parser.error("--serve-workers runs no ticks: deliver with --worker-process")
    existing = 1_000_000
    if args.smoke:
        args.duration, args.rounds, args.concurrency, existing = 1, 1, [2], 1000

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
        # Each request comes "through a proxy" from its own client address, so the default
        # rate limit (10 per 10 minutes per client) applies as in production.
        POSTBAG_TRUSTED_PROXIES='["127.0.0.1/32"]',
        POSTBAG_STORAGE_URL=f"file://{workdir / 'files'}",
    )
    postbag = str(Path(sys.executable).parent / "postbag")
    if args.serve_workers:
        # `serve` migrates nothing (`dev` does).
        subprocess.run([postbag, "migrate"], cwd=workdir, env=env, check=True, capture_output=True)
        command = [postbag, "serve", "--port", str(port), "--workers", str(args.serve_workers)]
    else:
        command = [postbag, "dev", "--port", str(port)] + (
            [] if args.with_ticks and not args.worker_process else ["--no-ticks"]
        )
    runner = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        ids = setup(url, hook_url)
        if args.enforce:
            enforce(url, ids)
        if args.worker_process:
            # Started once the runner has migrated the database.
            worker = subprocess.Popen(
                [postbag, "worker", "--ticks", "deliver"],
                cwd=workdir,
                # The receiver is on loopback, which production settings refuse as a target.
                env={**env, "POSTBAG_ALLOW_PRIVATE_TARGETS": "true"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        path = f"/s/{ids['form']}"
        delivering = args.with_ticks or args.worker_process
        drive(port, path, 4, 2)  # warm-up: pool, caches
        settle(url)
        if delivering:
            drain(url)
        script = workdir / "submit.pgbench"
        script.write_text(PGBENCH_SCRIPT.format(**ids, week=reference_prefix()))
        server = (
            f"`postbag serve --workers {args.serve_workers}`"
            if args.serve_workers
            else "`postbag dev`"
        )
        results = []
        for concurrency in args.concurrency:
            ours, reference, rounds = measure(
                url, port, path, script, workdir, runner.pid, concurrency, args, delivering
            )
            results.append((concurrency, ours, reference))
            each = ", ".join(f"{ratio:.2f}" for ratio in rounds)
            print(f"c{concurrency}: ratio in each round {each}", flush=True)
        print(
            f"cpus: {os.cpu_count()}, {args.rounds} rounds of {args.duration} s each "
            f"(Postbag, then pgbench); Postbag served by {server}"
        )
        print(
            f"{'conc':>4} | {'postbag req/s':>13} {'p50 ms':>7} {'p99 ms':>7} | "
            f"{'pgbench tx/s':>12} {'p50 ms':>7} {'p99 ms':>7} | {'ratio':>5} | "
            "CPU/req: runner, machine (pgbench's machine)"
        )
        for concurrency, ours, reference in results:
            print(
                f"{concurrency:>4} | {ours['rps']:>13.0f} {ours['p50_ms']:>7.2f} "
                f"{ours['p99_ms']:>7.2f} | {reference['rps']:>12.0f} "
                f"{reference['p50_ms']:>7.2f} {reference['p99_ms']:>7.2f} | "
                f"{ours['rps'] / reference['rps']:>5.2f} | {ours['cpu_ms']:.2f} ms, "
                f"{ours['machine_ms']:.2f} ms ({reference['machine_ms']:.2f} ms)"
            )
        if delivering:
            print(
                "Deliveries (2 per submit): sent per second during the rounds, unsent when a "
                "round ended, seconds to send those, and submits per second counting that time:"
            )
            for concurrency, ours, reference in results:
                seconds = args.rounds * args.duration
                sustained = ours["rps"] * seconds / (seconds + ours["drain_s"])
                print(
                    f"{concurrency:>4} | sent {ours['sent_in_run']:.0f}/s, {ours['left']:.0f} "
                    f"unsent a round, drained in {ours['drain_s']:.1f} s in all | "
                    f"{sustained:.0f} submits/s sustained, ratio {sustained / reference['rps']:.2f}"
                )
        if not args.skip_million:
            empty = next((r[1] for r in results if r[0] == 16), results[0][1])
            seconds = load_existing(url, ids, existing)
            loaded = summary(drive(port, path, 16, args.duration), args.duration)
            print(
                f"with {existing:,} existing submissions (loaded in {seconds:.0f} s), "
                f"concurrency 16: {loaded['rps']:.0f} req/s, p50 {loaded['p50_ms']:.2f} ms, "
                f"p99 {loaded['p99_ms']:.2f} ms; {loaded['rps'] / empty['rps']:.2f} x the "
                "empty-table figure"
            )
        print("Postbag's CPU per request in PostgreSQL, and transactions per request:")
        for concurrency, ours, _ in results:
            print(
                f"{concurrency:>4} | postgres {ours['postgres_ms']:.2f} ms, "
                f"{ours['xact']:.2f} transactions"
            )
        print(f"runner peak RSS: {peak_rss_mb(runner.pid):.0f} MB")
        print(f"deliveries at the end: {delivery_states(url)}")
        if args.enforce:
            print(f"submissions (schema enforced): {submission_states(url)}")
        if args.smoke:
            assert all(ours["rps"] and reference["rps"] for _, ours, reference in results)
            if delivering:
                drain(url)
                assert unsent(url)[0] == 0, "Postbag deliveries left unsent"
            if args.enforce:
                states = submission_states(url)
                assert states.startswith("accepted ") and "," not in states, states
    finally:
        receiver.terminate()
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
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
