"""Which schema version values are checked against, for a form's submission and a stream's
event alike: one rule over the holder's current versions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Version:
    """A schema version as the checks read it."""

    version: int
    schema: Mapping[str, Any]
    # `manual` (the owner wrote or adopted it) or `suggested` (inference).
    source: str


def checked_version(
    mode: str, current: Mapping[str | None, Version], event_type: str | None = None
) -> Version | None:
    """The version to check against: the holder's current one for `event_type` (a stream's
    versions may name one), else its default (`None`); none under `off`, and under
    `enforce` only one the owner wrote. `current` holds the owner's latest version per type;
    a form's holds instead its latest suggestion while the owner has written none, which
    only `observe` checks against."""
    if mode == "off":
        return None
    version = current.get(event_type) if event_type is not None else None
    if version is None:
        version = current.get(None)
    if version is None or (mode == "enforce" and version.source != "manual"):
        return None
    return version
