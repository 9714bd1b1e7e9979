"""Destination adapters, one module per type, looked up by `type`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from core.destinations import email, telegram, webhook
from core.destinations.base import Adapter

ADAPTERS: Mapping[str, Adapter] = MappingProxyType(
    {module.adapter.type: module.adapter for module in (webhook, email, telegram)}
)
