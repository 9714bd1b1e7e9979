from __future__ import annotations

import pytest

from core.destinations.templates import render, template_errors


@pytest.mark.parametrize(
    "text", ["Hello {{name}}", "{{ email }} wrote", "plain text", "{{a}}{{b_c}}"]
)
def test_template_errors__placeholders_only_are_valid(text: str) -> None:
    assert template_errors(text) == []


@pytest.mark.parametrize(
    "text", ["{{ name | upper }}", "{% if x %}y{% endif %}", "{{ a + b }}", "{# c #}", "{{x"]
)
def test_template_errors__anything_else_is_refused(text: str) -> None:
    assert template_errors(text) != []


def test_render__substitutes_values_as_plain_text() -> None:
    values = {"name": "Ada", "subscribe": True, "topics": ["a", "b"], "empty": ""}
    text = "{{name}}/{{subscribe}}/{{topics}}/{{empty}}/{{missing}}"
    assert render(text, values, 1000) == "Ada/Yes/a, b/—/—"
    # Cut at the limit, wherever it falls: in a literal, a value, a list.
    assert [render(text, values, n) for n in (2, 4, 9, 10)] == [
        "Ad",
        "Ada/",
        "Ada/Yes/a",
        "Ada/Yes/a,",
    ]


def test_render__stops_at_its_limit_whatever_the_template_repeats() -> None:
    long = "x" * 256_000
    values = {"a": long, "items": [long] * 50}
    text = "{{a}} " * 2_000 + "{{items}}"
    rendered = render(text, values, 4_096)
    assert rendered == long[:4_096]
    assert render("{{items}}", values, 10) == "x" * 10
    assert render("start {{a}}", {"a": "b"}, 5) == "start"[:5]
