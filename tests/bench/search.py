"""Benchmark of search (`GET /v1/submissions?q=`) on 100,000 submissions, against the
inbox's first page and a lookup by id in the same run.

Migrates a fresh database, stores `--rows` submissions (100,000) of one organization's form
in one statement (an email on example.com, one in a hundred on example.net; a message naming
a number of chairs, one in a thousand a sofa), and 1,000 of another organization holding
the same words (never found: the search is the organization's), then ANALYZE. Through the
management app (in process, the same path as a request: key, role, audit row, the search's
bounds) it times
the reference calls, `GET /v1/submissions?limit=50` (the inbox's first page) and
`GET /v1/submissions/{id}`, and each search at the same page size: a prefix of one address,
a part of an address one in a hundred hold, a word one in a thousand hold, a word every row
holds, a word none holds, two words, a word with one excluded. Each call runs `--repeat`
times, interleaved with the references (the machine's speed drifts); it prints each one's
median milliseconds, what it found, and its ratio to the first page's median.

    .venv/bin/python -m tests.bench.search --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: speed is reported as ratios against a reference run on the same machine.
`--smoke`: 2,000 rows, 3 calls each, failing unless each search found what it should.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from core.platform.db import connect
from tests.bench.support import migrated
from tests.support.api import api_client
from tests.support.builders import Tenant, make_form, make_tenant
from tests.support.databases import database_url, drop_database
from tests.support.settings import built_services

# One statement stores the rows: ids in arrival order, one second apart, newest last.
FILL = """
INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,
                         received_at)
SELECT 'sub_' || lpad(g::text, 25, '0') || %(tag)s, %(org)s, %(form)s, 'accepted',
       jsonb_build_object(
           'name', 'Visitor ' || g,
           'email', 'user' || g || '@example.' || CASE WHEN g %% 100 = 0 THEN 'net' ELSE 'com' END,
           'message', 'Hello, I would like a quote for ' || (g %% 50) || ' chairs and a '
                      || CASE WHEN g %% 1000 = 0 THEN 'sofa' ELSE 'table' END
                      || ' delivered next week. Reference ' || md5(g::text)),
       '\\x00'::bytea, now() - (%(rows)s - g) * interval '1 second'
  FROM generate_series(1, %(rows)s) AS g
"""

PAGE = 50


def searches(rows: int) -> list[tuple[str, str, int]]:
    """Each search: what it shows, its text, how many of the first page it must find."""
    one = rows // 2 + 7
    return [
        ("a prefix of one address", f"user{one}@", 1),
        ("a part of 1 in 100 addresses", "example.net", min(PAGE, rows // 100)),
        ("a word 1 in 1,000 hold", "sofa", min(PAGE, rows // 1000)),
        ("a word every row holds", "chairs", PAGE),
        ("a word none holds", "zanzibar", 0),
        ("two words", "example.net chairs", min(PAGE, rows // 100)),
        ("a word, one excluded", "example.net -sofa", min(PAGE, rows // 100 - rows // 1000)),
    ]


async def fill(url: str, rows: int) -> tuple[Tenant, str]:
    conn = await connect(url)
    try:
        tenant, other = await make_tenant(conn, "Bench"), await make_tenant(conn, "Other")
        form, elsewhere = await make_form(conn, tenant), await make_form(conn, other)
        started = time.perf_counter()
        await conn.execute(FILL, {"tag": "a", "org": tenant.org, "form": form, "rows": rows})
        await conn.execute(
            FILL, {"tag": "x", "org": other.org, "form": elsewhere, "rows": min(rows, 1000)}
        )
        await conn.execute("ANALYZE submissions")
        indexed = await (
            await conn.execute(
                "SELECT count(*) AS n FROM pg_indexes"
                " WHERE indexname = 'submissions_values_trigram_idx'"
            )
        ).fetchone()
        print(
            f"{rows:,} submissions stored in {time.perf_counter() - started:.1f} s; "
            f"trigram index: {'yes' if indexed and indexed['n'] else 'no (no pg_trgm)'}"
        )
        return tenant, f"sub_{rows // 3:025d}a"
    finally:
        await conn.close()


async def timed(api: httpx.AsyncClient, path: str, params: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    answer = await api.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, (path, params, answer.text)
    body = answer.json()
    return elapsed, len(body["data"]) if "data" in body else 1


async def measure(url: str, args: argparse.Namespace) -> bool:
    tenant, some_id = await fill(url, args.rows)
    calls: list[tuple[str, str, dict[str, str], int]] = [
        ("reference: the inbox's first page", "/v1/submissions", {"limit": str(PAGE)}, PAGE),
        ("reference: a lookup by id", f"/v1/submissions/{some_id}", {}, 1),
    ]
    for label, q, expected in searches(args.rows):
        calls.append(
            (f"q={q!r} ({label})", "/v1/submissions", {"q": q, "limit": str(PAGE)}, expected)
        )
    times: dict[str, list[float]] = {label: [] for label, *_ in calls}
    found: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with built_services(url, Path(tmp)) as services:
            async with api_client(services, tenant.key) as api:
                for _, path, params, _ in calls:  # warm-up: pool, caches, app
                    await timed(api, path, params)
                for _ in range(args.repeat):
                    for label, path, params, _ in calls:
                        elapsed, count = await timed(api, path, params)
                        times[label].append(elapsed)
                        found[label] = count
    reference = statistics.median(times[calls[0][0]])
    right = True
    for label, _, _, expected in calls:
        median = statistics.median(times[label])
        ok = found[label] == expected
        right = right and ok
        print(
            f"{label}: {median:.1f} ms median, found {found[label]}"
            f"{'' if ok else f' (expected {expected})'}, ratio {median / reference:.2f}"
        )
    return right


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--rows", type=int, default=100_000, help="submissions searched")
    parser.add_argument("--repeat", type=int, default=15, help="calls of each, interleaved")
    parser.add_argument("--smoke", action="store_true", help="2,000 rows, 3 calls each")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeat = 2_000, 3
    name = migrated(args.admin_url)
    try:
        right = asyncio.run(measure(database_url(args.admin_url, name), args))
    finally:
        drop_database(args.admin_url, name)
    if not right:
        print("a call found other than it should")
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(main())
