"""The attacks of issue 27 against a real `postbag dev` (HTTP and the delivery worker in one
process, as the attacks were first measured), each printed as one row: the longest
`/health` answer meanwhile (polled on a new connection each time), a bystander
organization's submit, the server's resident memory before, at its peak and after, and
what the attack itself left (bytes stored, spooled, logged; answers).

    .venv/bin/python tests/bench/hostile.py \\
        --admin-url postgresql://postgres@127.0.0.1:5432/postgres [--only slow_bodies,...]

Each attack is one function of ATTACKS: (context) -> its own figures. The first row is
the same server unattacked for 5 s: each attack's `/health` stall is also printed as a
ratio of that one (`health_vs_idle`). Not a test: the figures depend on the machine. The
"before" figures are issue 27's, measured on an earlier main. `--smoke` runs every attack
at tiny sizes (SMOKE) in seconds and fails unless `/health` and the bystander's posts were
answered throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.http.agents.tools import csv_records
from tests.support.cli import postbag, subprocess_env, terminate, wait_until_serving
from tests.support.databases import create_database, database_url, drop_database
from tests.support.hostile import SlowReader, health_watch
from tests.support.peers import Peer, receiver, status, telegram_api

TOKEN = "bench-discord-token-0123456789abcdefghijklmnopqrstuvwxyz"
BOT = "123456789:AAH-telegram-bot-token-0123456789"
DISCORD_HOOK = f"/api/webhooks/112233445566778899/{TOKEN}"
MB = 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    """How hard each attack pushes."""

    idle: float = 5.0  # seconds of the unattacked reference
    value: int = 250_000  # characters of the templated value (and of the fan-out's post)
    placeholders: int = 2_000  # of the template: 10,000 characters, the longest template
    flood: int = 40  # posts of 253 KB in a burst
    flood_value: int = 253_000
    routes: int = 300
    trickles: int = 1000  # connections trickling a body
    uploads: int = 60  # stalled multipart uploads
    slow_seconds: int = 40
    newcomer_at: tuple[int, ...] = (5, 20)  # seconds into the slow bodies
    readers: int = 12  # clients that stop reading an export
    export_rows: int = 2000  # 6 KB each
    stall: float = 5.0  # seconds the readers stop, before and after the bystander posts
    long_value: int = 200_000  # characters of the value the MCP export meets
    bystander_every: float = 1.0  # seconds between the bystander's posts


SMOKE = Sizes(
    idle=0.5,
    value=2_500,
    placeholders=20,
    flood=4,
    flood_value=2_530,
    routes=3,
    trickles=10,
    uploads=2,
    slow_seconds=3,
    newcomer_at=(1,),
    readers=2,
    export_rows=50,
    stall=0.5,
    long_value=2_000,
    bystander_every=0.2,
)


def _incompressible(characters: int) -> str:
    """Hex of random bytes, so the database stores what it is sent."""
    return secrets.token_hex(characters // 2)


@dataclass
class Bench:
    """The server under attack and what the attacks share."""

    base: str
    pid: int
    db_url: str
    log: Path
    spool: Path
    attacker: str
    bystander_form: str
    discord: Peer
    telegram: Peer
    hooks: Peer
    sizes: Sizes = field(default_factory=Sizes)
    headers: dict[str, str] = field(default_factory=dict)

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, headers=self.headers, timeout=120)


async def _ok(response: httpx.Response) -> Any:
    assert response.status_code < 300, (response.status_code, response.text[:500])
    return response.json()


async def _form(bench: Bench, name: str, **settings: Any) -> str:
    async with bench.api() as api:
        form = await _ok(await api.post("/v1/forms", json={"name": name, **settings}))
    return str(form["id"])


async def _route(
    bench: Bench, form: str, type_: str, config: dict[str, Any], secret: str | None, text: str
) -> None:
    body: dict[str, Any] = {"type": type_, "name": type_, "config": config}
    if secret is not None:
        body["secret"] = secret
    async with bench.api() as api:
        destination = await _ok(await api.post("/v1/destinations", json=body))
        template = {"text": text} if text else None
        await _ok(
            await api.post(
                f"/v1/forms/{form}/routes",
                json={"destination_id": destination["id"], "template": template},
            )
        )


async def _post(base: str, form: str, values: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        return await client.post(f"/s/{form}", json=values)


async def _settled_deliveries(bench: Bench, receipt: str, seconds: float = 120) -> list[str]:
    """Wait until none of the submission's deliveries is pending or sending."""
    deadline = time.monotonic() + seconds
    async with bench.api() as api:
        while time.monotonic() < deadline:
            page = await _ok(
                await api.get("/v1/deliveries", params={"submission": receipt, "limit": 200})
            )
            states = [row["status"] for row in page["data"]]
            if states and not {"pending", "sending"} & set(states):
                return states
            await asyncio.sleep(0.2)
    return ["unsettled"]


def _database_bytes(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert row is not None
    return int(row[0])


async def _template_attack(
    bench: Bench, type_: str, config: dict[str, Any], secret: str | None
) -> dict[str, Any]:
    form = await _form(bench, f"Template {type_}")
    await _route(bench, form, type_, config, secret, "{{a}}" * bench.sizes.placeholders)
    logged = bench.log.stat().st_size
    answer = await _post(bench.base, form, {"a": _incompressible(bench.sizes.value)})
    states = await _settled_deliveries(bench, answer.json()["receipt"])
    return {
        "post": answer.status_code,
        "deliveries": states,
        "log_mb": round((bench.log.stat().st_size - logged) / MB, 2),
    }


async def template_discord(bench: Bench) -> dict[str, Any]:
    """2,000 placeholders of a 250 KB value (by default) to Discord (loopback receiver)."""
    sent = len(bench.discord.requests)
    found = await _template_attack(
        bench, "discord", {"url": bench.discord.url + DISCORD_HOOK}, None
    )
    bodies = [len(r.body) for r in bench.discord.requests[sent:]]
    return {**found, "sent_bytes": bodies}


async def template_telegram(bench: Bench) -> dict[str, Any]:
    """The same to Telegram (its API on loopback)."""
    sent = len(bench.telegram.requests)
    found = await _template_attack(bench, "telegram", {"chat_id": "-1001234567890"}, BOT)
    return {**found, "sent_bytes": [len(r.body) for r in bench.telegram.requests[sent:]]}


async def template_email(bench: Bench) -> dict[str, Any]:
    """The same to an email destination with the default log-only provider."""
    return await _template_attack(bench, "email", {"to": ["owner@example.com"]}, None)


async def flood(bench: Bench) -> dict[str, Any]:
    """40 posts of 253 KB (by default) in a burst to a form with the default rate limit."""
    form = await _form(bench, "Flood")
    before = _database_bytes(bench.db_url)
    size = bench.sizes.flood_value
    answers = await asyncio.gather(
        *(
            _post(bench.base, form, {"n": i, "story": _incompressible(size)})
            for i in range(bench.sizes.flood)
        )
    )
    codes: dict[int, int] = {}
    for answer in answers:
        codes[answer.status_code] = codes.get(answer.status_code, 0) + 1
    return {"answers": codes, "db_mb": round((_database_bytes(bench.db_url) - before) / MB, 1)}


async def routes_300(bench: Bench) -> dict[str, Any]:
    """One 250 KB post to a form with 300 webhook routes (by default)."""
    form = await _form(bench, "Fan-out")
    async with bench.api() as api:
        for i in range(bench.sizes.routes):
            destination = await _ok(
                await api.post(
                    "/v1/destinations",
                    json={
                        "type": "webhook",
                        "name": f"hook {i}",
                        "config": {"url": f"{bench.hooks.url}/{i}"},
                    },
                )
            )
            await _ok(
                await api.post(
                    f"/v1/forms/{form}/routes", json={"destination_id": destination["id"]}
                )
            )
    before = _database_bytes(bench.db_url)
    answer = await _post(bench.base, form, {"story": _incompressible(bench.sizes.value)})
    written = _database_bytes(bench.db_url) - before
    receipt = answer.json()["receipt"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and _unsent(bench.db_url, receipt):
        await asyncio.sleep(0.5)
    return {
        "post": answer.status_code,
        "db_mb": round(written / MB, 1),
        "unsent_after": _unsent(bench.db_url, receipt),
    }


def _unsent(db_url: str, receipt: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM deliveries WHERE submission_id = %s"
            " AND status IN ('pending', 'sending', 'failed')",
            (receipt,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _trickle(base: str, path: str, head: bytes, seconds: float) -> bytes:
    """Send `head`, then a byte a second; what the server answered before it closed."""
    host, port = base.removeprefix("http://").split(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError as exc:
        return f"connect: {exc.strerror}".encode()
    writer.write(head)
    answer = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(reader.read(4096), 1)
            except TimeoutError:
                writer.write(b"x")
                await writer.drain()
                continue
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    writer.close()
    return answer[:12] or b"open"


async def slow_bodies(bench: Bench) -> dict[str, Any]:
    """1,000 connections trickling a body, and 60 stalled multipart uploads (1 MB sent of
    a file) to a form with no file fields, for 40 s (by default); a newcomer posts
    meanwhile."""
    sizes = bench.sizes
    form = await _form(bench, "Slow bodies")
    head = (
        f"POST /s/{form} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        "Content-Length: 200000\r\n\r\n{"
    ).encode()
    boundary = "benchboundary"
    upload = (
        f"POST /s/{form} HTTP/1.1\r\nHost: t\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: 5000000\r\n\r\n--{boundary}\r\n"
        'Content-Disposition: form-data; name="cv"; filename="cv.txt"\r\n\r\n'
    ).encode() + b"z" * MB
    seconds = sizes.slow_seconds
    trickles = [
        asyncio.create_task(_trickle(bench.base, f"/s/{form}", head, seconds))
        for _ in range(sizes.trickles)
    ]
    uploads = [
        asyncio.create_task(_trickle(bench.base, f"/s/{form}", upload, seconds))
        for _ in range(sizes.uploads)
    ]
    spooled = 0
    newcomer: list[int | str] = []
    for second in range(seconds):
        await asyncio.sleep(1)
        spooled = max(spooled, sum(f.stat().st_size for f in bench.spool.rglob("*") if f.is_file()))
        if second in sizes.newcomer_at:
            try:
                newcomer.append(
                    (await _post(bench.base, bench.bystander_form, {"n": -second})).status_code
                )
            except httpx.TransportError as exc:
                newcomer.append(type(exc).__name__)
    ends: dict[str, int] = {}
    for task in [*trickles, *uploads]:
        key = (await task).decode(errors="replace")
        ends[key] = ends.get(key, 0) + 1
    return {"spooled_mb": round(spooled / MB, 1), "newcomer": newcomer, "connections_ended": ends}


async def slow_exports(bench: Bench) -> dict[str, Any]:
    """12 clients that stop reading a 12 MB CSV export for 10 s (pool of 10; by default)."""
    sizes = bench.sizes
    form = await _form(bench, "Export", rate_limit={"max": 10000, "per_seconds": 60})
    row = json.dumps({f"field_{i:02}": "v" * 100 for i in range(60)})
    with psycopg.connect(bench.db_url, autocommit=True) as conn:
        org = conn.execute("SELECT organization_id FROM forms WHERE id = %s", (form,)).fetchone()
        assert org is not None
        conn.execute(
            """INSERT INTO submissions (id, organization_id, form_id, status, "values",
                                        payload_hash)
               SELECT 'sub_' || lpad(i::text, 26, '0'), %s, %s, 'accepted', %s, '\\x00'
                 FROM generate_series(1, %s) i""",
            (org[0], form, row, sizes.export_rows),
        )
    readers = [SlowReader(bench.base, bench.attacker, form) for _ in range(sizes.readers)]
    await asyncio.gather(*(reader.begin() for reader in readers))
    await asyncio.sleep(sizes.stall)
    started = time.monotonic()
    bystander = await _post(bench.base, bench.bystander_form, {"n": -1000})
    bystander_wait = time.monotonic() - started
    await asyncio.sleep(sizes.stall)
    exports = await asyncio.gather(*(reader.finish() for reader in readers))
    return {
        "bystander": bystander.status_code,
        "bystander_s": round(bystander_wait, 2),
        "rows_read": sorted({len(csv_records(text)) - 1 for text in exports}),
    }


async def mcp_export_long_value(bench: Bench) -> dict[str, Any]:
    """The MCP export tool on a form holding a 200,000-character value (by default)."""
    form = await _form(bench, "Long value")
    answer = await _post(bench.base, form, {"story": "é" + "x" * bench.sizes.long_value})
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "export_submissions", "arguments": {"form_id": form}},
    }
    async with bench.api() as api:
        result = await api.post(
            "/mcp",
            json=call,
            headers={
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
    text = result.text
    return {
        "post": answer.status_code,
        "mcp": result.status_code,
        "error": '"isError":true' in text,
    }


ATTACKS: dict[str, Callable[[Bench], Awaitable[dict[str, Any]]]] = {
    "template_discord": template_discord,
    "template_telegram": template_telegram,
    "template_email": template_email,
    "flood": flood,
    "routes_300": routes_300,
    "slow_bodies": slow_bodies,
    "slow_exports": slow_exports,
    "mcp_export_long_value": mcp_export_long_value,
}


async def _bystander(
    bench: Bench, done: asyncio.Event, waits: list[float], codes: set[str]
) -> None:
    """Another organization posting once a second (by default) on new connections until
    `done`."""
    while not done.is_set():
        started = time.monotonic()
        try:
            answer = await _post(bench.base, bench.bystander_form, {"n": time.time_ns()})
            codes.add(str(answer.status_code))
        except httpx.TransportError as exc:
            codes.add(type(exc).__name__)
        waits.append(time.monotonic() - started)
        await asyncio.sleep(bench.sizes.bystander_every)


async def idle(bench: Bench) -> dict[str, Any]:
    """No attack, for 5 s (by default): the reference each attack's stall is a ratio of."""
    await asyncio.sleep(bench.sizes.idle)
    return {}


async def run(bench: Bench, names: list[str], *, smoke: bool) -> None:
    """Each attack's row; with `smoke`, a `/health` or bystander post left unanswered
    fails the run."""
    reference = 0.0
    for name in ["idle", *names]:
        done, waits, codes = asyncio.Event(), list[float](), set[str]()
        async with health_watch(bench.base, pid=bench.pid, fresh=True) as watch:
            posting = asyncio.create_task(_bystander(bench, done, waits, codes))
            found = await (idle if name == "idle" else ATTACKS[name])(bench)
            done.set()
            await posting
        reference = reference or watch.stall
        row = {
            "attack": name,
            "health_max_s": round(watch.stall, 3),
            "health_vs_idle": round(watch.stall / reference, 1),
            "health_not_200": sum(1 for s in watch.statuses if s != 200),
            "bystander_max_s": round(max(waits, default=0), 3),
            "bystander_answers": sorted(codes),
            "rss_mb": [
                round(watch.rss_before / MB),
                round(watch.rss_peak / MB),
                round(watch.rss_after / MB),
            ],
            **found,
        }
        print(json.dumps(row), flush=True)
        assert not smoke or (row["health_not_200"] == 0 and codes == {"201"}), name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--only", default=",".join(ATTACKS))
    parser.add_argument("--smoke", action="store_true", help="every attack, tiny, in seconds")
    args = parser.parse_args()
    names = args.only.split(",")
    name = create_database(args.admin_url)
    work = Path(tempfile.mkdtemp(prefix="postbag-hostile-"))
    spool = work / "tmp"
    spool.mkdir()
    db_url = database_url(args.admin_url, name)
    try:
        with (
            receiver(status(204)) as discord,
            receiver(telegram_api()) as telegram,
            receiver(status(204)) as hooks,
        ):
            env = subprocess_env(
                POSTBAG_DATABASE_URL=db_url,
                POSTBAG_SECRET_KEY=secrets.token_urlsafe(40),
                POSTBAG_STORAGE_URL=f"file://{work / 'files'}",
                POSTBAG_TELEGRAM_API_URL=telegram.url,
                TMPDIR=str(spool),
            )
            assert postbag("migrate", env=env).returncode == 0
            attacker = json.loads(
                postbag(
                    "create-org", "--name", "Attacker", "--plan", "self_hosted", "--json", env=env
                ).stdout
            )
            bystander = json.loads(
                postbag(
                    "create-org", "--name", "Bystander", "--plan", "pro", "--json", env=env
                ).stdout
            )
            port = _free_port()
            base = f"http://127.0.0.1:{port}"
            log = work / "server.log"
            with log.open("wb") as sink:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "local.cli",
                        "dev",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                    ],
                    env={**env, "POSTBAG_PUBLIC_URL": base},
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
                try:
                    wait_until_serving(proc, base + "/health")  # type: ignore[arg-type]
                    bench = Bench(
                        base=base,
                        pid=proc.pid,
                        db_url=db_url,
                        log=log,
                        spool=spool,
                        attacker=attacker["api_key"],
                        bystander_form="",
                        discord=discord,
                        telegram=telegram,
                        hooks=hooks,
                        sizes=SMOKE if args.smoke else Sizes(),
                        headers={"Authorization": f"Bearer {attacker['api_key']}"},
                    )
                    bench.bystander_form = asyncio.run(_bystander_form(base, bystander["api_key"]))
                    asyncio.run(run(bench, names, smoke=args.smoke))
                finally:
                    terminate(proc)  # type: ignore[arg-type]
    finally:
        drop_database(args.admin_url, name)


async def _bystander_form(base: str, key: str) -> str:
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as api:
        form = await _ok(
            await api.post(
                "/v1/forms",
                json={"name": "Bystander", "rate_limit": {"max": 10000, "per_seconds": 60}},
            )
        )
    return str(form["id"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    main()
