"""Benchmark of submit-to-delivered in the cloud: the real handlers, with and without the
wake-up. `python -m tests.bench.cloud`

One submit sandbox (`handlers.submit`, called as the Lambda runtime calls it) posts
`--submits` JSON submissions with random gaps (exponential, mean `--gap` seconds) to a form
with one webhook route to a fast loopback receiver (its own process). The deliver function
(`handlers.deliver_tick`) runs in one sandbox of a Lambda API double on loopback
(`tests/support/lambda_api.py`): one instance, its invocations one at a time.

- **wake-up**: `POSTBAG_DELIVER_FUNCTION_NAME` names the function and `AWS_ENDPOINT_URL_LAMBDA`
  points boto3 at the double; nothing else invokes the deliver function (no schedule).
- **schedule** (the reference, the deployment without the wake-up): no function name; the
  deliver function is invoked by a timer every `--period` seconds, a scaled minute (default
  6 s: a tenth), from a random phase. A submission's latency there is its wait for the next
  invocation plus the pass's own work; the wait scales with the period and the work does
  not, so each latency is also projected to the real minute as wait * 60 / period + work,
  the wait and the work measured for each submission (its received time, the start of the
  invocation that sent it, its sent time).

Submit-to-delivered is `deliveries.sent_at - submissions.received_at` (both written by the
handlers' clock). Prints p50/p99 per mode, the submit function's own p50/p99 per call, and
the ratios of the wake-up's figures to the schedule's.

Needs an admin URL (`--admin-url`, by default POSTBAG_TEST_DATABASE_URL); migrates one
database and runs each mode on a fresh clone of it. `--smoke`: 3 submissions 0.05 s apart
and a 1 s period, failing unless every one is delivered in both modes.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import threading
import time
import uuid
from typing import Any

import pytest

from core.platform.db import connect
from tests.bench.receiver import start_receiver
from tests.bench.support import Databases
from tests.support.builders import make_form, make_route_to, make_tenant
from tests.support.lambda_api import LambdaApi, lambda_api, lambda_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.settings import TEST_SECRET_KEY

FORM_ID = "frm_01j1ambda0mv1t1part0000000"
MINUTE = 60.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _posts(count: int) -> list[dict[str, Any]]:
    template = load_event("function_url_post_json.json")
    events = []
    for index in range(count):
        event = copy.deepcopy(template)
        event["body"] = json.dumps({"name": f"Visitor {index}", "email": "v@example.com"})
        event["headers"]["content-length"] = str(len(event["body"]))
        event["headers"]["idempotency-key"] = str(uuid.uuid4())
        events.append(event)
    return events


async def _seed(db_url: str, hook: str) -> None:
    """The form and its webhook route, in a fresh database."""
    conn = await connect(db_url)
    try:
        tenant = await make_tenant(conn, plan="self_hosted")
        # Every post comes from one client address: no rate limit to quarantine them.
        form = await make_form(
            conn,
            tenant,
            id=FORM_ID,
            allowed_origins=["https://site.example"],
            rate_limit_max=1_000_000,
        )
        await make_route_to(conn, tenant, form, config={"url": hook})
    finally:
        await conn.close()


async def _latencies(db_url: str, count: int, timeout: float) -> list[tuple[float, float]]:
    """(received, sent) epoch seconds of each delivery, once all `count` are sent."""
    conn = await connect(db_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            cur = await conn.execute(
                "SELECT extract(epoch FROM s.received_at)::float8 AS received,"
                "       extract(epoch FROM d.sent_at)::float8 AS sent"
                "  FROM deliveries d JOIN submissions s ON s.id = d.submission_id"
                " WHERE d.status = 'sent'"
            )
            found = [(row["received"], row["sent"]) for row in await cur.fetchall()]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


def _submit(events: list[dict[str, Any]], gap: float, env: dict[str, str]) -> list[float]:
    """Call the submit handler for each event, `gap`-spaced on average; each call's time."""
    calls: list[float] = []
    rng = random.Random(7)
    mark = [time.monotonic()]

    def between(_index: int) -> None:
        calls.append(time.monotonic() - mark[0])
        time.sleep(rng.expovariate(1 / gap))
        mark[0] = time.monotonic()

    with pytest.MonkeyPatch.context() as monkeypatch:
        mark[0] = time.monotonic()
        responses = invoke("submit", events, FakeContext(), monkeypatch, between=between, **env)
    assert all(r["statusCode"] == 201 for r in responses), responses
    return calls[1:]  # the first call imported the module (a cold start)


def _scheduler(api: LambdaApi, period: float, stop: threading.Event) -> None:
    """The scaled schedule: a scheduled event every `period` seconds, from a random phase."""
    event = load_event("eventbridge_scheduled.json")
    stop.wait(random.uniform(0, period))
    while not stop.is_set():
        api.enqueue(event)
        stop.wait(period)


def _run(db_url: str, hook: str, *, wake: bool, submits: int, gap: float, period: float) -> Any:
    asyncio.run(_seed(db_url, hook))
    env = {
        "POSTBAG_DATABASE_URL": db_url,
        "POSTBAG_SECRET_KEY": TEST_SECRET_KEY,
        "POSTBAG_ALLOW_PRIVATE_TARGETS": "true",
        "POSTBAG_LOG_LEVEL": "WARNING",
    }
    with pytest.MonkeyPatch.context() as monkeypatch, lambda_api() as api:
        env.update(lambda_env(api))
        if wake:
            env["POSTBAG_DELIVER_FUNCTION_NAME"] = f"postbag-deliver-{uuid.uuid4().hex[:8]}"
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        stop = threading.Event()
        timer = threading.Thread(target=_scheduler, args=(api, period, stop), daemon=True)
        if not wake:
            timer.start()
        try:
            calls = _submit(_posts(submits), gap, env)
            pairs = asyncio.run(_latencies(db_url, submits, timeout=2 * period + 30))
        finally:
            stop.set()
            if timer.is_alive():
                timer.join()
            api.wait_idle(timeout=120)
        runs = list(api.runs)
    latencies = [sent - received for received, sent in pairs]
    projected = []
    for received, sent in pairs:
        began = max((start for start, _ in runs if start <= sent), default=received)
        wait = max(began - received, 0.0)
        projected.append(wait * MINUTE / period + (sent - max(began, received)))
    return {
        "delivered": len(pairs),
        "invocations": len(api.invocations) if wake else len(runs),
        "latencies": latencies,
        "projected": projected,
        "calls": calls,
    }


def _line(name: str, values: list[float]) -> str:
    return f"{name}: p50 {_percentile(values, 0.5):.3f} s, p99 {_percentile(values, 0.99):.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submits", type=int, default=60)
    parser.add_argument("--gap", type=float, default=0.5, help="mean seconds between submits")
    parser.add_argument("--period", type=float, default=6.0, help="the scaled minute, seconds")
    parser.add_argument("--admin-url", default=os.environ.get("POSTBAG_TEST_DATABASE_URL"))
    parser.add_argument("--smoke", action="store_true", help="both modes, tiny, in seconds")
    args = parser.parse_args()
    if not args.admin_url:
        parser.error("--admin-url or POSTBAG_TEST_DATABASE_URL is required")
    if args.smoke:
        args.submits, args.gap, args.period = 3, 0.05, 1.0
    receiver, hook = start_receiver()
    try:
        with Databases(args.admin_url) as databases:
            results = {}
            for wake in (False, True):
                label = "wake-up" if wake else f"schedule every {args.period:g} s"
                results[wake] = result = _run(
                    databases.fresh(),
                    hook,
                    wake=wake,
                    submits=args.submits,
                    gap=args.gap,
                    period=args.period,
                )
                print(
                    f"{label}: {result['delivered']}/{args.submits} delivered, "
                    f"{result['invocations']} deliver invocations"
                )
                assert not args.smoke or result["delivered"] == args.submits, "undelivered"
                print("  " + _line("submit-to-delivered", result["latencies"]))
                if not wake:
                    print("  " + _line("projected to the minute schedule", result["projected"]))
                print("  " + _line("submit function call", result["calls"]))
            wake_p50 = _percentile(results[True]["latencies"], 0.5)
            wake_p99 = _percentile(results[True]["latencies"], 0.99)
            for label, key in (("scaled schedule", "latencies"), ("minute schedule", "projected")):
                reference = results[False][key]
                print(
                    f"wake-up / {label}: p50 {wake_p50 / _percentile(reference, 0.5):.3f}, "
                    f"p99 {wake_p99 / _percentile(reference, 0.99):.3f}"
                )
            calls_ratio = _percentile(results[True]["calls"], 0.5) / _percentile(
                results[False]["calls"], 0.5
            )
            print(f"submit call p50, wake-up / without: {calls_ratio:.3f}")
    finally:
        receiver.terminate()


if __name__ == "__main__":
    main()
