"""The owner's blocked patterns on a linear-time engine: the Rust regex crate of
jsonschema-rs, which has no backreferences or lookaround, so no pattern can take more than
time linear in the text it searches. Linear is not cheap: a pattern such as
`(?:\\p{L}{5}){38}\\d` costs seconds on 64 KiB of letters. So a post's patterns run in the
schema checker's child processes, under its CPU budget (`core.spam.verdict`), never on the
event loop; here they are only compiled, to refuse one the engine cannot run when saved."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any | None:
    """A matcher of `pattern` (searched anywhere in a text), or None when it is not a
    pattern the engine runs."""
    # Imported here: only forms with blocked patterns need the engine (a cold start of the
    # submit path does without it).
    import jsonschema_rs

    try:
        return jsonschema_rs.validator_for(
            {"type": "string", "pattern": pattern},
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except (jsonschema_rs.ValidationError, ValueError):
        return None


def patterns_schema(patterns: tuple[str, ...]) -> dict[str, Any]:
    """The blocked patterns as a JSON Schema the checker runs (`core.schemas.checker`): the
    values' texts (`{"texts": [...]}`) are valid when no text holds a match of any."""
    return {
        "type": "object",
        "properties": {
            "texts": {
                "type": "array",
                "items": {"not": {"anyOf": [{"pattern": pattern} for pattern in patterns]}},
            }
        },
    }


def patterns_key(patterns: tuple[str, ...]) -> str:
    """The checker's key of a list of patterns: the same list, the same key."""
    digest = hashlib.sha256(json.dumps(patterns).encode()).hexdigest()
    return f"spam-patterns:{digest}"
