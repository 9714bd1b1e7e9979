"""What the submit path needs of each delivery channel, without importing the adapters.

The adapters (pydantic models, HTTP clients) load only where deliveries are sent or
destinations are saved; a submission needs just the attempt limit and the target snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

MAX_ATTEMPTS: Mapping[str, int] = MappingProxyType({"webhook": 10, "email": 8, "telegram": 8})

_TARGET_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"webhook": ("url",), "email": ("to",), "telegram": ("chat_id",)}
)


def snapshot_target(channel: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Where a delivery goes, taken from a destination config validated when it was saved."""
    return {name: config[name] for name in _TARGET_FIELDS[channel] if name in config}
