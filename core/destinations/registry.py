"""The registry of destination types: one module each, looked up by `type`.

This list is the only place besides a type's own module that knows the type; `postbag
migrate` records it (`DESTINATION_TYPES`) in `destination_types` so the database refuses
any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from core.destinations import (
    airtable,
    discord,
    email,
    google_sheets,
    notion,
    slack,
    teams,
    telegram,
    webhook,
)
from core.destinations.base import Adapter

ADAPTERS: Mapping[str, Adapter] = MappingProxyType(
    {
        module.adapter.type: module.adapter
        for module in (
            webhook,
            email,
            telegram,
            slack,
            discord,
            teams,
            google_sheets,
            airtable,
            notion,
        )
    }
)

# Each type's name and attempt limit, as `migrate` records them in `destination_types`.
DESTINATION_TYPES: Mapping[str, int] = MappingProxyType(
    {name: adapter.max_attempts for name, adapter in ADAPTERS.items()}
)
