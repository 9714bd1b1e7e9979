"""The dashboard's destination form, generated from each type's `Config`: a type module
never writes HTML, and adding a type adds its inputs.

One form serves every type: a type select, one input per config field name (types that
share a field name, such as `url`, share its input), and the separate secret for the
types that take one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_origin

from starlette.datastructures import FormData

from core.destinations.base import Adapter
from core.destinations.registry import ADAPTERS


@dataclass(frozen=True, slots=True)
class ConfigInput:
    """One input of the destination form: a config field name and the types that use it."""

    name: str
    label: str
    hint: str
    is_list: bool


@dataclass(frozen=True, slots=True)
class DestinationForm:
    """What the form for adding a destination shows."""

    types: list[tuple[str, str]]
    inputs: list[ConfigInput]
    secret_hint: str
    rate_hint: str


def _is_list(adapter: Adapter, name: str) -> bool:
    return get_origin(adapter.Config.model_fields[name].annotation) is list


def destination_form() -> DestinationForm:
    """The form's type choices, config inputs and secret hint, from the registry."""
    users: dict[str, list[Adapter]] = {}
    for adapter in ADAPTERS.values():
        for name in adapter.Config.model_fields:
            users.setdefault(name, []).append(adapter)
    inputs = []
    for name, adapters in users.items():
        titles = dict.fromkeys(a.Config.model_fields[name].title or name for a in adapters)
        hint = ", ".join(a.label for a in adapters) + " only"
        if any(a.secret_field == name for a in adapters):
            hint += "; write-only where it is the secret"
        listed = _is_list(adapters[0], name)
        if listed:
            hint += "; comma-separated"
        inputs.append(ConfigInput(name, " / ".join(titles), hint, listed))
    secret_hint = "; ".join(
        f"{a.label}: {a.secret_hint}" for a in ADAPTERS.values() if a.secret_hint
    )
    defaults = ", ".join(
        f"{a.label} {a.rate_per_second:g}" for a in ADAPTERS.values() if a.rate_per_second
    )
    return DestinationForm(
        types=[(a.type, a.label) for a in ADAPTERS.values()],
        inputs=inputs,
        secret_hint=secret_hint,
        rate_hint=f"sends a second, all workers together; empty: the type's default ({defaults}"
        ", none for the others)",
    )


def posted_rate(posted: FormData) -> dict[str, Any] | None:
    """The `rate_limit` a posted `rate_per_second` gives: None when empty (the type's
    default); text that is no number is passed on for the model to refuse."""
    text = str(posted.get("rate_per_second") or "").strip()
    if not text:
        return None
    try:
        return {"per_second": float(text)}
    except ValueError:
        return {"per_second": text}


def posted_config(adapter: Adapter, posted: FormData) -> dict[str, Any]:
    """The `config` a posted form gives for `adapter`'s type (lists split on commas)."""
    config: dict[str, Any] = {}
    for name in adapter.Config.model_fields:
        text = str(posted.get(name) or "").strip()
        if _is_list(adapter, name):
            config[name] = [part.strip() for part in text.split(",") if part.strip()]
        else:
            config[name] = text
    return config
