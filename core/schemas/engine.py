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
    """At most MAX_ERRORS violations, each as the value's path, the keyword it broke (`type`,
    `required`, `format`…), the field it names and a message naming the field and the limit
    (`total` below 1, `coupon` not allowed): never a value or a message quoting one, as they
    are kept in drift records, which outlive an erase. Found in the value with long arrays
    cut to LISTED_ITEMS items, so a rule only a longer array breaks (`maxItems` past the
    cut) may go unlisted: the caller then says `unlisted`."""
    errors: Iterator[Any] = validator.iter_errors(_for_listing(values))
    found = [
        violation
        for error in islice(errors, MAX_ERRORS)
        for violation in _described(
            [str(p) for p in error.instance_path], _keyword(list(error.schema_path)), error.kind
        )
    ][:MAX_ERRORS]
    return sorted(found, key=lambda e: (e["path"], e["keyword"], e["field"]))


def _described(path: list[str], keyword: str, kind: Any) -> list[dict[str, str]]:
    """One violation as what it says: one per property a `required` or an
    `additionalProperties` names."""
    pointer = "/" + "/".join(path)
    facts: dict[str, Any] = kind.as_dict()
    names = {"required": [facts.get("property")]}.get(keyword) or facts.get("unexpected")
    if keyword in ("required", "additionalProperties", "unevaluatedProperties") and names:
        told = "is required" if keyword == "required" else "is not allowed"
        return [
            {
                "path": pointer,
                "keyword": keyword,
                "field": "/".join([*path, str(name)]),
                "message": f"`{'/'.join([*path, str(name)])}` {told}",
            }
            for name in names
        ]
    field = "/".join(path)
    subject = f"`{field}`" if field else "the data"
    return [
        {
            "path": pointer,
            "keyword": keyword,
            "field": field,
            "message": f"{subject} {_limit(keyword, type(kind).__name__, facts)}",
        }
    ]


_ARTICLE = {"integer": "an", "object": "an", "array": "an"}


def _limit(keyword: str, kind: str, facts: dict[str, Any]) -> str:
    """What a keyword asked of the value, in words, from the schema's side only."""
    limit = facts.get("limit")
    match keyword:
        case "minimum":
            return f"is below {limit}"
        case "exclusiveMinimum":
            return f"is not above {limit}"
        case "maximum":
            return f"is above {limit}"
        case "exclusiveMaximum":
            return f"is not below {limit}"
        case "minLength":
            return f"is shorter than {limit} characters"
        case "maxLength":
            return f"is longer than {limit} characters"
        case "minItems":
            return f"has fewer than {limit} items"
        case "maxItems":
            return f"has more than {limit} items"
        case "minProperties":
            return f"has fewer than {limit} properties"
        case "maxProperties":
            return f"has more than {limit} properties"
        case "multipleOf":
            return f"is not a multiple of {facts.get('multiple_of')}"
        case "type":
            kinds = [str(t) for t in facts.get("types") or []]
            return "is not " + " or ".join(f"{_ARTICLE.get(t, 'a')} {t}" for t in kinds)
        case "format":
            return f"is not a valid {facts.get('format', 'value')}"
        case "enum":
            return "is not one of the allowed values"
        case "const":
            return "is not the one allowed value"
        case "pattern":
            return "does not match its pattern"
        case "uniqueItems":
            return "has repeated items"
        case "oneOf" if kind == "OneOfMultipleValid":
            return "matches more than one of the allowed shapes"
        case "anyOf" | "oneOf":
            return "matches none of the allowed shapes"
        case "not":
            return "matches a shape it must not"
        case "contains":
            return "holds no item of the required shape"
        case "propertyNames":
            return "has a property name that is not allowed"
        case "additionalProperties" | "unevaluatedProperties":
            return "has a property that is not allowed"
        case "false":
            return "is not allowed"
        case _:
            return f"breaks `{keyword}`"
