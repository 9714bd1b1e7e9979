"""The placeholder a sample answers before anything has arrived: values shaped like the
form's (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from core.submissions.samples import placeholder_values

NOW = datetime(2026, 10, 13, 9, 30, tzinfo=UTC)


def test_placeholder_values__follow_the_schema_s_properties_types_and_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "name": {"type": "string"},
            "plan": {"enum": ["pro", "team"]},
            "seats": {"type": "integer", "minimum": 5},
            "news": {"type": ["boolean", "null"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"type": "object", "properties": {"city": {"default": "Lyon"}}},
        },
    }
    assert placeholder_values(schema, {}, NOW) == {
        "email": "visitor@example.com",
        "name": "Example name",
        "plan": "pro",
        "seats": 5,
        "news": True,
        "when": "2026-10-13T09:30:00.000Z",
        "tags": ["Example tags"],
        "address": {"city": "Lyon"},
    }


def test_placeholder_values__without_a_schema_use_the_labels_then_an_email_and_a_message() -> None:
    labels = {"first": "First name", "note": "Note"}
    assert placeholder_values(None, labels, NOW) == {
        "first": "Example First name",
        "note": "Example Note",
    }
    assert list(placeholder_values({"type": "object"}, {}, NOW)) == ["email", "message"]


def test_placeholder_values__stop_at_a_bounded_depth() -> None:
    deep: dict[str, object] = {"type": "string"}
    for _ in range(20):
        deep = {"type": "object", "properties": {"inner": deep}}
    value = placeholder_values({"properties": {"outer": deep}}, {}, NOW)["outer"]
    depth = 0
    while value:
        value = value["inner"]
        depth += 1
    assert depth <= 5
