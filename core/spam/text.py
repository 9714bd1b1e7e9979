"""The text a submission's values hold, as the spam rules, duplicates and the learned filter
read it: every string, with its field's name, within a bound, each read once (its
case-folded form and its words are worked out on first use and shared by every check)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

# At most this many characters of a submission are read by the rules and the filter (the
# body limits bound a submission anyway; this keeps the spam checks' work small).
MAX_TEXT = 64 * 1024
_WORD = re.compile(r"\w+", re.UNICODE)


class Piece:
    """One string of the values, under its top field."""

    def __init__(self, field: str, text: str) -> None:
        self.field = field
        self.text = text

    @cached_property
    def folded(self) -> str:
        """The text case-folded."""
        return self.text.casefold()

    @cached_property
    def words(self) -> list[str]:
        """The words of the text, case-folded."""
        return _WORD.findall(self.folded)

    @cached_property
    def phrase(self) -> str:
        """The words with one space between them and one at each end (` seo services `)."""
        return " " + " ".join(self.words) + " "


def texts(values: Mapping[str, Any]) -> list[Piece]:
    """A piece for every string in the values, nested ones under their top field, until
    MAX_TEXT characters were read."""
    found: list[Piece] = []
    left = MAX_TEXT
    for field, value in values.items():
        for text in _strings(value):
            if left <= 0:
                return found
            found.append(Piece(field, text[:left]))
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


def phrase_of(text: str) -> str:
    """The phrase form of `text` (a blocked word as the words rule looks for it)."""
    return Piece("", text).phrase
