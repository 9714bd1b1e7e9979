"""How submitted field values read: as yes or no, as a ticked consent box, as one text."""

from __future__ import annotations

from typing import Any

_FALSY = frozenset({"", "0", "false", "no", "off"})
# What a ticked consent box (or a JSON client's consent value) sends.
_CONSENT = frozenset({"on", "yes", "true", "1"})


def truthy(value: Any) -> bool:
    """Whether a field's value means yes (a honeypot filled in, `_test` set)."""
    if isinstance(value, list):
        return any(truthy(item) for item in value)
    if isinstance(value, str):
        return value.strip().lower() not in _FALSY
    return bool(value)


def consented(value: Any) -> bool:
    """Whether a consent field's value is one ticked box (or a JSON client's `true`)."""
    if isinstance(value, list):
        return len(value) == 1 and consented(value[0])
    if value is True or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
        return True
    return isinstance(value, str) and value.strip().lower() in _CONSENT


def first_text(value: Any) -> str | None:
    """A field's text: the first of repeated values; None when empty or not text."""
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) and value else None
