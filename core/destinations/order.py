"""The order a submission's fields are shown in: the visitor's, kept beside the values.

`submissions.values` is jsonb, which keeps no key order, so the names are stored in the
order they were posted (`submissions.field_order`). Rows stored before that column existed
have none; they fall back to the form's labels in their declared order, then the other
names alphabetically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def field_order(
    values: Mapping[str, Any], stored: Sequence[str] | None, labels: Mapping[str, Any]
) -> list[str]:
    """The names of `values` in the visitor's order (`stored`), or in the fallback order."""
    source = stored if stored is not None else list(labels)
    order = list(dict.fromkeys(name for name in source if name in values))
    placed = set(order)
    return order + sorted(name for name in values if name not in placed)


def in_field_order(
    values: Mapping[str, Any], stored: Sequence[str] | None, labels: Mapping[str, Any]
) -> dict[str, Any]:
    """`values` as a dict in `field_order`."""
    return {name: values[name] for name in field_order(values, stored, labels)}
