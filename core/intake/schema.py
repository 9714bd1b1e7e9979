"""Checking submitted values against a form's JSON Schema (`enforce` mode)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from core.platform.logs import log

MAX_SCHEMA_ERRORS = 20


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    # Imported here: only `enforce` forms need it, and it is a third of a cold start.
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict[str, str]]:
    """The JSON Schema violations of `values` (at most 20), each as the path of the value and
    the validator keyword it broke (`type`, `required`, `minLength`…), never the value or a
    message quoting it: these are kept in `schema.drift` events, which outlive an erase.
    An unusable schema finds none."""
    from jsonschema import SchemaError

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except SchemaError:
        log.warning("form schema is not a valid JSON Schema; not enforced")
        return []
    errors = sorted(validator.iter_errors(dict(values)), key=lambda e: list(e.absolute_path))
    return [
        {"path": "/" + "/".join(str(p) for p in e.absolute_path), "keyword": str(e.validator)}
        for e in errors[:MAX_SCHEMA_ERRORS]
    ]
