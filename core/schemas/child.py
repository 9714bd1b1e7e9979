"""The checker's child process (`python -m core.schemas.child`): reads one check a line on
stdin, answers on stdout. It holds no state the parent cannot rebuild: a check that spends
more than its CPU budget ends the process (the parent starts another).

A check is `{"key", "schema"?, "values"}`; `key` names an immutable schema version, sent
with its `schema` the first time. The answers, one line each:
`{"valid": true}`; `{"valid": false}` then `{"errors": [...]}` (the verdict first, so a
listing cut short by the budget still leaves it); `{"error": "<kind>"}` when the schema
cannot be compiled or the engine fails; `{"unknown": true}` when the key was not sent with
its schema to this process (the parent sends it again with the schema).
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from collections import OrderedDict
from typing import Any

from core.schemas.checker import CHECK_CPU_BUDGET, UNLISTED
from core.schemas.engine import compile_schema, is_valid, violations

# Compiled schemas kept per child, the oldest dropped first.
CACHED_SCHEMAS = 512
# The child's address space: a schema or a value that asks for more ends the child (its
# check is `schema_unchecked`), not the machine's memory.
MEMORY_LIMIT = 1024 * 1024 * 1024


def _answer(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _check(cache: OrderedDict[str, Any], request: dict[str, Any]) -> None:
    key = request["key"]
    if key in cache:
        cache.move_to_end(key)
    elif request.get("schema") is None:
        _answer({"unknown": True})
        return
    else:
        try:
            cache[key] = compile_schema(request["schema"])
        except Exception as exc:  # the stored schema cannot be compiled: remember that
            cache[key] = exc
        if len(cache) > CACHED_SCHEMAS:
            cache.popitem(last=False)
    validator = cache[key]
    if isinstance(validator, Exception):
        _answer({"error": "invalid_schema"})
        return
    values = request["values"]
    try:
        valid = is_valid(validator, values)
    except Exception:
        _answer({"error": "engine"})
        return
    _answer({"valid": valid})
    if not valid:
        try:
            errors = violations(validator, values)
        except Exception:
            errors = []
        _answer({"errors": errors or [UNLISTED]})


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    cache: OrderedDict[str, Any] = OrderedDict()
    _answer({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        # The check's CPU budget, kept by the kernel: past it SIGPROF ends this process
        # (its default action), even inside the engine's Rust code, which holds the GIL.
        signal.setitimer(signal.ITIMER_PROF, CHECK_CPU_BUDGET)
        _check(cache, request)
        signal.setitimer(signal.ITIMER_PROF, 0)


if __name__ == "__main__":
    main()
