"""What the database can store, checked before anything is written (docs/submit.md#limits).

PostgreSQL's `text` and `jsonb` refuse NUL (U+0000), UTF-8 cannot carry a lone surrogate
(`"\\ud800"` is valid JSON syntax, but not text), and JSON has no infinite numbers (`1e400`
parses to one). Such input is refused as `422 unstorable_value`; structures past the
limits below as `422 input_limit`. The errors name the field's path, never its value.
The walk is iterative, so no depth can exhaust the stack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from core.platform.errors import InputLimit, MalformedBody, UnstorableValue
from core.platform.limits import MAX_FIELDS

# MAX_FIELDS (core.platform.limits): distinct top-level field names of one submission.
MAX_DEPTH = 32  # levels of nested objects and arrays, the body itself being the first
MAX_FIELD_NAME = 256  # characters of a field name (or of any object key)
_SHOWN_NAME = 64


def _shown(part: str | int) -> str:
    """A path segment safe to echo: no NUL, no surrogate, not over-long."""
    text = str(part)
    text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    return text if len(text) <= _SHOWN_NAME else text[:_SHOWN_NAME] + "…"


def _path(parts: tuple[str | int, ...]) -> str:
    return ".".join(_shown(p) for p in parts) or "body"


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def _storable(value: Any, max_depth: int, max_name: int) -> bool:
    """Whether `value` passes `check_storable`, found without the paths its errors name and
    with every text checked at once (a fraction of the walk's cost: the usual case)."""
    texts: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, Mapping | list):
            if depth >= max_depth:
                return False
            if isinstance(item, list):
                stack.extend((child, depth + 1) for child in item)
                continue
            for key, child in item.items():
                name = str(key)
                if len(name) > max_name:
                    return False
                texts.append(name)
                stack.append((child, depth + 1))
    # Joined, lone surrogates stay lone: Python's text is code points, never UTF-16 pairs.
    return _text_problem("".join(texts)) is None


def check_storable(
    value: Any, *, max_depth: int = MAX_DEPTH, max_name: int = MAX_FIELD_NAME
) -> None:
    """Raise UnstorableValue or InputLimit unless `value` (parsed JSON or form fields) can be
    stored as it is: text without NUL or lone surrogates, finite numbers, at most
    `max_depth` levels, keys of at most `max_name` characters."""
    if _storable(value, max_depth, max_name):
        return
    # Something is wrong: walk again, naming where.
    stack: list[tuple[Any, tuple[str | int, ...], int]] = [(value, (), 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                raise UnstorableValue(
                    "a value cannot be stored", [{"field": _path(path), "message": problem}]
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise UnstorableValue(
                    "a value cannot be stored",
                    [{"field": _path(path), "message": "is not a finite number"}],
                )
        elif isinstance(item, Mapping | list):
            if depth >= max_depth:
                raise InputLimit(
                    f"nested deeper than {max_depth} levels",
                    [{"field": _path(path), "message": f"at most {max_depth} levels of nesting"}],
                )
            if isinstance(item, list):
                stack.extend((v, (*path, i), depth + 1) for i, v in enumerate(item))
                continue
            for key, child in item.items():
                name = str(key)
                problem = _text_problem(name)
                if problem is not None:
                    raise UnstorableValue(
                        "a field name cannot be stored",
                        [{"field": _path((*path, name)), "message": f"the name {problem}"}],
                    )
                if len(name) > max_name:
                    raise InputLimit(
                        f"a field name is over {max_name} characters",
                        [
                            {
                                "field": _path((*path, name)),
                                "message": f"names are at most {max_name} characters",
                            }
                        ],
                    )
                stack.append((child, (*path, name), depth + 1))


def check_field_count(fields: Mapping[str, Any], limit: int = MAX_FIELDS) -> None:
    """Raise InputLimit when a submission has more than `limit` distinct field names."""
    if len(fields) > limit:
        raise InputLimit(
            f"more than {limit} fields",
            [{"field": "body", "message": f"at most {limit} distinct field names"}],
        )


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise UnstorableValue(
            "a value cannot be stored", [{"field": "body", "message": "a number is not finite"}]
        )
    return number


def _no_constant(name: str) -> Any:
    raise MalformedBody(f"{name} is not valid JSON")


def load_json(raw: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse a JSON body that can be stored as parsed (MalformedBody, UnstorableValue or
    InputLimit otherwise)."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise InputLimit(
            f"nested deeper than {max_depth} levels",
            [{"field": "body", "message": f"at most {max_depth} levels of nesting"}],
        ) from None
    except (UnicodeDecodeError, ValueError):
        raise MalformedBody("the body is not valid JSON") from None
    check_storable(value, max_depth=max_depth)
    return value
