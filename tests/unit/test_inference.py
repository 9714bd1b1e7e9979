from __future__ import annotations

from core.schemas.inference import infer_schema
from core.schemas.limits import check_schema


def test_infer_schema__types_formats_and_required_share() -> None:
    submissions = [
        {"email": f"p{i}@example.com", "age": i, "site": "https://example.com", "day": "2026-10-01"}
        for i in range(95)
    ] + [{"email": f"q{i}@example.com", "age": 1.5, "note": "hi"} for i in range(5)]
    schema = infer_schema(submissions)
    check_schema(schema)  # a suggestion the owner can adopt
    assert schema["properties"] == {
        "age": {"type": "number"},
        "day": {"type": "string", "format": "date"},
        "email": {"type": "string", "format": "email"},
        "note": {"type": "string"},
        "site": {"type": "string", "format": "uri"},
    }
    # present in 100 %, 95 %, 95 %; "note" in 5 % only
    assert schema["required"] == ["age", "day", "email", "site"]


def test_infer_schema__format_only_when_every_value_matches() -> None:
    schema = infer_schema([{"contact": "a@example.com"}, {"contact": "call me"}])
    assert schema["properties"]["contact"] == {"type": "string"}


def test_infer_schema__mixed_types_listed() -> None:
    schema = infer_schema([{"x": "1"}, {"x": True}, {"x": ["a"]}])
    assert schema["properties"]["x"] == {"type": ["array", "boolean", "string"]}
    assert infer_schema([])["properties"] == {}
