"""Checking values against a schema off the event loop, within a budget.

Checks run in child processes (`core.schemas.child`), at most CHILDREN at once per event
loop. A check that spends more than CHECK_CPU_BUDGET seconds of CPU ends its child (the
kernel's timer, see the child), and one the parent has waited WALL_LIMIT seconds for is
ended by the parent; another child is started for the next check. So neither a visitor's
values nor a tenant's schema can hold a CPU, the loop or memory for longer. A check that
waited QUEUE_WAIT seconds for a free child is not run. Either way the caller gets a verdict:
the submit path stores such a submission `quarantined` with reason `schema_unchecked`,
never refuses or stalls it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.platform.logs import log

CHILDREN = 2
CHECK_CPU_BUDGET = 0.05
# What the parent waits for an answer, whatever the child's CPU says: a child starved of
# CPU on a loaded machine, or a value slow to cross the pipe.
WALL_LIMIT = 2.0
QUEUE_WAIT = 2.0
START_TIMEOUT = 10.0
# Schema keys a parent remembers having sent to one child (a hint: the child says when it
# has dropped one).
_KNOWN_KEYS = 512
_READ_LIMIT = 1024 * 1024
# The folder holding the `core` package, first on the child's path: the child imports it
# however this process found it (a function's task root, an installed package, a checkout).
_CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What stands for the violations of values that break the schema when they cannot be
# listed (the listing ran past the check's budget, or the engine failed while listing).
UNLISTED = {
    "path": "/",
    "keyword": "unlisted",
    "field": "",
    "message": "the data breaks the schema (what it breaks could not be listed in time)",
}

_UNCHECKED = {
    "path": "/",
    "keyword": "unchecked",
    "field": "",
    "message": "the data could not be checked within the check's time",
}
_SCHEMA_ERROR = {
    "path": "/",
    "keyword": "schema_error",
    "field": "",
    "message": "the schema could not be applied",
}

Outcome = Literal["valid", "invalid", "unchecked", "error"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """How values fared against a schema: `valid`, `invalid` (with at most 20 violations),
    `unchecked` (the budget ran out, or no child was free: `why` says which), or `error`
    (the stored schema cannot be compiled, or the engine failed)."""

    outcome: Outcome
    errors: list[dict[str, str]] = field(default_factory=list)
    why: str | None = None


def judged(verdict: Verdict) -> tuple[str | None, list[dict[str, str]]]:
    """A verdict as a stored reason (`schema_violation`, `schema_unchecked`, `schema_error`,
    or None when valid) and the violations it lists (paths and keywords)."""
    if verdict.outcome == "valid":
        return None, []
    if verdict.outcome == "invalid":
        return "schema_violation", verdict.errors
    if verdict.outcome == "unchecked":
        return "schema_unchecked", [_UNCHECKED]
    return "schema_error", [_SCHEMA_ERROR]


class _ChildGone(Exception):
    """The child ended (killed, or out of memory) before answering."""


class _Child:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.known: set[str] = set()

    @classmethod
    async def start(cls) -> _Child:
        path = os.pathsep.join(p for p in (_CODE_ROOT, os.environ.get("PYTHONPATH")) if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "core.schemas.child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
            limit=_READ_LIMIT,
        )
        child = cls(process)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await child._read()
        except BaseException:
            child.kill()
            raise
        return child

    async def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if not line:
            raise _ChildGone
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        await self.process.stdin.drain()
        return await self._read()

    async def check(
        self, key: str, schema: Mapping[str, Any], values: Mapping[str, Any], verdict: list[bool]
    ) -> Verdict:
        """Run one check; `verdict` receives the yes/no as soon as it is known."""
        request: dict[str, Any] = {"key": key, "values": values}
        if key in self.known:
            answer = await self._send(request)
            if answer.get("unknown"):
                self.known.discard(key)
        if key not in self.known:
            if len(self.known) >= _KNOWN_KEYS:
                self.known.clear()
            answer = await self._send({**request, "schema": schema})
            self.known.add(key)
        if "error" in answer:
            return Verdict("error", why=str(answer["error"]))
        if answer["valid"]:
            return Verdict("valid")
        verdict.append(False)
        listing = await self._read()
        return Verdict("invalid", list(listing["errors"]))

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


class SchemaChecker:
    """The children of one event loop and the checks waiting for them."""

    def __init__(self, children: int = CHILDREN) -> None:
        self._slots = asyncio.Semaphore(children)
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()

    async def check(
        self, key: str, schema: Mapping[str, Any], values: Mapping[str, Any]
    ) -> Verdict:
        """Check `values` against `schema` (`key` names it: the same key, the same schema)."""
        try:
            async with asyncio.timeout(QUEUE_WAIT):
                await self._slots.acquire()
        except TimeoutError:
            return Verdict("unchecked", why="busy")
        try:
            return await self._check_on_child(key, schema, values)
        finally:
            self._slots.release()

    async def _check_on_child(
        self, key: str, schema: Mapping[str, Any], values: Mapping[str, Any]
    ) -> Verdict:
        try:
            child = self._idle.pop() if self._idle else await _Child.start()
        except (OSError, TimeoutError, _ChildGone, ValueError):
            log.exception("schema checker could not start")
            return Verdict("unchecked", why="unavailable")
        self._busy.add(child)
        verdict: list[bool] = []
        try:
            async with asyncio.timeout(WALL_LIMIT):
                result = await child.check(key, schema, values, verdict)
        except (TimeoutError, _ChildGone, ConnectionError, ValueError):
            self._busy.discard(child)
            child.kill()
            await child.process.wait()  # reaped here, once
            if verdict:
                # Broken for sure; the violations could not be listed within the budget.
                return Verdict("invalid", [dict(UNLISTED)])
            return Verdict("unchecked", why="budget")
        except BaseException:
            self._busy.discard(child)
            child.kill()
            raise
        self._busy.discard(child)
        self._idle.append(child)
        return result

    async def close(self) -> None:
        children = [*self._idle, *self._busy]
        self._idle.clear()
        self._busy.clear()
        for child in children:
            if child.process.stdin is not None:
                child.process.stdin.close()
            child.kill()
        for child in children:
            await child.process.wait()


# Not on Services: a checker's children live as long as its event loop, like the HTTP
# client's (`core.destinations.http`), and are ended where a loop ends.
_checkers: dict[asyncio.AbstractEventLoop, SchemaChecker] = {}


def schema_checker() -> SchemaChecker:
    """The running event loop's checker (started on first use)."""
    loop = asyncio.get_running_loop()
    checker = _checkers.get(loop)
    if checker is None:
        for old in [other for other in _checkers if other.is_closed()]:
            del _checkers[old]
        checker = _checkers[loop] = SchemaChecker()
    return checker


async def close_schema_checker() -> None:
    """End the running loop's children (shutdown, the end of a Lambda invocation's loop)."""
    checker = _checkers.pop(asyncio.get_running_loop(), None)
    if checker is not None:
        await checker.close()
