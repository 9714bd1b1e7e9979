"""The validation engine: jsonschema-rs with linear-time patterns, checked formats and no
remote references. Imported by the checker's child process and by the save-time checks;
never on the event loop with a visitor's values (see `core.schemas.checker`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, NoReturn

import jsonschema_rs

MAX_ERRORS = 20
# The formats checked in `observe` and `enforce` (docs/api.md). jsonschema-rs knows more
# (ipv4, hostname, time…); those are checked too, by the same rule.
CHECKED_FORMATS = ("email", "uri", "date", "date-time", "uuid")

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


def violations(validator: Validator, values: Mapping[str, Any]) -> list[dict[str, str]]:
    """At most MAX_ERRORS violations, each as the value's path and the keyword it broke
    (`type`, `required`, `format`…), never the value or a message quoting it: they are kept
    in drift records, which outlive an erase."""
    errors: Iterator[Any] = validator.iter_errors(dict(values))
    found = [
        {
            "path": "/" + "/".join(str(p) for p in error.instance_path),
            "keyword": _keyword(list(error.schema_path)),
        }
        for error in islice(errors, MAX_ERRORS)
    ]
    return sorted(found, key=lambda e: (e["path"], e["keyword"]))
