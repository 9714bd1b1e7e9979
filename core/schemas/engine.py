"""The validation engine: jsonschema-rs with linear-time patterns, checked formats and no
remote references. Imported by the checker's child process and by the save-time checks;
never on the event loop with a visitor's values (see `core.schemas.checker`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, NoReturn

import jsonschema_rs

MAX_ERRORS = 20
# The listing of violations sees at most this many items of each array: the engine lists
# eagerly, and a 256 KB array of wrong items would take seconds (the verdict itself always
# sees the whole value).
LISTED_ITEMS = 256

Validator = Any


def _refuse_remote(uri: str) -> NoReturn:
    raise ValueError(f"remote references are not allowed ({uri})")


def compile_schema(schema: Mapping[str, Any]) -> Validator:
    """The validator of `schema` (draft 2020-12 unless `$schema` says), raising
    `jsonschema_rs.ValidationError` for a schema that is invalid, names a reference it
    cannot resolve, or holds a pattern the linear-time engine cannot run."""
    return jsonschema_rs.validator_for(
        dict(schema),
        validate_formats=True,
        pattern_options=jsonschema_rs.RegexOptions(),
        retriever=_refuse_remote,
    )


def is_valid(validator: Validator, values: Mapping[str, Any]) -> bool:
    """Whether `values` fit: the cheap verdict, which stops at the first violation."""
    return bool(validator.is_valid(dict(values)))


def _keyword(schema_path: list[str | int]) -> str:
    return next((str(p) for p in reversed(schema_path) if isinstance(p, str)), "")


def _for_listing(value: Any) -> Any:
    if isinstance(value, list):
        return [_for_listing(item) for item in value[:LISTED_ITEMS]]
    if isinstance(value, dict):
        return {key: _for_listing(item) for key, item in value.items()}
    return value


def violations(validator: Validator, values: Mapping[str, Any]) -> list[dict[str, str]]:
    """At most MAX_ERRORS violations, each as the value's path and the keyword it broke
    (`type`, `required`, `format`…), never the value or a message quoting it: they are kept
    in drift records, which outlive an erase. Found in the value with long arrays cut to
    LISTED_ITEMS items, so a rule only a longer array breaks (`maxItems` past the cut)
    may go unlisted: the caller then says `unlisted`."""
    errors: Iterator[Any] = validator.iter_errors(_for_listing(values))
    found = [
        {
            "path": "/" + "/".join(str(p) for p in error.instance_path),
            "keyword": _keyword(list(error.schema_path)),
        }
        for error in islice(errors, MAX_ERRORS)
    ]
    return sorted(found, key=lambda e: (e["path"], e["keyword"]))
