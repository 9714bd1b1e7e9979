"""Benchmark of the schema check: the engine before the checker (65c3e3f) against the checker.

Default mode: the cost of checking one post, for a typical contact-form post (the
baseline) and for each attack payload of tests/schemas/test_attacks.py. *Before* is the
old engine's algorithm (commit 65c3e3f, `core/intake/schema.py`: Python `jsonschema`, every
error collected and sorted, 20 kept, run on the event loop), in a process of its own per
round, ended after `--timeout` seconds (printed `>30 s`). *After* is
`SchemaChecker.check` end to end (the pipe to a warm child and back), also in a process of
its own per round: its wall time, the CPU the parent's event loop spent on it, and the
CPU the child spent (a child ended by its budget is counted through its rusage; the next
check starts another child, whose start is timed apart). Memory: the peak RSS growth of the
process that checked (before), of the parent and of the largest child (after).

`--attacks` mode: each attack against a real `postbag serve`, the old code's (a worktree
of 65c3e3f with its own .venv, `--before`) and this one's (`--after`), each on a fresh
database with an organization, and per attack a fresh server and a form set up through
/v1 (`enforce`, a rate limit that lets every post through, the schema; a schema the new
code refuses at save is inserted with SQL, as an older row would be). While the attack's
posts run, another client polls `/health` every 50 ms: prints the longest `/health` wait,
the posts' time and statuses, how the submissions were stored and the server's RSS
before and after. An attack still running after `--attack-timeout` seconds ends its server.
A control posts the 8 bodies of 256 KB to a form that checks no schema (what the server
spends on such a body without the check).

    .venv/bin/python tests/bench/schema.py --rounds 3
    git worktree add /work/before 65c3e3f  # with its own .venv ([dev])
    .venv/bin/python tests/bench/schema.py --attacks --before /work/before \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres

Not a test: the machine's speed drifts, so each figure is the range over `--rounds`.
`--smoke` runs both modes at one round of one post (the old engine cut after 1 s; the
first attack alone against the servers, the new code's alone without `--before`) and fails
unless the new code's server answers it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.types.json import Jsonb

from tests.bench.submit import ENFORCED_SCHEMA, _free_port, _url
from tests.support.cli import subprocess_env
from tests.support.schemas import ref_pairs

ROOT = Path(__file__).resolve().parents[2]
SECRET = "bench-secret-key-0123456789abcdef0123456789"
MB = 1024 * 1024

CONTACT = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "company": "Analytical Engines",
    "phone": "+44 20 7946 0000",
    "subject": "Hello",
    "message": "A short message, as a visitor writes one.",
    "consent": "yes",
    "source": "bench",
}


@dataclass(frozen=True)
class Case:
    name: str
    schema: dict[str, Any]
    values: dict[str, Any]
    parallel: int = 1  # posts at once in `--attacks`
    mode: str = "enforce"


BASELINE = Case("contact form, valid (baseline)", dict(ENFORCED_SCHEMA), CONTACT)
ATTACKS = [
    Case(
        "uniqueItems+maxItems 10, 3,000 objects",
        {"properties": {"tags": {"type": "array", "uniqueItems": True, "maxItems": 10}}},
        {"tags": [{"n": i} for i in range(3000)]},
    ),
    Case(
        "256 KB array (120,000 ints) vs items string",
        {"properties": {"x": {"items": {"type": "string"}}}},
        {"x": [1] * 120_000},
        parallel=8,
    ),
    Case(
        "pattern ^(a+)+$, 30 'a' and '!'",
        {"properties": {"x": {"pattern": "^(a+)+$"}}},
        {"x": "a" * 30 + "!"},
    ),
    Case("ref_pairs(16): 16 nested anyOf pairs, a string", ref_pairs(16), {"x": "abc"}),
]
# `--attacks` only: what the 256 KB posts cost a server that checks no schema.
CONTROL = Case("control: the 256 KB posts, schema_mode off", {}, {"x": [1] * 120_000}, 8, "off")


# --- measuring a process -------------------------------------------------------------------


def _status_mb(pid: int | str, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: 5 > clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _cpu_ns(pid: int) -> int:
    """CPU time a live process has used, in nanoseconds (the scheduler's own count)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _span(values: list[float], unit: str = "", digits: int | None = None) -> str:
    """`a-b unit` over the rounds (one figure when they agree at this precision); by
    default 3 significant digits or so."""
    if not values:
        return "—"
    if digits is None:
        top = max(abs(v) for v in values)
        digits = 0 if top >= 100 else 1 if top >= 10 else 2
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return (low if low == high else f"{low}-{high}") + unit


# --- before: the old engine (commit 65c3e3f, core/intake/schema.py) ------------------------


@lru_cache(maxsize=256)
def _old_validator(schema_json: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _old_schema_errors(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[Any]:
    """The old `schema_errors`, as it ran on the event loop for each `enforce` post."""
    validator = _old_validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(dict(values)), key=lambda e: list(e.absolute_path))
    return [
        {"path": "/" + "/".join(str(p) for p in e.absolute_path), "keyword": str(e.validator)}
        for e in errors[:20]
    ]


def _before_process(case: Case, posts: int, out: Connection) -> None:
    _old_validator(json.dumps(case.schema, sort_keys=True))  # compiled once, cached
    _old_schema_errors(BASELINE.schema, BASELINE.values)
    _reset_peak()
    out.send({"rss": _status_mb("self", "VmRSS")})
    for _ in range(posts):
        started = time.perf_counter()
        errors = _old_schema_errors(case.schema, case.values)
        out.send({"seconds": time.perf_counter() - started, "errors": len(errors)})
    out.send({"hwm": _status_mb("self", "VmHWM")})


@dataclass
class Before:
    ms: list[float] = field(default_factory=list)  # per post, the mean of each round
    growth_mb: list[float] = field(default_factory=list)
    errors: int = 0
    timed_out: bool = False


def before(case: Case, posts: int, rounds: int, timeout: float) -> Before:
    """The old check's time per post and peak RSS growth, each round in a fresh process."""
    result = Before()
    context = multiprocessing.get_context("spawn")
    for _ in range(rounds):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_before_process, args=(case, posts, sender))
        process.start()
        sender.close()
        try:
            rss = receiver.recv()["rss"] if receiver.poll(60) else float("nan")
            times: list[float] = []
            for _ in range(posts):
                if not receiver.poll(timeout):
                    result.timed_out = True
                    assert process.pid is not None
                    result.growth_mb.append(_status_mb(process.pid, "VmHWM") - rss)
                    break
                message = receiver.recv()
                times.append(message["seconds"])
                result.errors = message["errors"]
            else:
                result.growth_mb.append(receiver.recv()["hwm"] - rss)
                result.ms.append(sum(times) / len(times) * 1000)
        finally:
            process.kill()
            process.join()
        if result.timed_out:
            break
    return result


# --- after: SchemaChecker.check ------------------------------------------------------------


async def _after_checks(case: Case, posts: int) -> dict[str, Any]:
    from core.schemas.checker import UNLISTED, SchemaChecker

    checker = SchemaChecker(children=1)
    await checker.check("warm", BASELINE.schema, BASELINE.values)  # starts the child
    _reset_peak()
    rss = _status_mb("self", "VmRSS")
    walls: list[float] = []
    loop_cpu: list[float] = []
    child_cpu: list[float] = []
    outcomes: list[str] = []
    starts: list[float] = []
    try:
        for _ in range(posts):
            child = checker._idle[-1].process
            cpu_before = _cpu_ns(child.pid) / 1e9
            reaped_before = _children_cpu()
            thread_before = time.thread_time()
            started = time.perf_counter()
            verdict = await checker.check("case", case.schema, case.values)
            walls.append(time.perf_counter() - started)
            loop_cpu.append(time.thread_time() - thread_before)
            if any(idle.process is child for idle in checker._idle):
                child_cpu.append(_cpu_ns(child.pid) / 1e9 - cpu_before)
            else:  # ended by its budget: its whole CPU comes back in the rusage of children
                await child.wait()
                child_cpu.append(_children_cpu() - reaped_before - cpu_before)
                started = time.perf_counter()
                await checker.check("warm", BASELINE.schema, BASELINE.values)
                starts.append(time.perf_counter() - started)
            outcome = verdict.outcome + (f" ({verdict.why})" if verdict.why else "")
            if verdict.errors == [UNLISTED]:
                outcome += " (unlisted: the child ended by its budget)"
            outcomes.append(outcome)
        growth = _status_mb("self", "VmHWM") - rss
    finally:
        await checker.close()
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "wall": walls,
        "loop_cpu": loop_cpu,
        "child_cpu": child_cpu,
        "outcomes": outcomes,
        "starts": starts,
        "growth": growth,
        "child_peak": child_peak,
    }


def _after_process(case: Case, posts: int, out: Connection) -> None:
    out.send(asyncio.run(_after_checks(case, posts)))


@dataclass
class After:
    ms: list[float] = field(default_factory=list)
    loop_ms: list[float] = field(default_factory=list)
    child_ms: list[float] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    growth_mb: list[float] = field(default_factory=list)
    child_peak_mb: list[float] = field(default_factory=list)
    outcomes: set[str] = field(default_factory=set)


def after(case: Case, posts: int, rounds: int) -> After:
    """The checker's time per post (wall, the loop's CPU, the child's CPU) and memory."""
    result = After()
    context = multiprocessing.get_context("spawn")
    for _ in range(rounds):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_after_process, args=(case, posts, sender))
        process.start()
        sender.close()
        try:
            if not receiver.poll(120):
                raise RuntimeError(f"{case.name}: the checker took over 120 s")
            got = receiver.recv()
        finally:
            process.kill()
            process.join()
        result.ms.append(sum(got["wall"]) / posts * 1000)
        result.loop_ms.append(sum(got["loop_cpu"]) / posts * 1000)
        result.child_ms.append(sum(got["child_cpu"]) / posts * 1000)
        result.start_ms += [s * 1000 for s in got["starts"]]
        result.growth_mb.append(got["growth"])
        result.child_peak_mb.append(got["child_peak"])
        result.outcomes.update(got["outcomes"])
    return result


def engines(args: argparse.Namespace) -> None:
    print(
        f"cpus: {os.cpu_count()}, {args.rounds} rounds, each in a fresh process; "
        f"posts per round: baseline {args.baseline_posts}, attacks {args.posts} "
        f"(before: {args.before_posts}); before capped at {args.timeout:.0f} s a post"
    )
    rows = []
    for case in [BASELINE, *ATTACKS]:
        baseline = case is BASELINE
        print(f"measuring: {case.name}", file=sys.stderr, flush=True)
        old = before(
            case, args.baseline_posts if baseline else args.before_posts, args.rounds, args.timeout
        )
        new = after(case, args.baseline_posts if baseline else args.posts, args.rounds)
        rows.append((case, old, new))
    print()
    print("Validation cost per post, ms (ranges over the rounds):")
    print(
        f"{'payload':<48} | {'before':>11} {'errors':>6} | {'after wall':>11} "
        f"{'loop CPU':>9} {'child CPU':>9} | after's verdict"
    )
    for case, old, new in rows:
        old_ms = f">{args.timeout:.0f} s" if old.timed_out else _span(old.ms)
        errors = "—" if old.timed_out else str(old.errors)
        print(
            f"{case.name:<48} | {old_ms:>11} {errors:>6} | {_span(new.ms):>11} "
            f"{_span(new.loop_ms):>9} {_span(new.child_ms):>9} | "
            f"{', '.join(sorted(new.outcomes))}"
        )
    starts = [ms for _, _, new in rows for ms in new.start_ms]
    if starts:
        print(
            f"a child ended by its budget is replaced for the next check: starting one took "
            f"{_span(starts, ' ms', 0)} ({len(starts)} starts)"
        )
    print()
    print("Peak RSS growth while checking (MB; ranges over the rounds):")
    print(
        f"{'payload':<48} | {'before (the loop)':>17} | {'after: parent':>13} "
        f"{'largest child (peak RSS)':>24}"
    )
    for case, old, new in rows:
        old_mb = _span(old.growth_mb, digits=0) + (" (cut)" if old.timed_out else "")
        print(
            f"{case.name:<48} | {old_mb:>17} | {_span(new.growth_mb, digits=1):>13} "
            f"{_span(new.child_peak_mb, digits=0):>24}"
        )
    print(
        "(errors: the violations the old check listed, at most 20; loop CPU: the parent's "
        "thread, i.e. the event loop; the first after-post of each round sends and compiles "
        "the schema)"
    )


# --- --attacks: a real server, /health polled meanwhile ------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str


def _env(url: str, workdir: Path, tree: Path) -> dict[str, str]:
    env = subprocess_env(
        POSTBAG_DATABASE_URL=url,
        POSTBAG_SECRET_KEY=SECRET,
        POSTBAG_LOG_LEVEL="WARNING",
        POSTBAG_STORAGE_URL=f"file://{workdir / 'files'}",
    )
    env["PYTHONPATH"] = str(tree)  # `tree`'s code, not this one's
    return env


def _command(tree: Path) -> list[str]:
    """`postbag` from `tree`: with its own .venv's Python (the old code's), or with this
    one's when it has none (a worktree sharing another checkout's .venv)."""
    python = tree / ".venv" / "bin" / "python"
    return [str(python if python.exists() else sys.executable), "-m", "local.cli"]


def _postbag(tree: Path, env: dict[str, str], *command: str) -> str:
    done = subprocess.run(
        [*_command(tree), *command],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def start_server(tree: Path, env: dict[str, str], log: Path) -> Server:
    """`postbag serve` from `tree`, its stderr (WARNING and up, JSON lines) in `log`."""
    port = _free_port()
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*_command(tree), "serve", "--host=127.0.0.1", f"--port={port}"],
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return Server(process, base)
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"postbag serve ({tree}) ended with {process.returncode}")
        time.sleep(0.1)
    raise RuntimeError(f"postbag serve ({tree}) did not answer /health")


def stop_server(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def _children_rss_mb(pid: int) -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                total += _status_mb(entry.name, "VmRSS")
        except (OSError, ValueError):
            continue
    return total


@dataclass
class AttackResult:
    side: str
    case: Case
    saved: str
    health_max: float = 0.0
    health_polls: int = 0
    health_failed: str = ""
    seconds: float = 0.0
    statuses: list[str] = field(default_factory=list)
    stored: str = ""
    rss_before: float = 0.0
    rss_after: float = 0.0
    hwm_after: float = 0.0
    children_after: float = 0.0
    killed: bool = False
    log_lines: int = 0


async def _health_poll(base: str, done: asyncio.Event, result: AttackResult) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        while not done.is_set():
            started = time.monotonic()
            try:
                await client.get("/health")
            except httpx.HTTPError as exc:
                result.health_failed = type(exc).__name__
                result.health_max = max(result.health_max, time.monotonic() - started)
                return
            result.health_polls += 1
            result.health_max = max(result.health_max, time.monotonic() - started)
            await asyncio.sleep(0.05)


async def _post(client: httpx.AsyncClient, path: str, body: bytes) -> str:
    try:
        answer = await client.post(
            path,
            content=body,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return str(answer.status_code)


async def _attack(
    server: Server, forms: tuple[str, str], case: Case, result: AttackResult, limit: float
) -> None:
    pid = server.process.pid
    warm_form, form = forms
    async with httpx.AsyncClient(base_url=server.base, timeout=limit + 30) as client:
        # A valid post to another enforcing form: the old code imports jsonschema, the new
        # one starts its children.
        warm = await client.post(f"/s/{warm_form}", json=BASELINE.values)
        if warm.status_code != 201:
            raise RuntimeError(f"warm-up post: {warm.status_code} {warm.text}")
        await asyncio.sleep(0.5)
        result.rss_before = _status_mb(pid, "VmRSS")
        bodies = [
            json.dumps({**case.values, "n": n}, separators=(",", ":")).encode()
            for n in range(case.parallel)
        ]
        done = asyncio.Event()
        poller = asyncio.create_task(_health_poll(server.base, done, result))
        await asyncio.sleep(0.2)  # a few polls first
        started = time.monotonic()
        posts = asyncio.gather(*(_post(client, f"/s/{form}", body) for body in bodies))
        try:
            result.statuses = list(await asyncio.wait_for(posts, limit))
        except TimeoutError:
            result.killed = True
            result.statuses = [f">{limit:.0f} s"] * case.parallel
            result.hwm_after = _status_mb(pid, "VmHWM")
            result.rss_after = _status_mb(pid, "VmRSS")
            server.process.kill()
        result.seconds = time.monotonic() - started
        if not result.killed:
            await asyncio.sleep(0.3)  # a few polls after
            result.rss_after = _status_mb(pid, "VmRSS")
            result.hwm_after = _status_mb(pid, "VmHWM")
            result.children_after = _children_rss_mb(pid)
        done.set()
        await poller


def _api(base: str, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=base + "/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def _make_form(server: Server, key: str, url: str, org: str, case: Case) -> tuple[str, str]:
    """A form enforcing `case.schema` (saved through /v1, or with SQL when refused);
    returns the form's id and how the schema was saved."""
    with _api(server.base, key) as api:
        created = api.post("/forms", json={"name": case.name[:60], "rate_limit": {"max": 10_000}})
        created.raise_for_status()
        form = str(created.json()["id"])
        if case.mode == "off":
            return form, "none (off)"
        saved = api.post(f"/forms/{form}/schemas", json={"schema": case.schema})
        if saved.status_code == 201:
            how = "saved (201)"
        elif saved.status_code == 422:
            how = "refused (422), inserted with SQL"
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO form_schemas (organization_id, form_id, version, schema) "
                    "VALUES (%s, %s, 1, %s)",
                    (org, form, Jsonb(case.schema)),
                )
        else:
            raise RuntimeError(f"saving the schema: {saved.status_code} {saved.text}")
        api.patch(f"/forms/{form}", json={"schema_mode": "enforce"}).raise_for_status()
    return form, how


def attack_side(
    side: str, tree: Path, admin_url: str, limit: float, logs: Path, cases: list[Case]
) -> list[AttackResult]:
    dbname = f"postbag_schema_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
    url = _url(admin_url, dbname)
    workdir = Path(tempfile.mkdtemp(prefix="postbag-schema-bench-"))
    env = _env(url, workdir, tree)
    results: list[AttackResult] = []
    try:
        _postbag(tree, env, "migrate")
        org = json.loads(
            _postbag(tree, env, "create-org", "--name", "Bench", "--plan", "self_hosted", "--json")
        )
        for n, case in enumerate(cases):
            print(f"{side}: {case.name}", file=sys.stderr, flush=True)
            log = logs / f"{side}-{dbname}-{n}.log"
            server = start_server(tree, env, log)
            try:
                make = (server, org["api_key"], url, org["organization_id"])
                warm_form, _ = _make_form(*make, BASELINE)
                form, saved = _make_form(*make, case)
                result = AttackResult(side, case, saved)
                asyncio.run(_attack(server, (warm_form, form), case, result, limit))
            finally:
                stop_server(server)
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT status, coalesce(reason, ''), count(*) FROM submissions "
                    "WHERE form_id = %s GROUP BY 1, 2 ORDER BY 1, 2",
                    (form,),
                ).fetchall()
            result.log_lines = len(log.read_text().splitlines())
            result.stored = ", ".join(" ".join(str(p) for p in row if p) for row in rows) or "none"
            results.append(result)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def attacks(args: argparse.Namespace, cases: list[Case]) -> list[AttackResult]:
    logs = Path(args.logs or tempfile.mkdtemp(prefix="postbag-schema-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    sides = []
    for _ in range(args.rounds):
        for side, tree in (("before", args.before), ("after", args.after)):
            if tree is not None:
                sides += attack_side(
                    side, Path(tree), args.admin_url, args.attack_timeout, logs, cases
                )
    print(
        f"cpus: {os.cpu_count()}; /health polled every 50 ms by another client during each "
        f"attack; an attack still running after {args.attack_timeout:.0f} s ends its server"
    )
    print(
        f"{'attack':<48} {'side':<6} | {'longest /health':>15} {'polls':>5} | "
        f"{'posts took':>10} {'statuses':<14} | {'RSS MB before→after (peak)':>26} "
        f"{'children':>8} {'log':>3} | stored; schema"
    )
    order = [*ATTACKS, CONTROL]
    for r in sorted(sides, key=lambda r: (order.index(r.case), r.side != "before")):
        health = f">{r.health_max:.0f} s (killed)" if r.killed else f"{r.health_max:.2f} s"
        statuses = ",".join(sorted(set(r.statuses)))
        if len(r.statuses) > 1:
            statuses = f"{len(r.statuses)}x {statuses}"
        rss = f"{r.rss_before:.0f}→{r.rss_after:.0f} ({r.hwm_after:.0f})"
        children = f"{r.children_after:.0f}" if not r.killed else "—"
        print(
            f"{r.case.name:<48} {r.side:<6} | {health:>15} {r.health_polls:>5} | "
            f"{r.seconds:>8.2f} s {statuses:<14} | {rss:>26} {children:>8} {r.log_lines:>3} | "
            f"{r.stored}; {r.saved}"
        )
    return sides


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--baseline-posts", type=int, default=200, help="posts per round for the baseline"
    )
    parser.add_argument("--posts", type=int, default=5, help="attack posts per round, after")
    parser.add_argument(
        "--before-posts", type=int, default=1, help="attack posts per round, before"
    )
    parser.add_argument(
        "--timeout", type=float, default=30, help="seconds before an old check is cut"
    )
    parser.add_argument(
        "--attacks", action="store_true", help="attack real servers, /health polled"
    )
    parser.add_argument(
        "--admin-url",
        default=os.environ.get(
            "POSTBAG_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--before", help="a worktree of the old code (65c3e3f) with its own .venv")
    parser.add_argument(
        "--after", default=str(ROOT), help="the new code's tree (its .venv, or this Python)"
    )
    parser.add_argument("--attack-timeout", type=float, default=60)
    parser.add_argument("--logs", help="where the servers' stderr goes (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="both modes, tiny, in seconds")
    args = parser.parse_args()
    if args.smoke:
        smoke(args)
    elif args.attacks:
        attacks(args, [*ATTACKS, CONTROL])
    else:
        engines(args)
    return 0


def smoke(args: argparse.Namespace) -> None:
    """Both modes with one round of one post (five for the baseline), the old engine cut
    after 1 s, and the first attack alone against a server (each starts its own); fails
    unless every post to the new code's server is answered."""
    args.rounds, args.baseline_posts, args.posts, args.before_posts = 1, 5, 1, 1
    args.timeout, args.attack_timeout = 1.0, 30.0
    engines(args)
    if args.before is None:
        print("no --before tree (a worktree of 65c3e3f): the attacks on the new code only")
    for result in attacks(args, ATTACKS[:1]):
        answered = not result.killed and all(s.isdigit() for s in result.statuses)
        assert result.side == "before" or answered, f"{result.case.name}: {result.statuses}"


if __name__ == "__main__":
    sys.exit(main())
