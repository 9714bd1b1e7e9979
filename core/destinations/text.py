"""The plain text of a submission as email and Telegram send it (SPEC §5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.destinations.templates import format_value, render

DEFAULT_SUBJECT = "New form submission"


def _field_values(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Values with attachment fields shown by their file names."""
    values: dict[str, Any] = dict(payload.get("values") or {})
    for name, files in (payload.get("attachments") or {}).items():
        if isinstance(files, list):
            values[name] = [str(f.get("name", "file")) for f in files if isinstance(f, dict)]
    return values


def default_lines(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> list[str]:
    """`label: value` per field in form order, then the receipt line."""
    template = template or {}
    values = _field_values(payload)
    labels: Mapping[str, Any] = template.get("labels") or {}
    order = [str(name) for name in (template.get("field_order") or [])]
    order += [name for name in values if name not in order]
    lines = [f"{labels.get(name) or name}: {format_value(values.get(name))}" for name in order]
    form = payload.get("form", "")
    form_name = template.get("form_name")
    form_text = f"{form_name} ({form})" if form_name else str(form)
    lines.append(
        f"Receipt {payload.get('receipt', '')} · form {form_text} · "
        f"received {payload.get('submitted_at', '')}"
    )
    return lines


def message(payload: Mapping[str, Any], template: Mapping[str, Any] | None) -> tuple[str, str]:
    """The subject and text: the route's `{{field}}` templates, or the default message."""
    template = template or {}
    values = _field_values(payload)
    if payload.get("event") == "form.digest" and isinstance(payload.get("text"), str):
        return str(payload.get("subject") or "Form digest"), str(payload["text"])
    subject = template.get("subject")
    text = template.get("text")
    return (
        render(subject, values) if isinstance(subject, str) and subject else DEFAULT_SUBJECT,
        render(text, values)
        if isinstance(text, str) and text
        else "\n".join(default_lines(payload, template)),
    )
