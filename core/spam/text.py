"""The text a submission's values hold, as the spam rules and the learned filter read it:
every string, with its field's name, within a bound."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# At most this many characters of a submission are read by the rules and the filter (the
# body limits bound a submission anyway; this keeps the spam checks' work small).
MAX_TEXT = 64 * 1024
_WORD = re.compile(r"\w+", re.UNICODE)


def texts(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, text) for every string in the values, nested ones under their top field,
    until MAX_TEXT characters were read."""
    found: list[tuple[str, str]] = []
    left = MAX_TEXT
    for field, value in values.items():
        for text in _strings(value):
            if left <= 0:
                return found
            found.append((field, text[:left]))
            left -= len(text)
    return found


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def words(text: str) -> list[str]:
    """The words of `text`, case-folded."""
    return _WORD.findall(text.casefold())
