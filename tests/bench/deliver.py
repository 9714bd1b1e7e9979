"""Benchmark of the outbox worker (issue 5): `python -m tests.bench.deliver`.

20,000 due webhook deliveries across 20 destinations to a fast loopback receiver (a raw
asyncio server in its own process); one worker process, then two (`postbag tick deliver`).
Prints the CPU one signed POST costs this process with httpx and with aiohttp (the worker's
client), deliveries/s and p50/p99 submit-to-delivery latency (insert to `sent_at`), and, when
procrastinate is installed, the same workload as procrastinate tasks (one task per delivery
doing the same signed POST with httpx) for a ratio. Also times the claim query on an empty
table and with 1,000,000 `sent` rows, and prints its plan.

The mixed workload (issue 14): 19 fast destinations and 1 slow one (its own receiver
answers every request after 8 s) with a deep backlog, all in one organization. The fast
destinations' deliveries come due at a steady rate while the slow backlog waits; prints the
fast destinations' throughput and p50/p99 due-to-sent (`next_attempt_at` to `sent_at`).

Needs an admin URL (`--admin-url`, by default POSTBAG_TEST_DATABASE_URL); migrates one
database and runs each round on a fresh clone of it, all dropped at the end.
BENCH_MIXED=0 skips the mixed workload, BENCH_MIXED=only runs nothing else. `--smoke` runs
every part at tiny sizes in seconds and fails unless each delivered everything it should.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from core.destinations import http
from core.destinations.webhook import body_bytes, signature_headers
from core.outbox import rates
from core.outbox import store as outbox
from core.platform.clock import month_of, utcnow
from core.platform.db import Conn, connect
from tests.bench.receiver import start_receiver
from tests.bench.support import Databases
from tests.support.builders import make_deliveries, make_form, make_route_to, setup_form
from tests.support.cli import subprocess_env
from tests.support.databases import create_database, database_url, drop_database

DESTINATIONS = 20
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Sizes:
    total: int  # due webhooks of the throughput runs, across the 20 destinations
    # The mixed workload: fast deliveries due at `rate` per second for `span` seconds, and
    # the slow destination's backlog (answers after `slow_answer` s), due at the start.
    slow_backlog: int
    rate: int
    span: float
    slow_answer: float
    sends: int  # POSTs per client measured for the CPU cost (after 200 to warm up)
    sent_rows: int  # the sent history beside the claim


def measured() -> Sizes:
    return Sizes(
        total=int(os.environ.get("BENCH_TOTAL", "20000")),
        slow_backlog=int(os.environ.get("BENCH_SLOW_BACKLOG", "2000")),
        rate=int(os.environ.get("BENCH_RATE", "300")),
        span=float(os.environ.get("BENCH_SPAN", "20")),
        slow_answer=8.0,
        sends=3000,
        sent_rows=1_000_000,
    )


# Every part in seconds; 10 due per destination, as the claim's timing needs.
SMOKE = Sizes(
    total=200, slow_backlog=10, rate=100, span=1.0, slow_answer=1.0, sends=100, sent_rows=1000
)


async def client_cost(url: str, *, sends: int, concurrency: int = 16) -> dict[str, float]:
    """CPU milliseconds of this process per webhook POST, `concurrency` at a time, for httpx
    (streamed, as the worker sent before) and aiohttp (`core.destinations.http.post`)."""
    body = body_bytes({"event": "form.submitted", "receipt": "sub_bench", "values": {"n": 1}})
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Postbag/bench",
        **signature_headers(
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            delivery_id="dlv_bench",
            body=body,
            timestamp=int(time.time()),
        ),
    }

    async def measure(send: Any) -> float:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                await send()

        await asyncio.gather(*(one() for _ in range(200)))  # warm: connections open
        begun = time.process_time()
        await asyncio.gather(*(one() for _ in range(sends)))
        return (time.process_time() - begun) / sends * 1000

    costs: dict[str, float] = {}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(follow_redirects=False, limits=limits) as client:

        async def with_httpx() -> None:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
            assert response.status_code == 200

        costs["httpx"] = await measure(with_httpx)
    async with aiohttp.ClientSession() as session:

        async def with_aiohttp() -> None:
            result = await http.post(session, url, content=body, headers=headers, timeout=10)
            assert result.ok

        costs["aiohttp"] = await measure(with_aiohttp)
    return costs


async def seed(conn: Conn, url: str, total: int) -> None:
    """`total` due webhooks across the destinations, in a fresh database."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    for _ in range(DESTINATIONS):
        dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
        # Each destination gets its own batch: make_deliveries keys ids on the route.
        await make_deliveries(
            conn, tenant, form, dst, rte, count=total // DESTINATIONS, url=url, due=utcnow()
        )
        # make_deliveries names submissions after the form: give the next batch a new form.
        form = await make_form(conn, tenant)
    await conn.execute("ANALYZE")


async def drained(conn: Conn) -> dict[str, Any]:
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'sent') AS sent,"
        " extract(epoch FROM max(sent_at) - min(created_at)) AS span,"
        " percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at))"
        "   AS p50,"
        " percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at))"
        "   AS p99"
        " FROM deliveries"
    )
    row = await cur.fetchone()
    assert row is not None
    return dict(row)


async def run_postbag(db_url: str, url: str, workers: int, total: int) -> dict[str, Any]:
    conn = await connect(db_url)
    try:
        await seed(conn, url, total)
        env = subprocess_env(
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",
            POSTBAG_LOG_LEVEL="WARNING",
        )
        started = time.monotonic()
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "local.cli", "tick", "deliver", "--budget", "600"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        for process in processes:
            process.wait()
        wall = time.monotonic() - started
        result = await drained(conn)
        result["wall"] = wall
        result["rate"] = result["sent"] / float(result["span"])
        return result
    finally:
        await conn.close()


PROCRASTINATE_APP = """
import httpx, json, os, time
import procrastinate
from core.destinations.webhook import body_bytes, signature_headers

app = procrastinate.App(connector=procrastinate.PsycopgConnector(
    conninfo=os.environ["BENCH_DB"]))
_client = None

@app.task(name="post")
async def post(url: str, delivery_id: str, payload: dict) -> None:
    global _client
    if _client is None:
        _client = httpx.AsyncClient()
    body = body_bytes(payload)
    headers = {"Content-Type": "application/json",
               **signature_headers(secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                                   delivery_id=delivery_id, body=body, timestamp=int(time.time()))}
    response = await _client.post(url, content=body, headers=headers)
    response.raise_for_status()
"""


async def run_procrastinate(admin: str, url: str, total: int) -> dict[str, Any] | None:
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        return None
    name = create_database(admin)
    db_url = database_url(admin, name)
    app_dir = Path(tempfile.mkdtemp(prefix="postbag-bench-procrastinate-"))
    (app_dir / "bench_tasks.py").write_text(PROCRASTINATE_APP)
    path = [str(app_dir), str(ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "BENCH_DB": db_url, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    try:
        subprocess.run(
            [sys.executable, "-m", "procrastinate", "--app=bench_tasks.app", "schema", "--apply"],
            env=env,
            check=True,
            capture_output=True,
        )
        defer = f'''
import asyncio, bench_tasks
async def main():
    async with bench_tasks.app.open_async():
        for start in range(0, {total}, 1000):
            await bench_tasks.post.batch_defer_async(*[
                dict(url="{url}", delivery_id=f"dlv_{{i}}",
                     payload={{"event": "form.submitted", "receipt": f"sub_{{i}}",
                               "values": {{"n": i}}}})
                for i in range(start, min(start + 1000, {total}))])
asyncio.run(main())
'''
        subprocess.run([sys.executable, "-c", defer], env=env, check=True, cwd=app_dir)
        started = time.monotonic()
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "procrastinate",
                "--app=bench_tasks.app",
                "worker",
                "--concurrency=16",
                "--one-shot",
            ],
            env=env,
            cwd=app_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, errors = worker.communicate()
        wall = time.monotonic() - started
        conn = await connect(db_url)
        try:
            cur = await conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'succeeded') AS done"
                " FROM procrastinate_jobs"
            )
            row = await cur.fetchone()
        finally:
            await conn.close()
        assert row is not None
        if not row["done"]:
            print(errors.decode()[-2000:])
        return {"done": row["done"], "wall": wall, "rate": row["done"] / wall}
    finally:
        drop_database(admin, name)
        shutil.rmtree(app_dir, ignore_errors=True)


async def claim_timing(databases: Databases, url: str, sizes: Sizes) -> dict[str, Any]:
    """Claim 200 due rows (10 from each destination): on an otherwise empty table, then
    beside `sizes.sent_rows` sent rows (each in a fresh database)."""
    timings: dict[str, Any] = {}
    for label, sent_rows in (("empty", 0), ("with_sent", sizes.sent_rows)):
        conn = await connect(databases.fresh())
        try:
            await seed(conn, url, sizes.total)
            if sent_rows:
                # Sent history: its own submissions (one delivery per submission and route).
                await conn.execute(
                    'INSERT INTO submissions (id, organization_id, form_id, status, "values",'
                    " payload_hash) SELECT 'sub_old_' || i, f.organization_id, f.id,"
                    " 'accepted', '{}', '\\x00' FROM (SELECT * FROM forms LIMIT 1) f,"
                    " generate_series(1, %(n)s) i",
                    {"n": sent_rows},
                )
                await conn.execute(
                    "INSERT INTO deliveries (id, organization_id, submission_id, route_id,"
                    " destination_id, channel, max_attempts, target, status, sent_at,"
                    " next_attempt_at, attempts)"
                    " SELECT 'dlv_old_' || i, r.organization_id, 'sub_old_' || i, r.id,"
                    "  r.destination_id, 'webhook', 10, '{}', 'sent', now(),"
                    "  now() - interval '1 day', 1"
                    " FROM (SELECT * FROM routes LIMIT 1) r, generate_series(1, %(n)s) i",
                    {"n": sent_rows},
                )
                await conn.execute("VACUUM ANALYZE deliveries")
            best = float("inf")
            for _ in range(5):
                async with conn.transaction(force_rollback=True):
                    begun = time.perf_counter()
                    # 10 per destination: 200 from the 20 destinations.
                    claimed = await outbox.claim_due(
                        conn,
                        now=utcnow(),
                        limit=200,
                        lease=timedelta(minutes=5),
                        per_destination=10,
                    )
                    best = min(best, time.perf_counter() - begun)
                    assert len(claimed) == 200
            timings[label] = best * 1000
            if sent_rows:
                timings["plan"] = await claim_plan(conn)
        finally:
            await conn.close()
    return timings


async def claim_plan(conn: Conn) -> str:
    from core.platform.queries import queries

    async with conn.transaction(force_rollback=True):
        await conn.execute("SET LOCAL jit = off")
        plan = await conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + queries["claim_due"],
            {
                "now": utcnow(),
                "limit": 200,
                "max_orgs": 200,
                "per_destination": 10,
                "lease": timedelta(minutes=5),
                "recover": rates.RECOVER,
                "type_rates": rates.TYPE_RATES,
                "limits": "{}",
                "month": month_of(utcnow()),
            },
        )
        return "\n".join(row["QUERY PLAN"] for row in await plan.fetchall())


async def run_mixed(
    db_url: str, fast_url: str, slow_url: str, sizes: Sizes, *, loop: bool
) -> dict[str, Any]:
    """One worker process, on a fresh database; 19 fast destinations whose deliveries come
    due at `sizes.rate`/s for `sizes.span` s, beside 1 destination answering in
    `sizes.slow_answer` s with `sizes.slow_backlog` due from the start. The process is one
    long pass (`postbag tick deliver`), or with `loop` the pass after pass of `postbag
    worker` (15 s passes, each ending with the slow sends under way), stopped once the fast
    deliveries are all sent."""
    conn = await connect(db_url)
    try:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        slow, route = await make_route_to(conn, tenant, form, config={"url": slow_url})
        await make_deliveries(
            conn, tenant, form, slow, route, count=sizes.slow_backlog, url=slow_url, due=utcnow()
        )
        fast_total = int(sizes.rate * sizes.span)
        far = utcnow() + timedelta(days=1)
        for _ in range(DESTINATIONS - 1):
            form = await make_form(conn, tenant)
            dst, route = await make_route_to(conn, tenant, form, config={"url": fast_url})
            await make_deliveries(
                conn,
                tenant,
                form,
                dst,
                route,
                count=fast_total // (DESTINATIONS - 1),
                url=fast_url,
                due=far,
            )
        await conn.execute("ANALYZE")
        env = subprocess_env(
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",
            POSTBAG_LOG_LEVEL="WARNING",
            # `postbag worker` is the production command: it wants a secret key.
            POSTBAG_SECRET_KEY="bench-secret-key-0123456789abcdef0123456789",
        )
        budget = sizes.span + 40
        command = (
            ["worker", "--ticks", "deliver"]
            if loop
            else ["tick", "deliver", "--budget", str(budget)]
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "local.cli", *command],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        # Once the worker is sending to the slow destination (its start-up is not the
        # claim's latency), the fast deliveries come due at `sizes.rate`/s, destinations
        # interleaved.
        while True:
            cur = await conn.execute(
                "SELECT count(*) AS n FROM deliveries WHERE status = 'sending'"
                " AND destination_id = %(slow)s",
                {"slow": slow},
            )
            row = await cur.fetchone()
            assert row is not None and process.poll() is None
            if row["n"]:
                break
            await asyncio.sleep(0.05)
        await conn.execute(
            "UPDATE deliveries d SET next_attempt_at = now() + interval '0.5 seconds'"
            "   + make_interval(secs => s.n / %(rate)s::float8)"
            " FROM (SELECT id, row_number() OVER (ORDER BY random()) - 1 AS n FROM deliveries"
            "        WHERE destination_id <> %(slow)s) s WHERE d.id = s.id",
            {"rate": sizes.rate, "slow": slow},
        )
        if loop:
            deadline = time.monotonic() + budget
            while time.monotonic() < deadline:
                cur = await conn.execute(
                    "SELECT count(*) AS n FROM deliveries WHERE destination_id <> %(slow)s"
                    " AND status <> 'sent'",
                    {"slow": slow},
                )
                row = await cur.fetchone()
                if row is not None and row["n"] == 0:
                    break
                await asyncio.sleep(0.2)
            process.send_signal(signal.SIGTERM)
        process.wait()
        cur = await conn.execute(
            "SELECT count(*) AS due, count(sent_at) AS sent,"
            " extract(epoch FROM max(sent_at) - min(next_attempt_at)) AS span,"
            " percentile_cont(0.5) WITHIN GROUP"
            "   (ORDER BY extract(epoch FROM sent_at - next_attempt_at)) AS p50,"
            " percentile_cont(0.99) WITHIN GROUP"
            "   (ORDER BY extract(epoch FROM sent_at - next_attempt_at)) AS p99,"
            " max(extract(epoch FROM sent_at - next_attempt_at)) AS worst"
            " FROM deliveries WHERE destination_id <> %(slow)s",
            {"slow": slow},
        )
        fast = await cur.fetchone()
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'sent') AS sent,"
            " count(*) FILTER (WHERE status IN ('pending', 'failed')) AS waiting"
            " FROM deliveries WHERE destination_id = %(slow)s",
            {"slow": slow},
        )
        slow_row = await cur.fetchone()
        assert fast is not None and slow_row is not None
        return {
            **dict(fast),
            "rate": fast["sent"] / float(fast["span"]),
            "slow_sent": slow_row["sent"],
            "slow_waiting": slow_row["waiting"],
        }
    finally:
        await conn.close()


def print_mixed(result: dict[str, Any], worker: str, sizes: Sizes) -> None:
    print(
        f"mixed, 1 worker process ({worker}): 19 fast destinations, {result['sent']} of"
        f" {result['due']} sent at {result['rate']:.0f} deliveries/s (due {sizes.rate}/s"
        f" for {sizes.span:.0f} s), due-to-sent p50 {result['p50']:.3f} s"
        f" p99 {result['p99']:.3f} s max {result['worst']:.3f} s; slow destination"
        f" ({sizes.slow_answer:.0f} s answers): {result['slow_sent']} sent,"
        f" {result['slow_waiting']} of {sizes.slow_backlog} still waiting",
        flush=True,
    )


def main(admin: str, sizes: Sizes, *, smoke: bool) -> None:
    receiver, url = start_receiver()
    try:
        with Databases(admin) as databases:
            asyncio.run(measure(admin, databases, url, sizes, smoke=smoke))
    finally:
        receiver.terminate()


async def measure(admin: str, databases: Databases, url: str, sizes: Sizes, *, smoke: bool) -> None:
    """Each part of the benchmark, each round on a fresh database; with `smoke`, a part
    that did not deliver everything it should fails the run."""
    mixed = os.environ.get("BENCH_MIXED", "1")
    if mixed != "0":
        for loop in (False, True):
            slow_receiver, slow_url = start_receiver(delay=sizes.slow_answer)
            try:
                result = await run_mixed(databases.fresh(), url, slow_url, sizes, loop=loop)
            finally:
                slow_receiver.terminate()
            print_mixed(result, "postbag worker" if loop else "postbag tick deliver", sizes)
            assert not smoke or result["sent"] == result["due"], "fast deliveries left unsent"
        if mixed == "only":
            return
    if os.environ.get("BENCH_CLIENTS", "1") == "1":
        costs = await client_cost(url, sends=sizes.sends)
        print(
            f"CPU per webhook POST in the sending process (16 at a time, loopback):"
            f" httpx {costs['httpx']:.2f} ms, aiohttp {costs['aiohttp']:.2f} ms",
            flush=True,
        )
    rates: dict[int, float] = {}
    for workers in (1, 2) if os.environ.get("BENCH_SEND", "1") == "1" else ():
        result = await run_postbag(databases.fresh(), url, workers, sizes.total)
        rates[workers] = result["rate"]
        print(
            f"postbag, {workers} worker process(es): {result['sent']} sent,"
            f" {result['rate']:.0f} deliveries/s (first insert to last sent),"
            f" wall {result['wall']:.1f} s incl. start-up,"
            f" latency p50 {result['p50']:.2f} s p99 {result['p99']:.2f} s",
            flush=True,
        )
        assert not smoke or result["sent"] == sizes.total, "deliveries left unsent"
    reference = (
        await run_procrastinate(admin, url, sizes.total)
        if os.environ.get("BENCH_SEND", "1") == "1"
        else None
    )
    if reference is None:
        print("procrastinate not installed (the `bench` extra): no reference run")
    else:
        print(
            f"procrastinate 1 worker, concurrency 16: {reference['done']} done,"
            f" {reference['rate']:.0f} jobs/s (wall incl. start-up)",
            flush=True,
        )
        print(f"ratio: 1 postbag worker process / procrastinate {rates[1] / reference['rate']:.1f}")
        assert not smoke or reference["done"] == sizes.total, "procrastinate left jobs undone"
    if os.environ.get("BENCH_CLAIM", "1") == "1":
        timing = await claim_timing(databases, url, sizes)
        print(
            f"claim 200: {timing['empty']:.1f} ms (empty table),"
            f" {timing['with_sent']:.1f} ms ({sizes.sent_rows:,} sent rows)"
        )
        print(timing["plan"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=os.environ.get("POSTBAG_TEST_DATABASE_URL"))
    parser.add_argument("--smoke", action="store_true", help="every part, tiny, in seconds")
    args = parser.parse_args()
    if not args.admin_url:
        parser.error("--admin-url or POSTBAG_TEST_DATABASE_URL is required")
    main(args.admin_url, SMOKE if args.smoke else measured(), smoke=args.smoke)
