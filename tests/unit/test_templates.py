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
    assert render("{{name}}/{{subscribe}}/{{topics}}/{{empty}}/{{missing}}", values) == (
        "Ada/Yes/a, b/—/—"
    )
