"""Watching a server while it is attacked: `/health` polled from a client of its own, and
the server process's resident memory sampled meanwhile (from /proc); a slow reader of a
CSV export."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid` now (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used so far (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settled(pid: int, *, within: float = 60) -> None:
    """Wait until process `pid` uses under 5 % of a core over half a second (whatever it
    was doing is done, or blocked)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        used = cpu_seconds(pid)
        await asyncio.sleep(0.5)
        if cpu_seconds(pid) - used < 0.025:
            return
    raise AssertionError(f"process {pid} still busy after {within} s")


@dataclass
class Watch:
    """What the watch saw: each `/health` wait and answer (0: no answer), and memory."""

    waits: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    rss_before: int = 0
    rss_after: int = 0

    @property
    def stall(self) -> float:
        """The longest wait for `/health`."""
        return max(self.waits, default=float("inf"))

    @property
    def rss_peak(self) -> int:
        return max([self.rss_before, self.rss_after, *self.rss])


@contextlib.asynccontextmanager
async def health_watch(
    base: str, *, pid: int | None = None, fresh: bool = False, timeout: float = 60
) -> AsyncIterator[Watch]:
    """Poll `/health` until the block ends (on a new connection each time when `fresh`),
    sampling the resident memory of process `pid` with each poll."""
    watch = Watch()
    if pid is not None:
        watch.rss_before = rss_bytes(pid)
    done = asyncio.Event()
    limits = httpx.Limits(max_keepalive_connections=0 if fresh else 1)

    async def poll() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
            while not done.is_set():
                started = time.monotonic()
                try:
                    status = (await client.get("/health")).status_code
                except httpx.TransportError:
                    status = 0
                watch.waits.append(time.monotonic() - started)
                watch.statuses.append(status)
                if pid is not None:
                    watch.rss.append(rss_bytes(pid))
                await asyncio.sleep(0.05)

    task = asyncio.create_task(poll())
    try:
        yield watch
    finally:
        done.set()
        await task
        if pid is not None:
            watch.rss_after = rss_bytes(pid)


class SlowReader:
    """A client of a form's CSV export with a 64 KB receive buffer that reads its first
    bytes (`begin`), then nothing until `finish`: the server's writes to it block."""

    def __init__(self, base: str, key: str, form: str) -> None:
        transport = httpx.AsyncHTTPTransport(
            socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)]
        )
        self.client = httpx.AsyncClient(
            base_url=base,
            transport=transport,
            timeout=300,
            headers={"Authorization": f"Bearer {key}"},
        )
        self.form = form
        self.text = ""

    async def begin(self) -> None:
        request = self.client.build_request(
            "GET", "/v1/submissions/export.csv", params={"form": self.form}
        )
        self.response = await self.client.send(request, stream=True)
        assert self.response.status_code == 200, self.response.status_code
        self.chunks = self.response.aiter_text()
        self.text = await anext(self.chunks)

    async def finish(self) -> str:
        """The whole export, read to its end."""
        async for chunk in self.chunks:
            self.text += chunk
        await self.response.aclose()
        await self.client.aclose()
        return self.text
