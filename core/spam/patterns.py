"""The owner's blocked patterns on a linear-time engine: the Rust regex crate of
jsonschema-rs, which has no backreferences or lookaround, so no pattern can take more than
time linear in the text it searches."""

from __future__ import annotations

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


def found(pattern: str, text: str) -> bool:
    """Whether `pattern` (already accepted by `compile_pattern`) occurs in `text`."""
    matcher = compile_pattern(pattern)
    return matcher is not None and bool(matcher.is_valid(text))
