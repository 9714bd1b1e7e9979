"""Schemas the tests and benchmarks attack the engine with."""

from __future__ import annotations

from typing import Any


def ref_pairs(depth: int) -> dict[str, Any]:
    """`depth` nested `anyOf` pairs of references (2^depth paths): a 1 KB exponential schema."""
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "string", "minLength": 5}
    return {"$ref": "#/$defs/d0", "$defs": defs}
